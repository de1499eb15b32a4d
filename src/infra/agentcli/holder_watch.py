"""Lock holders kept in memory by a long-lived guard until inotify or a pidfd says otherwise.

Every tool call of every session asks the HTTP guard who holds a file's lock. Read afresh,
that is a directory open and listing, a record read and parse, and a `/proc/<pid>/stat` read
of the holder: the largest part of a call's cost. `HolderWatch` keeps each answer until a
change could alter it:

- an inotify watch on the lock directory reports every lock entry (`NAME.lock`) and holder
  card (`CARD.card`) that appears, goes or is renamed, and a watch on each remembered entry
  reports a grant dropped or added inside it: any such event forgets the answers;
- a holder found alive is followed by a pidfd, which becomes readable when it exits (a
  zombie counts as dead, as `liveness_of` says): that forgets its answers;
- an answer whose liveness cannot be followed so (`liveness_of` said "unknown") is re-judged
  on every call, and an unreadable record is never kept.

Why a kept answer is never staler than a fresh read: the kernel queues an inotify event, and
marks a pidfd readable, inside the system call that makes the change, before that call
returns. Every lookup first polls the inotify descriptor and the pidfds (one `poll`), and
forgets what they report. So a change that completed before the lookup began is always seen;
one that races with it could equally have been missed by a fresh read made at that moment.
An entry is watched before it is read, so a change between the watch and the read is
reported to the next lookup. A queue overflow forgets everything.

The answer itself comes from the same code the uncached reader runs
(`lockdir_reader.read_holder`), on a miss.
"""

from __future__ import annotations

import errno
import os
import select
import threading
from dataclasses import dataclass
from typing import Final

from ..lockstore import (
    CARD_SUFFIX,
    CHANGES,
    IN_DELETE_SELF,
    IN_IGNORED,
    IN_MOVE_SELF,
    IN_Q_OVERFLOW,
    LOCK_SUFFIX,
    Inotify,
    Liveness,
    LockDir,
)
from .lockdir_reader import (
    HolderFound,
    WatchEndedError,
    holder_of,
    read_holder,
    record_liveness,
)

MAX_KEPT: Final = 1024
"""Answers kept at most (each costs an inotify watch and maybe a pidfd); then all go."""


@dataclass
class _Kept:
    """One lock's answer: its holder record (None: free), its liveness when it can be kept,
    and the pidfd following a live holder."""

    found: HolderFound | None
    alive: Liveness | None  # None: judged again on every lookup
    pidfd: int | None


class HolderWatch:
    """The holders of one lock directory's locks, kept while nothing changed. Shared by
    threads (the guard judges shell calls in worker threads)."""

    def __init__(self, directory: LockDir, inotify: Inotify) -> None:
        self.directory = directory
        self._inotify = inotify
        self._root = inotify.add_watch(self._path("."))
        self._poll = select.poll()
        self._poll.register(inotify.fd, select.POLLIN)
        self._kept: dict[str, _Kept] = {}
        self._entry_watches: dict[int, str] = {}
        self._by_pidfd: dict[int, set[str]] = {}
        self._guard = threading.Lock()
        self.watching = True
        """False once the watched directory was removed or moved: nothing is kept then."""

    @classmethod
    def open(cls, lock_dir: str | os.PathLike[str]) -> HolderWatch | None:
        """A watch of `lock_dir`, or None when inotify cannot be used there (off by
        LOCKYARD_NO_INOTIFY, unavailable, out of instances or watches): read afresh then."""
        inotify = Inotify.open()
        if inotify is None:
            return None
        directory = LockDir(lock_dir)
        try:
            return cls(directory, inotify)
        except OSError:
            inotify.close()
            directory.close()
            return None

    def close(self) -> None:
        with self._guard:
            self._forget_all()
            self._inotify.close()
            self.directory.close()

    def holder(self, name: str) -> str | None:
        """The agent holding lock `name`, as a fresh read would say now (`holder_of` of
        `read_holder`); CorruptRecordError as that read would raise, WatchEndedError once the
        directory is no longer watched."""
        with self._guard:
            self._catch_up()
            kept = self._kept.get(name)
            if kept is None:
                if not self.watching:
                    raise WatchEndedError(self.directory.path)
                kept = self._read(name)
        if kept.found is None:
            return None
        alive = record_liveness(kept.found.record) if kept.alive is None else kept.alive
        return holder_of(kept.found, alive)

    # --- what changed --------------------------------------------------------------------

    def _catch_up(self) -> None:
        """Forget every answer a change since the last lookup could have altered."""
        ready = self._poll.poll(0)
        if not ready:
            return
        for fd, _mask in ready:
            if fd == self._inotify.fd:
                self._read_events()
            else:
                for name in list(self._by_pidfd.get(fd, ())):
                    self._forget(name)

    def _read_events(self) -> None:
        for event in self._inotify.read_pending():
            if event.wd == self._root and event.mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED):
                self.watching = False  # the directory went: readers read their own again
                self._forget_all()
            elif event.mask & IN_Q_OVERFLOW:
                self._forget_all()
            elif event.wd == self._root:
                if event.name.endswith(LOCK_SUFFIX):
                    self._forget(event.name.removesuffix(LOCK_SUFFIX))
                elif event.name.endswith(CARD_SUFFIX):
                    self._forget_all()  # cards are shared by records: find none, drop all
            else:
                name = self._entry_watches.get(event.wd)
                if event.mask & IN_IGNORED:
                    self._entry_watches.pop(event.wd, None)
                if name is not None:
                    self._forget(name)

    def _forget(self, name: str) -> None:
        kept = self._kept.pop(name, None)
        if kept is not None and kept.pidfd is not None:
            self._release_pidfd(kept.pidfd, name)

    def _forget_all(self) -> None:
        for name in list(self._kept):
            self._forget(name)
        for wd in list(self._entry_watches):
            self._inotify.rm_watch(wd)
        self._entry_watches.clear()

    # --- reading afresh ------------------------------------------------------------------

    def _read(self, name: str) -> _Kept:
        if len(self._kept) >= MAX_KEPT:
            self._forget_all()
        if not self._watch_entry(name):
            return _Kept(read_holder(self.directory, name), None, None)  # not kept
        found = read_holder(self.directory, name)  # CorruptRecordError: nothing kept
        kept = _Kept(None, Liveness.DEAD, None) if found is None else self._judged(found)
        self._kept[name] = kept
        if kept.pidfd is not None:
            self._by_pidfd.setdefault(kept.pidfd, set()).add(name)
        return kept

    def _watch_entry(self, name: str) -> bool:
        """Watch lock `name`'s entry (before it is read); False when it cannot be watched
        (out of watches), so its answer must not be kept. A missing entry needs no watch of
        its own: its appearing is an event of the directory."""
        try:
            wd = self._inotify.add_watch(self._path(name + LOCK_SUFFIX), CHANGES)
        except OSError as error:
            return error.errno in (errno.ENOENT, errno.ENOTDIR)
        self._entry_watches[wd] = name
        return True

    def _judged(self, found: HolderFound) -> _Kept:
        """`found` with its liveness, kept when a pidfd can follow it (or it is dead)."""
        alive = record_liveness(found.record)
        if alive is Liveness.DEAD:
            return _Kept(found, alive, None)
        if alive is not Liveness.ALIVE:
            return _Kept(found, None, None)
        try:
            pidfd = os.pidfd_open(found.record["pid"])
        except OSError:
            return _Kept(found, None, None)
        # The pid may have been reused between the two looks: judged again once the pidfd
        # is open, the record's start time proves the pidfd follows the recorded process.
        if record_liveness(found.record) is not Liveness.ALIVE:
            os.close(pidfd)
            return _Kept(found, None, None)
        self._poll.register(pidfd, select.POLLIN)
        return _Kept(found, Liveness.ALIVE, pidfd)

    def _release_pidfd(self, pidfd: int, name: str) -> None:
        names = self._by_pidfd.get(pidfd)
        if names is None:
            return
        names.discard(name)
        if not names:
            del self._by_pidfd[pidfd]
            self._poll.unregister(pidfd)
            os.close(pidfd)

    def _path(self, entry: str) -> str:
        # Through the open directory, not its name: a lock directory swapped for another
        # after it was opened is never the one watched.
        return f"/proc/self/fd/{self.directory.fd}/{entry}"
