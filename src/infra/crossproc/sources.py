"""What `lockyard monitor` and `lockyard status` read and write, whatever the backend.

A `MonitorSource` bundles, for one backend: the shared state (holds and waits of every
agent), the board victim notices are posted on, a feed that says when to look again, and a
leadership test so that of several monitors running at once only one resolves deadlocks.
`LockDirSource` is the lock directory's; the PostgreSQL backend has its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ...core.ports import VictimNotices
from ..lockstore import QUEUE_SUFFIX, LockDirError, LockStore
from .notices import FileVictimNotices, VictimNotice, VictimNoticeBoard
from .state import LockDirSnapshot, LockDirState
from .watch import TreeWatcher


class NoticeBoard(Protocol):
    def post(self, notice: VictimNotice) -> object: ...
    def read(self, agent_id: str) -> VictimNotice | None: ...
    def notices(self) -> list[VictimNotice]: ...
    def prune(self, still_waiting: Callable[[VictimNotice], bool]) -> list[str]: ...


class ChangeFeed(Protocol):
    @property
    def pushing(self) -> bool: ...
    def __enter__(self) -> ChangeFeed: ...
    def __exit__(self, *exc: object) -> None: ...
    async def changed(self, max_wait: float) -> bool: ...


class SharedState(Protocol):
    def read(self) -> LockDirSnapshot: ...


class MonitorSource(Protocol):
    @property
    def state(self) -> SharedState: ...
    @property
    def board(self) -> NoticeBoard: ...

    @property
    def location(self) -> str: ...
    def feed(self, poll_interval: float) -> ChangeFeed: ...
    def check_present(self) -> None:
        """Raise a LockStoreError when the backend went away (the monitor then stops)."""
        ...

    def lead(self) -> bool:
        """True while this monitor is the one that resolves deadlocks."""
        ...

    def victim_notices(self) -> VictimNotices:
        """What an agent's waiting call listens to for notices posted on this board."""
        ...


class LockDirSource:
    """The lock directory: lock records and queues, `victims/` notices, inotify."""

    def __init__(
        self, lock_dir: Path, store: LockStore | None = None, *, read_only: bool = False
    ) -> None:
        """`read_only`: a store opened here leaves the lock directory exactly as it is."""
        self.lock_dir = Path(lock_dir)
        if store is None:
            store = LockStore(lock_dir=lock_dir, read_only=read_only)
        self.state = LockDirState(store)
        self.board = VictimNoticeBoard(self.lock_dir)
        self._identity = _identity(self.lock_dir)

    @property
    def location(self) -> str:
        return str(self.lock_dir)

    def feed(self, poll_interval: float) -> ChangeFeed:
        return TreeWatcher(
            self.lock_dir,
            descend=lambda name: name.endswith(QUEUE_SUFFIX),
            poll_interval=poll_interval,
        )

    def check_present(self) -> None:
        current = _identity(self.lock_dir)
        if current is None or current != self._identity:
            raise LockDirError(f"lock directory {self.lock_dir} was removed or replaced")

    def lead(self) -> bool:
        return True  # notices are posted atomically and re-checked by their victims

    def victim_notices(self) -> VictimNotices:
        return FileVictimNotices(self.lock_dir, self.state.still_waiting)


def _identity(directory: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(directory)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)
