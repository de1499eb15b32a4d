"""`lockyard serve`: the lock tools for one agent, as a stdio MCP server."""

from __future__ import annotations

import logging
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer

from ..infra.agentcli.guard_address import GuardPortError
from ..infra.agentcli.guard_address import guard_port as chosen_guard_port
from ..infra.agentcli.names import CLI_NAMES
from ..infra.clone_state import checkout_root
from ..infra.crossproc.agent_claims import AgentClaim, AgentIdInUseError
from ..infra.lockstore import LockBackend, LockStore, LockStoreError, chosen_spec, is_postgres_spec
from ..infra.session.registry import SessionRegistryError
from ..infra.session.serve_session import (
    DerivedSession,
    derive_session,
    register_session,
    unregister_session,
)
from ..infra.session.session_ids import SessionIdError, check_cli_name
from ..infra.transports.stdio.serve_config import ServeConfigError, open_serve_store
from ._errors import CliError, ExitCode, reports_errors
from ._options import backend_option, lock_dir_option, namespace_option

if TYPE_CHECKING:
    from ..infra.transports.stdio.server import ServeSession

SERVE_HELP = (
    "Serve lock_acquire / lock_release for ONE agent over stdio (MCP), for Claude Code, Codex "
    "and other agent CLIs. The tools, schemas and results are those of the in-process server; "
    "stdout carries the protocol only, logs go to stderr.\n\n"
    'Example MCP config: {"command": "lockyard", "args": ["serve", "--agent-id", "alice", '
    '"--repo", "."]}\n\n'
    "Bad configuration (no agent id, repo not a directory, unusable lock directory) exits before "
    "any MCP traffic with a one-line error: exit 2 (usage) or 3 (lock directory).\n\n"
    "When the session ends (stdin closed, SIGTERM, SIGINT) the locks it took and still holds "
    "are released and logged. A crashed server's locks name a dead process and are reclaimed "
    "as stale by the next agent that wants them (or by `lockyard clean`)."
)


def serve_command(
    agent_id: Annotated[
        str | None,
        typer.Option(
            "--agent-id",
            envvar="LOCKYARD_AGENT_ID",
            help="Who the locks belong to; unique per agent (default: derived from the CLI "
            "process that started this server).",
            show_default=False,
        ),
    ] = None,
    repo: Annotated[
        Path | None,
        typer.Option(
            "--repo",
            help="The repository the agent edits (default: the git repository around the "
            "working directory).",
            show_default=False,
        ),
    ] = None,
    lock_dir: Annotated[
        Path | None,
        lock_dir_option(
            "The lock directory shared by all agents (default: $LOCKYARD_LOCK_DIR, else a "
            "per-user runtime directory)."
        ),
    ] = None,
    namespace: Annotated[
        str | None,
        namespace_option(
            "The repository's name for locks: checkouts given one name share locks "
            "wherever they are (other hosts, containers). Default: the name derived from "
            "the repository, shared by its git worktrees."
        ),
    ] = None,
    log_level: Annotated[
        str,
        typer.Option("--log-level", help="stderr log level: DEBUG, INFO, WARNING, ERROR."),
    ] = "INFO",
    cli: Annotated[
        str,
        typer.Option(
            "--cli",
            help=f"The agent CLI this server runs under (as `lockyard init` writes it: "
            f"{', '.join(CLI_NAMES)}; any name of a-z, 0-9 and '-' otherwise): names the "
            "session in derived agent ids and in `lockyard status`.",
        ),
    ] = "agent",
    progress_interval: Annotated[
        float,
        typer.Option(
            "--progress-interval",
            envvar="LOCKYARD_PROGRESS_INTERVAL",
            help="Seconds between progress notifications while lock_acquire waits.",
            min=0.05,
            max=3600.0,
        ),
    ] = 10.0,
    ipc: Annotated[
        Path | None,
        typer.Option(
            "--ipc",
            metavar="DIR",
            help="Inside a sandbox: send every call through this IPC folder to "
            "`lockyard ipc-host` (no lock directory, no network; the agent id is the folder's "
            "name on the host). --repo defaults to the current directory.",
            show_default=False,
        ),
    ] = None,
    heartbeat_interval: Annotated[
        float,
        typer.Option(
            "--heartbeat-interval",
            min=0.05,
            max=600.0,
            help="With --ipc: seconds between heartbeats (keep well under the host's "
            "--stale-after).",
        ),
    ] = 5.0,
    host_timeout: Annotated[
        float,
        typer.Option(
            "--host-timeout",
            min=0.5,
            max=86400.0,
            help="With --ipc: a call fails once the host shows no sign of life for this long.",
        ),
    ] = 30.0,
    backend: Annotated[str | None, backend_option()] = None,
    guard_port: Annotated[
        str | None,
        typer.Option(
            "--guard-port",
            envvar="LOCKYARD_GUARD_PORT",
            help="The loopback port where the servers of this lock directory answer the agent "
            "CLIs' guard hooks (default: derived from the lock directory's path, the port "
            "`lockyard init` writes into HTTP hooks).",
            show_default=False,
        ),
    ] = None,
) -> None:
    if ipc is not None:
        from .serve_ipc import serve_ipc

        serve_ipc(ipc, repo, agent_id, lock_dir, backend, log_level, progress_interval,
                  heartbeat_interval, host_timeout)  # fmt: skip
        return
    _serve(agent_id, repo, lock_dir, log_level, progress_interval, backend, cli, namespace,
           guard_port)  # fmt: skip


@reports_errors
def _serve(
    agent_id: str | None,
    repo: Path | None,
    lock_dir: Path | None,
    log_level: str,
    progress_interval: float,
    backend: str | None = None,
    cli: str = "agent",
    namespace: str | None = None,
    guard_port: str | None = None,
) -> None:
    # Each error is ONE line (what is wrong; what to do): agent CLIs log a failed MCP server's
    # stderr, often only its last line.
    level = log_level.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise _usage(f"unknown --log-level {log_level!r}; use DEBUG, INFO, WARNING or ERROR")
    session: DerivedSession | None = None
    if not agent_id:  # absent or empty: the session of the CLI that started this server
        spec = chosen_spec(backend)
        if spec is not None and is_postgres_spec(spec):
            raise _usage(
                "an agent CLI session (no --agent-id) keeps its session and hooks in a lock "
                "directory; pass --agent-id ID to serve from PostgreSQL"
            )
        try:
            check_cli_name(cli)
            session = derive_session(cli)
        except SessionIdError as exc:
            raise _usage(str(exc)) from None
        agent_id = session.agent_id
    if repo is None:
        found = checkout_root(os.getcwd())
        if found is None:
            raise _usage(f"{Path.cwd()} is in no git repository; pass --repo PATH")
        repo = Path(found)
    try:
        store = open_serve_store(
            agent_id,
            repo,
            lock_dir,
            backend,
            None if session is None else session.owner,
            namespace,
        )
    except ServeConfigError as exc:
        code = ExitCode.LOCK_DIR if exc.lock_dir_problem else ExitCode.USAGE
        raise CliError(f"{exc}; {exc.hint}", code) from None
    port = None
    if isinstance(store, LockStore):  # the guard reads sessions and locks from a lock directory
        try:
            port = chosen_guard_port(str(store.lock_dir), guard_port)
        except GuardPortError as exc:
            raise _usage(str(exc)) from None
    claim = claim_agent_id(store, agent_id)
    try:
        _serve_claimed(store, agent_id, session, level, progress_interval, port)
    finally:
        if claim is not None:
            claim.release()


def _serve_claimed(
    store: LockBackend,
    agent_id: str,
    session: DerivedSession | None,
    level: str,
    progress_interval: float,
    guard_port: int | None,
) -> None:
    try:
        # A derived session always serves from a lock directory (PostgreSQL was refused above).
        session_dir = None if session is None else Path(getattr(store, "lock_dir"))  # noqa: B009
        record = (
            None
            if session is None or session_dir is None
            else register_session(session, session_dir, store.root)
        )
    except (SessionRegistryError, OSError) as exc:
        raise CliError(f"cannot register the session: {exc}", ExitCode.LOCK_DIR) from None
    logging.basicConfig(
        level=level, stream=sys.stderr, format="lockyard serve [%(name)s] %(levelname)s %(message)s"
    )
    # Listening before anything slow (the lock tools' imports): a hook the CLI posts while
    # this server starts waits in the socket's backlog instead of being refused.
    guard_socket = None if guard_port is None else _listen(guard_port)
    from ..infra.crossproc.election import DeadlockDuty
    from ..infra.transports.stdio.server import ServeSession  # only when serving

    serving = ServeSession(store, agent_id, progress_interval=progress_interval)
    # Every server stands in the election of the process that resolves the deadlocks of its
    # lock store: one leads, so no monitor has to be started by hand.
    duty = DeadlockDuty(store, role=f"lockyard serve (agent {agent_id})")
    logging.getLogger("lockyard.serve").info(
        "serving agent %s on %s (namespace %s, locks in %s)",
        agent_id,
        store.root,
        store.namespace,
        store.location,
    )
    try:
        with duty:
            anyio.run(_serve_and_guard, serving, store, guard_socket)
    finally:
        if record is not None and session_dir is not None:
            unregister_session(record, session_dir)


def _listen(port: int) -> socket.socket | None:
    """The guard's listening socket, or None (logged) when another program has the port."""
    from ..infra.agentcli.guard_server import listening_socket

    try:
        sock = listening_socket(port)
    except OSError as exc:
        logging.getLogger("lockyard.guard").warning(
            "not answering guard hooks: %s; the agent CLIs' HTTP hooks will be refused, and "
            "command hooks judge each call themselves (slower). Give this lock directory a "
            "free port: LOCKYARD_GUARD_PORT, or `lockyard init --guard-port`",
            exc.strerror or exc,
        )
        return None
    logging.getLogger("lockyard.guard").info("answering guard hooks on 127.0.0.1:%d", port)
    return sock


async def _serve_and_guard(
    serving: ServeSession, store: LockBackend, guard_socket: socket.socket | None
) -> None:
    """Serve the agent's tools on stdio and, beside them, the guard of the lock directory
    (its HTTP hooks and the command hooks' fast path) until the session ends."""
    if guard_socket is None or not isinstance(store, LockStore):
        await serving.run_stdio()
        return
    from ..infra.agentcli.guard_server import GuardServer

    async with GuardServer(str(store.lock_dir)).serving(guard_socket):
        await serving.run_stdio()


def claim_agent_id(store: LockBackend, agent_id: str) -> AgentClaim | None:
    """Refuse a second live server under one agent id (both would hold every lock of it).
    A lock directory only: a PostgreSQL store ties locks to database sessions instead."""
    if not isinstance(store, LockStore):
        return None
    try:
        return AgentClaim(store.lock_dir, agent_id).acquire()
    except AgentIdInUseError as exc:
        raise CliError(
            f"{exc} (a live `lockyard serve`); two servers under one id would share every "
            "lock; give each agent session its own --agent-id",
            ExitCode.USAGE,
        ) from None
    except LockStoreError as exc:
        raise CliError(f"cannot claim agent id {agent_id!r}: {exc}", ExitCode.LOCK_DIR) from None


def _usage(message: str) -> CliError:
    return CliError(message, ExitCode.USAGE)


def register(app: typer.Typer) -> None:
    app.command(
        "serve",
        help=SERVE_HELP,
        short_help="Serve the lock tools for one agent over stdio (MCP).",
    )(serve_command)
