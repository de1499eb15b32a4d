"""Follow changes in a lock directory by push (inotify), polling where that is unavailable.

The monitor only needs to know *that* something changed, then rereads the whole state, so
events are coalesced: one wake-up per burst. New subdirectories (queues appearing) are
watched as they are created, up to `max_depth` levels below the root.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio

from .inotify import IN_CREATE, IN_ISDIR, IN_MOVED_TO, IN_Q_OVERFLOW, Inotify


class TreeWatcher:
    """Wakes up when anything below `root` changes (except in the `ignore` subdirectories)."""

    def __init__(
        self,
        root: Path,
        *,
        ignore: frozenset[str] = frozenset(),
        max_depth: int = 2,
        poll_interval: float = 0.5,
        settle: float = 0.005,
    ) -> None:
        self.root = Path(root)
        self._ignore = ignore
        self._max_depth = max_depth
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
            self._watch_tree(self.root, 0)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None

    def _watch_tree(self, directory: Path, depth: int) -> None:
        assert self._inotify is not None
        if not self._inotify.watch(directory) or depth >= self._max_depth:
            return
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return
        for entry in entries:
            if entry.name in self._ignore and depth == 0:
                continue
            if entry.is_dir(follow_symlinks=False):
                self._watch_tree(Path(entry.path), depth + 1)

    def _depth_of(self, directory: Path) -> int:
        return len(directory.relative_to(self.root).parts)

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
                self._watch_tree(self.root, 0)  # lost events: rewatch everything
                continue
            if event.mask & IN_ISDIR and event.mask & (IN_CREATE | IN_MOVED_TO):
                parent = self._inotify.path_of(event.wd)
                if parent is None:
                    continue
                depth = self._depth_of(parent) + 1
                if depth == 1 and event.name in self._ignore:
                    continue
                if depth <= self._max_depth:
                    self._watch_tree(parent / event.name, depth)
        return True
