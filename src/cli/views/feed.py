"""Boards by push: a new board whenever the store says something changed.

The change signal is the one `lockyard monitor` wakes on (`MonitorSource.feed`): inotify on
the lock directory, LISTEN/NOTIFY on PostgreSQL, polling where neither works. A rescan every
`RESCAN_SECONDS` covers what no event announces (a holder process that died).

A view only reads: a read-only store, the snapshot every status command takes, and the
monitor's deadlock search run on that snapshot in this process (never the monitor's
leadership: a viewer must not keep `lockyard monitor` from resolving deadlocks). Reads run
in a worker thread and bursts of changes are coalesced, so a slow view falls behind by
skipping boards, never by holding anything an agent waits on.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import anyio.to_thread

from ...core.deadlock_info import DeadlockInfo
from ...domain.monitor import DeadlockMonitor
from ...infra.crossproc.sources import monitor_source
from ...infra.crossproc.state import WaitForSnapshot
from ...infra.lockstore import LockBackend, StoreSnapshot
from .._lockdir import LockDirNotCreatedError, open_store
from .board import Board, build_board, empty_board

RESCAN_SECONDS = 5.0
"""Read again this long after the last change even if nothing was announced."""
POLL_SECONDS = 0.5
"""The cadence where push is unavailable (no inotify, no LISTEN)."""
MIN_GAP_SECONDS = 0.05
"""Rest at least this long between two reads: a burst of changes makes one board."""


async def deadlocks_in(snapshot: StoreSnapshot) -> list[DeadlockInfo]:
    """The cycles of `snapshot` with the victims the monitor would pick (same policy, same
    agent ages from the lock records), found without touching the store."""
    state = WaitForSnapshot.from_store_snapshot(snapshot)
    monitor = DeadlockMonitor(verify_cycle=state.has_cycle)
    for agent, start in state.agent_start_times().items():
        monitor.register_agent(agent, start_time=start)
    monitor.rebuild(state.holders(), state.wait_pairs())
    return await monitor.check_all()


def read_board(store: LockBackend) -> Board:
    """One board of `store`, now (blocking: call it in a worker thread from a loop)."""
    snapshot = store.snapshot()
    return build_board(store.location, snapshot, anyio.run(deadlocks_in, snapshot))


class BoardFeed:
    """The boards of one store, each read after a change was announced.

    `open_store` opens the store read-only; while it raises LockDirNotCreatedError the feed
    yields empty boards that say so, and looks again every `POLL_SECONDS`.
    """

    def __init__(
        self, open_store: Callable[[], LockBackend], *, rescan_seconds: float = RESCAN_SECONDS
    ) -> None:
        self._open_store = open_store
        self.store: LockBackend | None = None
        self._opened: anyio.Event | None = None  # made in the loop, by the first to wait
        self.rescan_seconds = rescan_seconds
        self.pushing = False
        self.reads = 0
        self.read_seconds = 0.0

    async def boards(self) -> AsyncIterator[Board]:
        """A board now, then one after each change (or rescan), until cancelled."""
        while self.store is None:
            try:
                self.store = await anyio.to_thread.run_sync(self._open_store)
            except LockDirNotCreatedError as missing:
                yield empty_board(
                    str(missing.path), f"{missing.path} does not exist yet: nothing locked so far"
                )
                await anyio.sleep(POLL_SECONDS)
        if self._opened is not None:
            self._opened.set()
        async for board in self._follow(self.store):
            yield board

    async def opened(self) -> LockBackend:
        """The store, once `boards` has opened it."""
        while self.store is None:
            if self._opened is None:
                self._opened = anyio.Event()
            await self._opened.wait()
        return self.store

    async def _follow(self, store: LockBackend) -> AsyncIterator[Board]:
        with monitor_source(store).feed(POLL_SECONDS) as changes:
            self.pushing = changes.pushing
            while True:
                started = time.monotonic()
                board = await anyio.to_thread.run_sync(read_board, store)
                took = time.monotonic() - started
                self.reads += 1
                self.read_seconds += took
                yield board
                await changes.changed(self.rescan_seconds)
                # Under constant churn, rest as long as a read takes: a view then costs at
                # most half a core whatever the size of the store.
                await anyio.sleep(max(MIN_GAP_SECONDS, took))


def store_opener(lock_dir: Path | None, backend: str | None) -> Callable[[], LockBackend]:
    """What `BoardFeed` opens: the store, opened read-only now, so that a bad option or a
    server that is down fails at once in one line; a lock directory that does not exist yet
    is opened when it appears."""
    try:
        store = open_store(lock_dir, backend, read_only=True)
    except LockDirNotCreatedError:
        return lambda: open_store(lock_dir, backend, read_only=True)
    return lambda: store
