"""The `lockyard` command line (entry point)."""

from __future__ import annotations

import typer

from . import monitor, serve

app = typer.Typer(help="File locks and a deadlock monitor for parallel coding agents.")


@app.callback()
def _root() -> None:
    """lockyard: file locks and a deadlock monitor for parallel coding agents."""


serve.register(app)
monitor.register(app)


def main() -> None:
    app()
