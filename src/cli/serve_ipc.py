"""`lockyard serve --ipc DIR`: the stdio MCP server of a sandboxed agent, forwarding every call
through its IPC folder to `lockyard ipc-host`."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import anyio

from ._errors import CliError, ExitCode, reports_errors


@reports_errors
def serve_ipc(
    folder: Path,
    repo: Path | None,
    agent_id: str | None,
    lock_dir: Path | None,
    backend: str | None,
    log_level: str,
    progress_interval: float,
    heartbeat_interval: float,
    host_timeout: float,
) -> None:
    level = log_level.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise _usage(f"unknown --log-level {log_level!r}; use DEBUG, INFO, WARNING or ERROR")
    if agent_id is not None and os.environ.get("LOCKYARD_AGENT_ID") != agent_id:
        raise _usage(
            "--agent-id does not apply with --ipc: the host names the agent after the IPC "
            "folder; drop --agent-id"
        )
    if lock_dir is not None and os.environ.get("LOCKYARD_LOCK_DIR") != str(lock_dir):
        raise _usage(
            "--lock-dir does not apply with --ipc: the host keeps the locks; drop --lock-dir"
        )
    if backend is not None:
        raise _usage(
            "--backend does not apply with --ipc: the host keeps the locks; drop --backend"
        )
    if folder.is_symlink() or not folder.is_dir():
        raise _usage(
            f"--ipc {folder} is not a directory; pass the IPC folder mounted into this sandbox"
        )
    checkout = repo if repo is not None else Path.cwd()
    if not checkout.is_dir():
        raise _usage(f"--repo {checkout} is not a directory; pass the sandbox's checkout")
    logging.basicConfig(
        level=level, stream=sys.stderr, format="lockyard serve [%(name)s] %(levelname)s %(message)s"
    )
    from ..infra.transports.ipc.client import run_ipc_serve  # only when serving

    logging.getLogger("lockyard.ipc.client").info(
        "serving through IPC folder %s (checkout %s)", folder, checkout
    )
    try:
        anyio.run(
            lambda: run_ipc_serve(
                folder,
                checkout,
                progress_interval=progress_interval,
                heartbeat_interval=heartbeat_interval,
                host_timeout=host_timeout,
            )
        )
    except OSError as exc:  # unwritable, or requests/ or responses/ are not directories
        raise CliError(
            f"cannot use the IPC folder {folder}: {exc.strerror or exc}",
            ExitCode.USAGE,
            "mount the sandbox's own folder read-write for this user, with requests/ and "
            "responses/ as plain directories (or absent)",
        ) from None


def _usage(message: str) -> CliError:
    return CliError(message, ExitCode.USAGE)
