"""The `lockyard` command line (entry point)."""

from __future__ import annotations

from typing import Any

import typer

from . import clean, hook, init, ipc_host, monitor, serve, status
from ._errors import EXIT_CODES_HELP
from ._options import LockyardCommand, LockyardGroup
from .demo import command as demo

HELP = """File locks and a deadlock monitor for parallel coding agents.

Start with `lockyard demo`: eight scripted agents edit a throwaway repo through the lock
tools, and the summary checks that no edit was lost. `status` and `clean` inspect and tidy
a lock directory; `serve` and `monitor` run the tools and the deadlock monitor across
processes; `ipc-host` (with `serve --ipc` inside each container) serves sandboxed agents
through mounted folders. Every command takes --help; scripts can rely on --json and the exit
codes below.
"""


class _LockyardApp(typer.Typer):
    """Every command registered on it gets `LockyardCommand` (its `--help` shows no `<bool>`)."""

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", LockyardCommand)
        return super().command(*args, **kwargs)


app = _LockyardApp(
    cls=LockyardGroup,
    help=HELP,
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Markdown mode reflows the hard-wrapped help texts to the terminal's width.
    rich_markup_mode="markdown",
)


@app.callback()
def _root() -> None:
    """lockyard: file locks and a deadlock monitor for parallel coding agents."""


demo.register(app)
status.register(app)
clean.register(app)
serve.register(app)
monitor.register(app)
ipc_host.register(app)
init.register(app)


@app.command(  # type: ignore[untyped-decorator]  # typer's command() is untyped via _LockyardApp
    "hook",
    help=hook.HOOK_USAGE,
    short_help="Guard one tool call of an agent CLI session (run by the CLI's hooks).",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def _hook(ctx: typer.Context) -> None:
    raise typer.Exit(hook.main(list(ctx.args)))


def main() -> None:
    app()
