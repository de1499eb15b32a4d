"""`lockyard ipc-host`: serve the lock tools to sandboxed agents through their IPC folders."""

from __future__ import annotations

import functools
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer

from ..infra.transports.ipc.host_config import (
    IpcHostConfigError,
    RootLock,
    check_admin,
    check_root,
    open_host_store,
)
from ._errors import CliError, ExitCode, reports_errors
from ._options import backend_option, flag, lock_dir_option

if TYPE_CHECKING:
    from ..infra.transports.ipc.host import IpcHost

HELP = (
    "Serve lock_acquire / lock_release to sandboxed agents (containers with no shared lock "
    "directory and no network) through IPC folders: every folder ROOT/NAME is one sandbox, "
    "and NAME is its agent id, whatever its requests say. Inside the sandbox run "
    "`lockyard serve --ipc DIR --repo /workspace` as the agent's MCP server.\n\n"
    "A sandbox whose heartbeat stops for --stale-after seconds has its calls cancelled and "
    "its locks released. --admin NAME gives that folder's agent the operator tools "
    "(lock_overview, lock_force_release). Runs until SIGTERM/SIGINT, then releases every "
    "sandbox's locks. See docs/sandboxes.md."
)


def ipc_host_command(
    root: Annotated[
        Path | None,
        typer.Option(
            "--root", metavar="DIR", help="Holds one folder per sandbox.", show_default=False
        ),
    ] = None,
    repo: Annotated[
        Path | None,
        typer.Option(
            "--repo",
            metavar="PATH",
            help="The host's checkout of the repository the sandboxes edit.",
            show_default=False,
        ),
    ] = None,
    admin: Annotated[
        str | None,
        typer.Option(
            "--admin",
            metavar="NAME",
            help="The sandbox folder allowed the operator tools.",
            show_default=False,
        ),
    ] = None,
    lock_dir: Annotated[
        Path | None,
        lock_dir_option(
            "The lock directory (default: $LOCKYARD_LOCK_DIR, else a per-user runtime directory)."
        ),
    ] = None,
    backend: Annotated[str | None, backend_option()] = None,
    stale_after: Annotated[
        float,
        typer.Option(
            "--stale-after",
            min=0.5,
            max=3600.0,
            help="Seconds of silence (no heartbeat, no request) before a sandbox's locks are "
            "reclaimed; with the 1 s check, locks are free within this + 1 s.",
        ),
    ] = 20.0,
    rate: Annotated[
        float, typer.Option("--rate", min=0.1, help="Requests per second per sandbox.")
    ] = 50.0,
    burst: Annotated[
        float, typer.Option("--burst", min=1.0, help="Requests at once per sandbox.")
    ] = 100.0,
    max_in_flight: Annotated[
        int, typer.Option("--max-in-flight", min=1, help="Calls running at once per sandbox.")
    ] = 32,
    cross_process: Annotated[
        bool,
        flag(
            "--cross-process",
            help="Also find and heed the deadlocks that cross processes (agents outside the "
            "sandboxes share the lock directory): the host stands in the election of the "
            "process that resolves them, as every `lockyard serve` does.",
        ),
    ] = False,
    log_level: Annotated[
        str, typer.Option("--log-level", help="stderr log level: DEBUG, INFO, WARNING, ERROR.")
    ] = "INFO",
) -> None:
    _run(
        root, repo, admin, lock_dir, backend, stale_after, rate, burst, max_in_flight,
        cross_process, log_level,
    )  # fmt: skip


@reports_errors
def _run(
    root: Path | None,
    repo: Path | None,
    admin: str | None,
    lock_dir: Path | None,
    backend: str | None,
    stale_after: float,
    rate: float,
    burst: float,
    max_in_flight: int,
    cross_process: bool,
    log_level: str,
) -> None:
    level = log_level.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise CliError(
            f"unknown --log-level {log_level!r}; use DEBUG, INFO, WARNING or ERROR", ExitCode.USAGE
        )
    if root is None:
        raise CliError(
            "ipc-host needs the folder of sandbox folders; pass --root DIR", ExitCode.USAGE
        )
    if repo is None:
        raise CliError("ipc-host needs the host's checkout; pass --repo PATH", ExitCode.USAGE)
    try:
        check_root(root)
        check_admin(admin)
        store = open_host_store(repo, lock_dir, backend, cross_process=cross_process)
        root_lock = RootLock(root).__enter__()
    except IpcHostConfigError as exc:
        code = ExitCode.LOCK_DIR if exc.lock_dir_problem else ExitCode.USAGE
        raise CliError(f"{exc}; {exc.hint}", code) from None
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="lockyard ipc-host [%(name)s] %(levelname)s %(message)s",
    )
    from ..infra.transports.ipc.host import (  # imports the tools: only when serving
        HostSettings,
        IpcHost,
    )

    settings = HostSettings(
        stale_after=stale_after,
        rate=rate,
        burst=burst,
        max_in_flight=max_in_flight,
        cross_process=cross_process,
    )
    host = IpcHost(root, store, admin=admin, settings=settings)
    log = logging.getLogger("lockyard.ipc.host")
    log.info(
        "serving sandboxes under %s on %s (namespace %s, locks in %s)",
        root,
        store.root,
        store.namespace,
        store.location,
    )
    if admin is not None and not (root / admin).is_dir():
        log.warning("--admin %s: no folder %s yet; it is served once created", admin, root / admin)
    from ..infra.crossproc.election import DeadlockDuty

    # Sandboxed agents' deadlocks with agents of other processes: found by whichever
    # process leads (the host's own monitor sees only its sandboxes).
    duty = DeadlockDuty(store, role="lockyard ipc-host") if cross_process else None
    try:
        if duty is not None:
            duty.start()
        anyio.run(_serve_until_signalled, host)
    finally:
        if duty is not None:
            duty.stop()
        root_lock.__exit__(None, None, None)


async def _serve_until_signalled(host: IpcHost) -> None:
    from ..infra.signals import cancel_on_signals

    async with anyio.create_task_group() as group:
        log = logging.getLogger("lockyard.ipc.host")
        await group.start(functools.partial(cancel_on_signals, log=log), group.cancel_scope)
        await host.run()


def register(app: typer.Typer) -> None:
    app.command(
        "ipc-host",
        help=HELP,
        short_help="Serve the lock tools to sandboxed agents through IPC folders.",
    )(ipc_host_command)
