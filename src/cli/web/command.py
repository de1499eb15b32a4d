"""`lockyard web`: the typer command (Starlette and uvicorn load only when it runs)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from .._errors import EXIT_CODES_HELP, CliError, ExitCode, reports_errors
from .._format import quiet_library_logs
from .._lockdir import LOCK_DIR_HELP
from .._options import backend_option, lock_dir_option
from .access import TOKEN_ENV, Access, AccessSettingError

HELP = f"""Serve a live page of the locks: holders and queues, the wait-for graph (agents
and files as nodes, a deadlock cycle in red with its victim marked) and a timeline of holds,
waits, deadlocks and denied writes from the journal.

The page is read-only and updated by push. It listens on 127.0.0.1 (this machine only) by
default; any other address needs a token (--token or ${TOKEN_ENV}): open the page once as
http://HOST:PORT/?token=TOKEN and it keeps the token in a cookie. Every file of the page
ships with lockyard (no internet needed).
"""


def register(app: typer.Typer) -> None:
    app.command("web", help=HELP, epilog=EXIT_CODES_HELP)(web)


@reports_errors
def web(
    lock_dir: Annotated[Path | None, lock_dir_option(LOCK_DIR_HELP)] = None,
    backend: Annotated[str | None, backend_option()] = None,
    host: Annotated[
        str,
        typer.Option(
            metavar="ADDRESS",
            help="The address to listen on; one that is not loopback needs a token.",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(min=0, max=65535, help="The port to listen on (0: any free port)."),
    ] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            metavar="TOKEN",
            help=f"The token a request must carry (default: ${TOKEN_ENV}); prefer the "
            "variable: a command line can be read by other users of the machine.",
            show_default=False,
        ),
    ] = None,
) -> None:
    quiet_library_logs()
    try:
        access = Access.for_bind(host, token if token is not None else os.environ.get(TOKEN_ENV))
    except AccessSettingError as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    from ..views.feed import BoardFeed, store_opener
    from .serving import bind, serve_forever

    feed = BoardFeed(store_opener(lock_dir, backend))
    listener = bind(host, port)
    serve_forever(feed, access, listener, on_ready=_announce(access))


def _announce(access: Access) -> Callable[[str], None]:
    def say(address: str) -> None:
        typer.echo(f"lockyard web: {address}")
        if access.token is not None:
            typer.echo("open it once as that address + ?token=TOKEN; Ctrl-C stops it")
        else:
            typer.echo("Ctrl-C stops it")

    return say
