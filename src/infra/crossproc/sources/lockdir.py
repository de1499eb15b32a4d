"""What `lockyard monitor` and `lockyard status` read and write on a lock directory."""

from __future__ import annotations

import os
from pathlib import Path

from ....core.ports import VictimNotices
from ...lockstore import QUEUE_SUFFIX, LockDirError, LockStore
from ..leader_file import LeaderFile, current_leader
from ..notices import FileVictimNotices, VictimNoticeBoard
from ..state import WaitForReader
from ..watch import TreeWatcher


class LockDirSource:
    """The lock directory: lock records and queues, `victims/` notices, inotify."""

    def __init__(
        self,
        lock_dir: Path,
        store: LockStore | None = None,
        *,
        read_only: bool = False,
        role: str = "lockyard monitor",
    ) -> None:
        """`read_only`: a store opened here leaves the lock directory exactly as it is.
        `role`: who this process is, written in the leader file while it leads."""
        self.lock_dir = Path(lock_dir)
        if store is None:
            store = LockStore(lock_dir=lock_dir, read_only=read_only)
        self.store = store
        self.state = WaitForReader(store)
        self.board = VictimNoticeBoard(self.lock_dir)
        self._inode = _inode(self.lock_dir)
        self._leader = LeaderFile(self.lock_dir, role)

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
        try:
            return self._leader.try_lead()
        except OSError:  # the directory is gone or not ours: `check_present` says which
            return False

    def resign(self) -> None:
        self._leader.resign()

    def who_leads(self) -> str | None:
        if self._leader.leading:
            return f"this process ({self._leader.role})"
        leader = current_leader(self.lock_dir)
        return None if leader is None else leader.describe()

    def victim_notices(self) -> VictimNotices:
        return FileVictimNotices(self.lock_dir, self.state.still_waiting)


def _inode(directory: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(directory)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)
