"""`lockyard serve`: the lock tools for one agent, as a stdio MCP server."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import anyio
import typer

from ..infra.stdio_server import ServeConfigError, ServeSession, open_serve_store
from ._errors import CliError, ExitCode, reports_errors

SERVE_HELP = """Serve lock_acquire / lock_release for ONE agent over stdio (MCP).

For Claude Code, Codex and other agent CLIs: configure it as a stdio MCP server, e.g.
`{"command": "lockyard", "args": ["serve", "--agent-id", "alice", "--repo", "."]}`.
The tools, schemas and results are those of the in-process server. stdout carries the
protocol only; logs go to stderr.

Bad configuration (no agent id, repo not a directory, unusable lock directory) exits with a
one-line error before any MCP traffic: 2 usage, 3 lock directory. When the session ends
(stdin closed, SIGTERM, SIGINT) the locks this process holds for the agent are released and
logged; a crashed server's locks are reclaimed as stale (their pid is dead).
"""


def serve_command(
    agent_id: Annotated[
        str | None,
        typer.Option(
            "--agent-id",
            envvar="LOCKYARD_AGENT_ID",
            help="Who the locks belong to; unique per agent. Env: LOCKYARD_AGENT_ID.",
            show_default=False,
        ),
    ] = None,
    repo: Annotated[
        Path | None,
        typer.Option(
            "--repo",
            help="The repository the agent edits (paths are resolved inside it).",
            show_default=False,
        ),
    ] = None,
    lock_dir: Annotated[
        Path | None,
        typer.Option(
            "--lock-dir",
            envvar="LOCKYARD_LOCK_DIR",
            help="The shared lock directory. Env: LOCKYARD_LOCK_DIR; default: a per-user "
            "runtime directory.",
            show_default=False,
        ),
    ] = None,
    log_level: Annotated[
        str,
        typer.Option("--log-level", help="stderr log level: DEBUG, INFO, WARNING, ERROR."),
    ] = "INFO",
) -> None:
    _serve(agent_id, repo, lock_dir, log_level)


@reports_errors
def _serve(agent_id: str | None, repo: Path | None, lock_dir: Path | None, log_level: str) -> None:
    level = log_level.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise CliError(f"unknown --log-level {log_level!r}", ExitCode.USAGE,
                       "use DEBUG, INFO, WARNING or ERROR")  # fmt: skip
    if agent_id is None or not agent_id.strip():
        raise CliError("serve needs an agent id", ExitCode.USAGE,
                       "pass --agent-id ID (or set LOCKYARD_AGENT_ID)")  # fmt: skip
    if repo is None:
        raise CliError("serve needs the repository", ExitCode.USAGE, "pass --repo PATH")
    try:
        store = open_serve_store(agent_id, repo, lock_dir)
    except ServeConfigError as exc:
        code = ExitCode.LOCK_DIR if exc.lock_dir_problem else ExitCode.USAGE
        raise CliError(str(exc), code, exc.hint) from None
    logging.basicConfig(
        level=level, stream=sys.stderr, format="lockyard serve [%(name)s] %(levelname)s %(message)s"
    )
    session = ServeSession(store, agent_id)
    logging.getLogger("lockyard.serve").info(
        "serving agent %s on %s (lock dir %s)", agent_id, store.namespace, store.lock_dir
    )
    anyio.run(session.run_stdio)


def register(app: typer.Typer) -> None:
    app.command(
        "serve",
        help=SERVE_HELP,
        short_help="Serve the lock tools for one agent over stdio (MCP).",
    )(serve_command)
