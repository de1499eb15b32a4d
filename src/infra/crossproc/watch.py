"""Follow changes in a lock directory by push (inotify), polling where that is unavailable.

The monitor only needs to know *that* something changed, then rereads the whole state, so
events are coalesced: one wake-up per burst. The root is watched, and so is every
subdirectory `descend` accepts (the lock queues), including ones created later.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import anyio

from ..lockstore import IN_CREATE, IN_ISDIR, IN_MOVED_TO, IN_Q_OVERFLOW, Inotify


class TreeWatcher:
    """Wakes up when `root`, or a subdirectory of it that `descend` accepts, changes."""

    def __init__(
        self,
        root: Path,
        *,
        descend: Callable[[str], bool] = lambda _name: True,
        poll_interval: float = 0.5,
        settle: float = 0.001,
    ) -> None:
        self.root = Path(root)
        self._descend = descend
        self._poll_interval = poll_interval
        self._settle = settle
        self._inotify: Inotify | None = None

    @property
    def pushing(self) -> bool:
        """True when changes arrive by inotify; False when polling."""
        return self._inotify is not None

    def __enter__(self) -> TreeWatcher:
        self._inotify = Inotify.open()
        if self._inotify is not None:
            self._watch_root()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None

    def _watch_root(self) -> None:
        assert self._inotify is not None
        if not self._inotify.watch(self.root):
            return
        try:
            entries = list(os.scandir(self.root))
        except OSError:  # pragma: no cover - the root vanished after being watched
            return
        for entry in entries:
            if self._descend(entry.name) and entry.is_dir(follow_symlinks=False):
                self._inotify.watch(Path(entry.path))

    async def changed(self, max_wait: float) -> bool:
        """Wait up to `max_wait` seconds for a change; True if one was seen.

        When polling, this simply sleeps (bounded by the poll interval) and returns True:
        the caller rescans every time.
        """
        if self._inotify is None:
            await anyio.sleep(min(max_wait, self._poll_interval))
            return True
        events = await self._inotify.wait(max_wait)
        if not events:
            return False
        await anyio.sleep(self._settle)  # let a burst (acquire = mkdir + record) finish
        events += self._inotify.read_pending()
        for event in events:
            if event.mask & IN_Q_OVERFLOW:
                self._watch_root()  # events were lost: make sure every queue is watched
            elif (
                event.mask & IN_ISDIR
                and event.mask & (IN_CREATE | IN_MOVED_TO)
                and self._inotify.path_of(event.wd) == self.root
                and self._descend(event.name)
            ):
                self._inotify.watch(self.root / event.name)
        return True
