"""The `lockyard` command line (entry point)."""

from __future__ import annotations

import typer

from . import clean, monitor, serve, status
from ._errors import EXIT_CODES_HELP
from .demo import command as demo

app = typer.Typer(
    help="File locks and a deadlock monitor for parallel coding agents.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """lockyard: file locks and a deadlock monitor for parallel coding agents.

    Start with `lockyard demo`: eight scripted agents share a throwaway repo.
    """


demo.register(app)
status.register(app)
clean.register(app)
serve.register(app)
monitor.register(app)


def main() -> None:
    app()
