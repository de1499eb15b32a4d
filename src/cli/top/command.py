"""`lockyard top`: the typer command (Textual loads only when it runs)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from .._errors import EXIT_CODES_HELP, CliError, ExitCode, reports_errors
from .._format import quiet_library_logs
from .._lockdir import LOCK_DIR_HELP
from .._options import backend_option, lock_dir_option

HELP = """Watch the locks live: every holder with its age and fencing number, each queue in
arrival order with how long each agent has waited, who waits for whom, and any deadlock
cycle (in red, with the agent the monitor would ask to give way).

Updated by push (inotify on the lock directory, LISTEN/NOTIFY on PostgreSQL) the moment a
lock changes hands. Keys: / filter by file or agent, c only the locks someone waits for,
Esc clear the filter, q quit. Read-only: it never slows the agents down.
"""


def register(app: typer.Typer) -> None:
    app.command("top", help=HELP, epilog=EXIT_CODES_HELP)(top)


@reports_errors
def top(
    lock_dir: Annotated[Path | None, lock_dir_option(LOCK_DIR_HELP)] = None,
    backend: Annotated[str | None, backend_option()] = None,
    filter_text: Annotated[
        str,
        typer.Option(
            "--filter",
            metavar="TEXT",
            help="Show only the locks whose file or agent contains TEXT (/ changes it).",
        ),
    ] = "",
) -> None:
    if not (sys.stdout.isatty() and sys.stdin.isatty()):
        raise CliError(
            "lockyard top needs a terminal",
            ExitCode.USAGE,
            "run it in a terminal; a script reads `lockyard status --json`",
        )
    quiet_library_logs()
    from ..views.feed import BoardFeed, store_opener

    feed = BoardFeed(store_opener(lock_dir, backend))
    from .app import TopApp
    from .render import Filters

    TopApp(feed, Filters(filter_text.strip())).run()
