"""Deadlock detection with no daemon: every long-lived lockyard process stands, one leads.

Every `lockyard serve`, every `LockCoordinator(cross_process=True)` and every resolving
`lockyard monitor` runs a `DeadlockDuty` on its lock store. Of all of them, one leads: the
holder of the backend's leader lock (an `flock` on `deadlock-leader` in a lock directory,
`leader_file.py`; a session advisory lock in PostgreSQL, `sources/postgres.py`). The kernel
or the database server drops that lock when its holder ends, however it ends (SIGKILL
included), and every other candidate tries to take it every `TAKEOVER_SECONDS`, so the
next one leads within a second. The leader runs the same `CrossProcessMonitor` passes as
`lockyard monitor`, driven by inotify or NOTIFY, so a deadlock across sessions is resolved
milliseconds after its last wait begins, with no process started by hand.

The duty runs in a thread of its own with its own event loop: a pass (or a slow database)
never holds up the tool calls and hook answers of the process's event loop, and a process
without one (a plain script) can run a duty too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Final

import anyio

from ..lockstore import LockBackend, Waker
from .deadlock_text import readable
from .monitor_loop import CrossProcessMonitor, PassReport
from .sources import MonitorSource, monitor_source

log = logging.getLogger("lockyard.election")

TAKEOVER_SECONDS: Final = 0.25
"""How often a candidate tries to lead: a leader that ended is replaced within this long."""

RETRY_SECONDS: Final = 1.0
"""After a failure (a database that went away, an unreadable lock directory), try again."""

STOP_SECONDS: Final = 10.0
"""How long `stop` waits for the duty to resign (a database round trip at most)."""

OnReport = Callable[[PassReport], Awaitable[None] | None]


class DeadlockDuty:
    """This process's part in deadlock detection on one lock store (see the module doc)."""

    def __init__(
        self,
        store: LockBackend,
        *,
        role: str,
        on_report: OnReport | None = None,
        takeover_seconds: float = TAKEOVER_SECONDS,
    ) -> None:
        """`role` names this process for `lockyard status` and the logs while it leads
        (`lockyard serve (agent alice)`). `on_report` gets every pass that found or tidied
        something (default: each deadlock is logged)."""
        self.store = store
        self.role = role
        self.source = self._new_source()
        self._on_report: OnReport = on_report or _log_report
        self._takeover_seconds = takeover_seconds
        self._stop = Waker()
        self._thread: threading.Thread | None = None
        self._leading = False

    @property
    def leading(self) -> bool:
        """Whether this process leads now."""
        return self._leading

    def start(self) -> DeadlockDuty:
        if self._thread is not None:
            raise RuntimeError("this deadlock duty was started already")
        self._thread = threading.Thread(
            target=self._main, name="lockyard-deadlock-duty", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """Stop standing, and stop leading if it does (the next candidate takes over)."""
        self._stop.wake()
        if self._thread is not None:
            self._thread.join(timeout)
        self._stop.close()

    def __enter__(self) -> DeadlockDuty:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _new_source(self) -> MonitorSource:
        return monitor_source(self.store, role=self.role, own_reader=True)

    def _main(self) -> None:
        try:
            anyio.run(self._run)
        except Exception:  # the process goes on serving; only its candidacy ended
            log.exception("deadlock detection stopped in this process")

    async def _run(self) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(self._until_stopped, group.cancel_scope)
            try:
                await self._stand()
            finally:
                self._leading = False
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._resign)

    async def _until_stopped(self, scope: anyio.CancelScope) -> None:
        while not await self._stop.wait_async(3600.0):
            pass
        scope.cancel()

    async def _stand(self) -> None:
        failing = False
        while True:
            try:
                if self.source.lead():
                    self._leading = True
                    log.info("leading deadlock detection on %s", self.source.location)
                    await CrossProcessMonitor(source=self.source).run(
                        self._on_report, while_leading=True
                    )
                    log.info("no longer leading deadlock detection on %s", self.source.location)
                self._leading = False
                failing = False
                await anyio.sleep(self._takeover_seconds)
            except Exception as exc:  # a lost server, a removed lock directory: try again
                self._leading = False
                self._resign()
                level = logging.DEBUG if failing else logging.WARNING
                log.log(level, "deadlock detection on %s failed (%s); retrying",
                        self.source.location, exc)  # fmt: skip
                failing = True
                await anyio.sleep(RETRY_SECONDS)
                with contextlib.suppress(Exception):  # a replaced lock directory: start afresh
                    self.source = self._new_source()

    def _resign(self) -> None:
        try:
            self.source.resign()
        except Exception as exc:  # its session is gone: the server dropped the lock with it
            log.debug("resigning deadlock detection: %s", exc)


def _log_report(report: PassReport) -> None:
    for resolution in report.resolutions:
        posted = "notice posted" if resolution.notice is not None else "already noticed"
        log.info(
            "deadlock: %s; victim %s (%s)",
            readable(resolution.deadlock),
            resolution.deadlock.victim,
            posted,
        )
