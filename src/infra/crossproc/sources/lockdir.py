"""What `lockyard monitor` and `lockyard status` read and write on a lock directory."""

from __future__ import annotations

import os
from pathlib import Path

from ....core.ports import VictimNotices
from ...lockstore import QUEUE_SUFFIX, LockDirError, LockStore
from ..notices import FileVictimNotices, VictimNoticeBoard
from ..state import WaitForReader
from ..watch import TreeWatcher


class LockDirSource:
    """The lock directory: lock records and queues, `victims/` notices, inotify."""

    def __init__(
        self, lock_dir: Path, store: LockStore | None = None, *, read_only: bool = False
    ) -> None:
        """`read_only`: a store opened here leaves the lock directory exactly as it is."""
        self.lock_dir = Path(lock_dir)
        if store is None:
            store = LockStore(lock_dir=lock_dir, read_only=read_only)
        self.state = WaitForReader(store)
        self.board = VictimNoticeBoard(self.lock_dir)
        self._inode = _inode(self.lock_dir)

    @property
    def location(self) -> str:
        return str(self.lock_dir)

    def feed(self, poll_interval: float) -> TreeWatcher:
        return TreeWatcher(
            self.lock_dir,
            descend=lambda name: name.endswith(QUEUE_SUFFIX),
            poll_interval=poll_interval,
        )

    def check_present(self) -> None:
        current = _inode(self.lock_dir)
        if current is None or current != self._inode:
            raise LockDirError(f"lock directory {self.lock_dir} was removed or replaced")

    def lead(self) -> bool:
        return True  # notices are posted atomically and re-checked by their victims

    def victim_notices(self) -> VictimNotices:
        return FileVictimNotices(self.lock_dir, self.state.still_waiting)


def _inode(directory: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(directory)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)
