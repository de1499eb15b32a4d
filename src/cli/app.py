"""The `lockyard` command line (entry point)."""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Any

import typer

from ._errors import EXIT_CODES_HELP
from ._options import LockyardCommand, LockyardGroup

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


# Each command's module, imported only when that command runs (or for the full --help): a
# command's start-up must not pay for the imports of the others (the lock store for serve,
# the demo's scenario and the live view for demo, psycopg for the PostgreSQL backend).
COMMAND_MODULES: dict[str, str] = {
    "demo": "lockyard.cli.demo.command",
    "status": "lockyard.cli.status",
    "lock": "lockyard.cli.lock",
    "log": "lockyard.cli.log",
    "stats": "lockyard.cli.stats",
    "clean": "lockyard.cli.clean",
    "serve": "lockyard.cli.serve",
    "monitor": "lockyard.cli.monitor",
    "top": "lockyard.cli.top.command",
    "web": "lockyard.cli.web.command",
    "ipc-host": "lockyard.cli.ipc_host",
    "init": "lockyard.cli.init",
    "uninstall": "lockyard.cli.init",
    "doctor": "lockyard.cli.doctor",
    "policy": "lockyard.cli.policy",
}


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"lockyard {version('lockyard')}")
        raise typer.Exit()


def build_app(only: str | None = None) -> typer.Typer:
    """The command line with every command, or with just `only` (a name of COMMAND_MODULES)."""
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
    def _root(
        version: Annotated[
            bool,
            typer.Option(
                "--version",
                callback=_version,
                is_eager=True,
                help="Print lockyard's version and exit.",
                metavar=" ",
            ),
        ] = False,
    ) -> None:
        """lockyard: file locks and a deadlock monitor for parallel coding agents."""

    modules = [COMMAND_MODULES[only]] if only in COMMAND_MODULES else COMMAND_MODULES.values()
    for module in dict.fromkeys(modules):
        importlib.import_module(module).register(app)
    if only is None or only not in COMMAND_MODULES:
        _register_hook(app)
    return app


def _register_hook(app: typer.Typer) -> None:
    from . import hook

    @app.command(
        "hook",
        help=hook.HOOK_USAGE,
        short_help="Guard one tool call of an agent CLI session (run by the CLI's hooks).",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )
    def _hook(ctx: typer.Context) -> None:
        raise typer.Exit(hook.main(list(ctx.args)))


def __getattr__(name: str) -> Any:
    """`app`: the full command line, built on first use (tests and tools import it)."""
    if name == "app":
        return build_app()
    raise AttributeError(name)


def main(argv: list[str] | None = None) -> None:
    """Run the command line, importing only the command that is asked for."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:  # no command needed to say it
        from importlib.metadata import version

        print(f"lockyard {version('lockyard')}")
        return
    first = next((arg for arg in args if not arg.startswith("-")), None)
    build_app(first)(args)
