"""Ending a long-running command cleanly on SIGTERM or SIGINT.

`lockyard serve`, `lockyard monitor` and `lockyard ipc-host` run until they are told to stop.
A signal cancels their task group instead of killing the interpreter, so every `finally`
runs: locks are given back, session records removed, the IPC host's status withdrawn.
"""

from __future__ import annotations

import logging
import signal

import anyio
from anyio.abc import TaskStatus


async def cancel_on_signals(
    scope: anyio.CancelScope,
    *,
    log: logging.Logger | None = None,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Cancel `scope` when SIGTERM or SIGINT arrives (logged at INFO on `log`, if given).
    Start it with `await group.start(cancel_on_signals, group.cancel_scope)`: once started,
    the handlers are in place."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for signum in signals:
            if log is not None:
                log.info("received %s, shutting down", signal.Signals(signum).name)
            scope.cancel()
