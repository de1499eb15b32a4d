"""Push wake-ups for the lock directory's waiters: in-process notifications, inotify across
processes, and pidfds for processes that die without a word.

A waiter owns a `Waker` (`wakeup.py`) and subscribes it to *topics* of its process's hub
(`process_hub`): the absolute path of one directory entry, such as `<lock_dir>/<name>.lock`
or `<lock_dir>/<name>.q/<entry>`. A topic is notified directly by the store in this process
(release, dequeue) and, for other processes, by one inotify instance per process whose
reader thread turns directory events into topic notifications. A waiter subscribes only to
what it needs (the head of a queue to the lock, the others to their predecessor), so a
release wakes one waiter, not all. It also follows the exit of the process it waits behind
(`pid:<pid>`, from a pidfd), so a holder or predecessor that crashes is noticed at once and
its lock reclaimed. The victim notices in the lock directory (`lockyard.infra.crossproc`)
are woken through the same hub.

Where inotify is unavailable (or switched off, `inotify.py`) `watch` returns False and
waiters fall back to polling at their poll interval.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import threading
from collections.abc import Callable
from typing import Final

from ..inotify import ENTRIES, IN_IGNORED, IN_Q_OVERFLOW, Inotify, switched_off
from ..wakeup import Waker

logger = logging.getLogger(__name__)

_WATCH_MASK: Final = ENTRIES
_IDLE_PIDFDS: Final = 64
"""Pidfds nobody follows any more, kept open (and watched) for the next wait behind the
same process: a waiter that hands a lock back and forth with another process follows it at
every wait. Each costs one descriptor."""


class WakeHub:
    """This process's registry of topic subscribers, fed by the store, by inotify, and by
    pidfds (a process's exit is the topic `pid:<pid>`).

    One reader thread waits (epoll) on the inotify fd and the pidfds and turns what they
    report into topic notifications.
    """

    def __init__(self, *, inotify_enabled: bool = True) -> None:
        self._guard = threading.Lock()
        self._subscribers: dict[str, set[Waker]] = {}
        self._inotify_enabled = inotify_enabled
        self._inotify: Inotify | None = None
        self._inotify_failed = False
        self._path_of_wd: dict[int, str] = {}
        self._watch_of_path: dict[str, tuple[int, int]] = {}  # path -> (wd, reference count)
        self._epoll: select.epoll | None = None
        self._pid_of_fd: dict[int, int] = {}
        self._watch_of_pid: dict[int, tuple[int, int]] = {}  # pid -> (pidfd, reference count)
        self._idle_pids: dict[int, None] = {}
        """Followed pids whose reference count is 0, oldest first (see _IDLE_PIDFDS)."""
        self._grant_takers: dict[str, Callable[[str], bool]] = {}

    # -- subscriptions -------------------------------------------------------------------

    def subscribe(self, topic: str, waker: Waker) -> None:
        with self._guard:
            self._subscribers.setdefault(topic, set()).add(waker)

    def unsubscribe(self, topic: str, waker: Waker) -> None:
        with self._guard:
            wakers = self._subscribers.get(topic)
            if wakers is not None:
                wakers.discard(waker)
                if not wakers:
                    del self._subscribers[topic]

    def notify(self, topic: str) -> None:
        """Wake the subscribers of `topic`, and of its directory (`<dir>/`)."""
        if not self._subscribers:
            # Nobody waits in this process (every uncontended release): nothing to build.
            # Read without the guard: a waiter subscribes before it looks at the lock, so
            # one that subscribes after this read sees whatever this notify announces.
            return
        directory = topic[: topic.rfind("/") + 1]
        with self._guard:
            wakers = [*self._subscribers.get(topic, ()), *self._subscribers.get(directory, ())]
        for waker in wakers:
            waker.wake()

    def _notify_all(self) -> None:
        with self._guard:
            wakers = [waker for group in self._subscribers.values() for waker in group]
        for waker in wakers:
            waker.wake()

    # -- grants handed over within this process ------------------------------------------

    def expect_grant(self, token: str, take: Callable[[str], bool]) -> None:
        """`take(token)` accepts grant `token` when a release in this process hands it over
        (see `hand_grant`). Tokens are unique, so one taker per token."""
        self._grant_takers[token] = take

    def forget_grant(self, token: str) -> None:
        self._grant_takers.pop(token, None)

    def hand_grant(self, token: str) -> bool:
        """Offer grant `token`, just handed over on disk, to its taker in this process: True
        when it accepted it (its waiter then returns without looking again); False when
        nobody here expects it or its taker left it for its own next look."""
        take = self._grant_takers.get(token)
        return take is not None and take(token)

    # -- inotify -------------------------------------------------------------------------

    def watch(self, directory: str) -> bool:
        """Deliver `directory`'s events to topic subscribers; False if push is unavailable."""
        with self._guard:
            inotify = self._ensure_inotify()
            if inotify is None:
                return False
            known = self._watch_of_path.get(directory)
            if known is not None:
                self._watch_of_path[directory] = (known[0], known[1] + 1)
                return True
            try:
                wd = inotify.add_watch(directory, _WATCH_MASK)
            except OSError:  # gone, or out of watches (ENOSPC): this waiter polls instead
                return False
            self._watch_of_path[directory] = (wd, 1)
            self._path_of_wd[wd] = directory
            return True

    def watch_entry(self, path: str) -> bool | None:
        """Deliver the end of the entry at `path` (its removal or move) to the topic `path`,
        without the rest of its directory's events: True when watched; None when the entry
        is gone already (the caller's next look sees that); False when push cannot follow it
        (no inotify here, out of watches: watch its directory instead).

        A directory watch wakes every process that watches the directory at every change in
        it; a waiter needs only its predecessor's entry and its own. Undo with `unwatch`."""
        with self._guard:
            inotify = self._ensure_inotify()
            if inotify is None:
                return False
            try:
                # Asked every time, even when watched already: the same path may name a new
                # entry (a ticket taken again after its queue emptied), which is a new inode
                # and gets a new descriptor; the old one ends by itself (IN_IGNORED).
                wd = inotify.add_entry_watch(path)
            except OSError as error:
                return None if error.errno in (errno.ENOENT, errno.ENOTDIR) else False
            known = self._watch_of_path.get(path)
            self._watch_of_path[path] = (wd, 1 if known is None else known[1] + 1)
            self._path_of_wd[wd] = path
            return True

    def unwatch(self, path: str) -> None:
        """Undo one `watch` or `watch_entry` of `path`."""
        with self._guard:
            known = self._watch_of_path.get(path)
            if known is None or self._inotify is None:
                return
            wd, references = known
            if references > 1:
                self._watch_of_path[path] = (wd, references - 1)
                return
            del self._watch_of_path[path]
            self._path_of_wd.pop(wd, None)
            self._inotify.rm_watch(wd)

    @property
    def push_available(self) -> bool:
        with self._guard:
            return self._ensure_inotify() is not None

    def _ensure_inotify(self) -> Inotify | None:
        if self._inotify is not None or self._inotify_failed:
            return self._inotify
        epoll = self._ensure_reader() if self._inotify_enabled else None
        inotify = Inotify.open() if epoll is not None else None
        if epoll is None or inotify is None:  # no inotify here, or switched off: poll instead
            self._inotify_failed = True
            return None
        epoll.register(inotify.fd, select.EPOLLIN)
        self._inotify = inotify
        return inotify

    # -- process exits -------------------------------------------------------------------

    def watch_process(self, pid: int) -> bool:
        """Notify `pid:<pid>` when that process exits; False where pidfds are unavailable."""
        with self._guard:
            known = self._watch_of_pid.get(pid)
            if known is not None:
                self._watch_of_pid[pid] = (known[0], known[1] + 1)
                self._idle_pids.pop(pid, None)
                return True
            epoll = self._ensure_reader() if self._inotify_enabled else None
            if epoll is None:
                return False
            try:
                pidfd = os.pidfd_open(pid)
            except (OSError, AttributeError):  # gone already, or no pidfd on this kernel
                return False
            epoll.register(pidfd, select.EPOLLIN)
            self._watch_of_pid[pid] = (pidfd, 1)
            self._pid_of_fd[pidfd] = pid
            return True

    def unwatch_process(self, pid: int) -> None:
        with self._guard:
            known = self._watch_of_pid.get(pid)
            if known is None:
                return
            pidfd, references = known
            if references <= 0:
                return  # idle already
            self._watch_of_pid[pid] = (pidfd, references - 1)
            if references > 1:
                return
            # Kept for the next wait behind it (its exit still closes it, on the reader).
            self._idle_pids[pid] = None
            if len(self._idle_pids) > _IDLE_PIDFDS:
                oldest = next(iter(self._idle_pids))
                self._forget_pidfd(self._watch_of_pid[oldest][0])

    def _forget_pidfd(self, pidfd: int) -> None:
        pid = self._pid_of_fd.pop(pidfd)
        del self._watch_of_pid[pid]
        self._idle_pids.pop(pid, None)
        os.close(pidfd)  # also leaves the epoll set

    # -- the reader thread ---------------------------------------------------------------

    def _ensure_reader(self) -> select.epoll | None:
        if self._epoll is None:
            try:
                self._epoll = select.epoll()
            except OSError:
                return None
            threading.Thread(
                target=self._read_events, args=(self._epoll,), name="lockyard-wakeups", daemon=True
            ).start()
        return self._epoll

    def _read_events(self, epoll: select.epoll) -> None:
        while True:
            try:
                ready = epoll.poll()
            except (OSError, ValueError) as error:
                if epoll.closed or self._epoll is not epoll:
                    return  # closed (this hub, or a forked child's reset)
                restarted = self._restart_epoll(epoll, error)
                if restarted is None:
                    return
                epoll = restarted
                continue
            for fd, _events in ready:
                with self._guard:
                    inotify = self._inotify
                    exited = self._pid_of_fd.get(fd)
                    if exited is not None:
                        self._forget_pidfd(fd)
                if exited is not None:
                    self.notify(f"pid:{exited}")
                elif inotify is not None and fd == inotify.fd:
                    self._read_inotify(inotify)

    def _restart_epoll(self, broken: select.epoll, error: BaseException) -> select.epoll | None:
        """Replace a failing epoll with a new one watching the same fds; None: push is off."""
        logger.error("wake-up reader: epoll.poll() failed (%s); restarting it", error)
        with self._guard:
            try:
                epoll = select.epoll()
                if self._inotify is not None:
                    epoll.register(self._inotify.fd, select.EPOLLIN)
                for pidfd in self._pid_of_fd:
                    epoll.register(pidfd, select.EPOLLIN)
            except OSError as again:
                logger.critical(
                    "wake-up reader cannot restart (%s): push wake-ups are off in this "
                    "process; waiters fall back to polling",
                    again,
                )
                self._inotify_failed = True
                if self._inotify is not None:
                    self._inotify.close()
                    self._inotify = None
                self._epoll = None
                restarted = None
            else:
                self._epoll = restarted = epoll
            with contextlib.suppress(OSError):
                broken.close()
        self._notify_all()  # events may have been lost meanwhile: every waiter re-checks
        return restarted

    def _read_inotify(self, inotify: Inotify) -> None:
        for event in inotify.read_pending():  # nothing, when already read or closed
            self._dispatch(event.wd, event.mask, event.name)

    def _dispatch(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self._notify_all()  # events were lost: every waiter re-checks
            return
        with self._guard:
            path = self._path_of_wd.get(wd)
            if mask & IN_IGNORED:
                self._path_of_wd.pop(wd, None)
                if path is not None and self._watch_of_path.get(path, (None,))[0] == wd:
                    del self._watch_of_path[path]
                return
        if path is not None:
            # A directory's events name the entry; an entry watched by itself names none.
            self.notify(f"{path}/{name}" if name else path)

    def close(self) -> None:
        with self._guard:
            if self._inotify is not None:
                self._inotify.close()
                self._inotify = None
            for pidfd in list(self._pid_of_fd):
                self._forget_pidfd(pidfd)
            if self._epoll is not None:
                self._epoll.close()
            self._inotify_failed = True


class _HubHolder:
    def __init__(self) -> None:
        self.hub = WakeHub(inotify_enabled=not switched_off())

    def renew_in_child(self) -> None:  # pragma: no cover - runs in forked children only
        # (test_a_forked_child_gets_its_own_identity_and_hub checks it through an exit code.)
        # The reader thread does not exist in a forked child: drop the inherited fds (without
        # taking locks another thread may have held at fork time) and start over.
        old = self.hub
        inherited = [*old._pid_of_fd]
        if old._inotify is not None:
            inherited.append(old._inotify.fd)
        for fd in inherited:
            with contextlib.suppress(OSError):
                os.close(fd)
        if old._epoll is not None:
            old._epoll.close()
        self.hub = WakeHub(inotify_enabled=not switched_off())


_holder = _HubHolder()
os.register_at_fork(after_in_child=_holder.renew_in_child)


def process_hub() -> WakeHub:
    """This process's hub of wake-up topics."""
    return _holder.hub
