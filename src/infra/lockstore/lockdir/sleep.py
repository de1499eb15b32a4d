"""How a waiter of the lock directory sleeps, and everything that wakes it.

A waiter sleeps on a `Waker` (`wakeup.py`: an eventfd, or a future an asyncio task parks on)
until what the line told it to wait for (`line.Await`) happens, or a re-check is due. What
wakes it, cheapest first:

- **topics**: a release or a removal in this process notifies the waiters of this process
  subscribed to that lock or entry (`WakeHub.notify`), directly, with no system call;
- **doorbells**: a head whose holder is in another process listens on a FIFO beside the lock
  (`<name>.bell-<token>`), which a release rings with one byte: that wakes the waiting thread
  or task itself, with no reader thread in between;
- **inotify on entries**: a waiter whose predecessor is in another process watches that one
  entry (its removal), not the queue directory, so a handoff wakes one process, not every
  process with a waiter in the queue; the lock directory itself is watched only by a head
  that could make no doorbell;
- **pidfds**: the exit of the holder's or the predecessor's process, so a crash is noticed at
  once and its lock reclaimed;
- **re-checks**: without any of these (inotify switched off, a file system without events)
  the waiter polls at its poll interval; with them it still looks again now and then (a lost
  event, an exit no pidfd follows, a predecessor's turn to judge), rarely when every way its
  wait can end is pushed to it.

One `WakeHub` per process turns inotify events and process exits (`ProcessExits`, its
pidfds) into topic notifications (one reader thread, on epoll); its `AsleepHeads` are the
heads asleep in the process that a release there accepts for. A `Sleeper` is one wait's side
of it: it subscribes to what an `Await` names, and sleeps (a thread) or parks (an asyncio
task) until woken; a `Drain` is the sleep of a wait that outwaits others' holds. The victim
notices of the cross-process monitor are woken through the same hub.

Sync and async waits share every decision: the loops that drive a wait (the request's steps
in `scopes.run_steps`, the line's recipe in `operations.wait`, the subscription here in
`Sleeper.sleep`) are generators that yield each sleep as a `Nap`, and only the two drivers,
`sleep_through` (a thread blocks) and `sleep_through_async` (a task awaits), differ.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import stat
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Final, TypeVar

from ..inotify import (
    ENTRIES,
    IN_DELETE,
    IN_IGNORED,
    IN_MOVE_SELF,
    IN_Q_OVERFLOW,
    ITSELF,
    Inotify,
    switched_off,
)
from ..liveness import is_this_process, pids_are_local
from ..wakeup import Waker
from .disk import BELL_MARK, LOCK_SUFFIX, QUEUE_SUFFIX, LockDir
from .line import Accepted, Await

logger = logging.getLogger(__name__)

T = TypeVar("T")

_WATCH_MASK: Final = ENTRIES | IN_MOVE_SELF
_IDLE_PIDFDS: Final = 64
"""Pidfds nobody follows any more, kept open (and watched) for the next wait behind the
same process: a waiter that hands a lock back and forth with another process follows it at
every wait. Each costs one descriptor."""
_BELL_FLAGS: Final = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
_STALE_BELL_SECONDS: Final = 60.0
DEEP_BACKSTOP_FACTOR: Final = 10
"""A waiter every wake-up source of which is pushed (its predecessor or the holder is in
this process, or followed by a pidfd) and that judges nobody's turn re-checks this many
times less often: with a thousand waiters in a process, their re-checks are all the CPU
they use while nobody moves."""


class WakeHub:
    """This process's registry of topic subscribers, fed by the store, by inotify, and by
    pidfds (a process's exit is the topic `pid:<pid>`, followed through `exits`).

    One reader thread waits (epoll) on the inotify fd and the pidfds and turns what they
    report into topic notifications.
    """

    def __init__(self, *, inotify_enabled: bool = True) -> None:
        self._guard = threading.Lock()
        self._subscribers: dict[str, set[Waker]] = {}
        self._inotify_enabled = inotify_enabled
        self._inotify: Inotify | None = None
        self._inotify_failed = False
        self.watches_moved = 0
        """How many watched directories were moved away from their path (a queue wiped and
        made again): a waiter that sees this change asks for its watches again."""
        self._path_of_wd: dict[int, str] = {}
        self._watch_of_path: dict[str, tuple[int, int]] = {}  # path -> (wd, reference count)
        self._epoll: select.epoll | None = None
        self.exits = ProcessExits(self._guard, self._reader_for_exits)
        """The processes followed to their exit (pidfds on this hub's reader)."""
        self.heads = AsleepHeads()

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

    # -- inotify -------------------------------------------------------------------------

    def watch(self, directory: str) -> bool:
        """Deliver `directory`'s events to topic subscribers; False if push is unavailable."""
        with self._guard:
            inotify = self._ensure_inotify()
            if inotify is None:
                return False
            try:
                # Asked every time, even when watched already: the path may name a new
                # directory (a queue removed when it emptied, or wiped, and made again), which
                # gets a new descriptor; the old one ends with its directory (IN_IGNORED).
                wd = inotify.add_watch(directory, _WATCH_MASK)
            except OSError:  # gone, or out of watches (ENOSPC): this waiter polls instead
                return False
            self._hold_watch(directory, wd)
            return True

    def watch_entry(self, path: str) -> bool | None:
        """Deliver the end of the queue entry at `path` (its removal or move) to the topic
        `path`, and the removal of the record in it to the topic `path/<token>`, without the
        rest of its directory's events: True when watched; None when the entry is gone
        already (the caller's next look sees that); False when push cannot follow it (no
        inotify here, out of watches: watch its directory instead).

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
                wd = inotify.add_entry_watch(path, ITSELF | IN_DELETE)
            except OSError as error:
                return None if error.errno in (errno.ENOENT, errno.ENOTDIR) else False
            self._hold_watch(path, wd)
            return True

    def _hold_watch(self, path: str, wd: int) -> None:
        """One more hold of the watch `wd` of `path` (under the guard)."""
        known = self._watch_of_path.get(path)
        self._watch_of_path[path] = (wd, 1 if known is None else known[1] + 1)
        self._path_of_wd[wd] = path

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

    def _reader_for_exits(self) -> select.epoll | None:
        """The reader's epoll set, for a pidfd (under the guard); None: push is off here."""
        return self._ensure_reader() if self._inotify_enabled else None

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
                    exited = self.exits.exited(fd)
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
                for pidfd in self.exits.pidfds():
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
            if mask & IN_MOVE_SELF:
                # Its path may name another directory from now on; an entry watched by
                # itself that moved is gone from its queue: its subscribers look again.
                self.watches_moved += 1
            if mask & IN_IGNORED:
                self._path_of_wd.pop(wd, None)
                if path is not None and self._watch_of_path.get(path, (None,))[0] == wd:
                    del self._watch_of_path[path]
                return
        if path is not None:
            # A directory's events name the entry; an entry watched by itself names none.
            self.notify(f"{path}/{name}" if name else path)

    def drop_inherited(self) -> None:  # pragma: no cover - runs in forked children only
        """In a forked child, where the reader thread does not exist: close the inherited
        descriptors, without taking locks another thread may have held at fork time."""
        inherited = self.exits.pidfds()
        if self._inotify is not None:
            inherited.append(self._inotify.fd)
        for fd in inherited:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self._epoll is not None:
            self._epoll.close()

    def close(self) -> None:
        with self._guard:
            if self._inotify is not None:
                self._inotify.close()
                self._inotify = None
            self.exits.close()
            if self._epoll is not None:
                self._epoll.close()
            self._inotify_failed = True


class ProcessExits:
    """The processes this process follows to their exit: a pidfd each, on the hub's reader
    (`reader`, called under `guard`, the hub's), which notifies `pid:<pid>` when it exits.
    A pidfd counts its followers, and stays open a while once none is left (`_IDLE_PIDFDS`)."""

    def __init__(self, guard: threading.Lock, reader: Callable[[], select.epoll | None]) -> None:
        self._guard, self._reader = guard, reader
        self._pid_of_fd: dict[int, int] = {}
        self._watch_of_pid: dict[int, tuple[int, int]] = {}  # pid -> (pidfd, reference count)
        self._idle_pids: dict[int, None] = {}
        """Followed pids whose reference count is 0, oldest first (see _IDLE_PIDFDS)."""

    def watch(self, pid: int) -> bool:
        """Notify `pid:<pid>` when that process exits; False where pidfds are unavailable."""
        with self._guard:
            known = self._watch_of_pid.get(pid)
            if known is not None:
                self._watch_of_pid[pid] = (known[0], known[1] + 1)
                self._idle_pids.pop(pid, None)
                return True
            epoll = self._reader()
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

    def unwatch(self, pid: int) -> None:
        """Undo one `watch` of `pid`."""
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
                self._forget(self._watch_of_pid[oldest][0])

    def exited(self, fd: int) -> int | None:
        """The pid whose pidfd `fd` reported its exit, forgotten (its pidfd closed); None:
        `fd` is no pidfd of ours. Under the guard."""
        pid = self._pid_of_fd.get(fd)
        if pid is not None:
            self._forget(fd)
        return pid

    def pidfds(self) -> list[int]:
        return [*self._pid_of_fd]

    def close(self) -> None:
        """Close every pidfd (under the guard)."""
        for pidfd in list(self._pid_of_fd):
            self._forget(pidfd)

    def _forget(self, pidfd: int) -> None:
        pid = self._pid_of_fd.pop(pidfd)
        del self._watch_of_pid[pid]
        self._idle_pids.pop(pid, None)
        os.close(pidfd)  # also leaves the epoll set


class AsleepHeads:
    """The heads asleep in this process with their grant staged, which a release here
    accepts for (`line._accept_for`): the release claims the head, removes its entry as the
    head's own look would, and wakes it with that verdict. Apart from the hub's topics: a
    claim is no wake-up source, it replaces the head's look after one."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._asleep: dict[str, Sleeper] = {}
        """staged grant token -> the head that sleeps here with that grant staged."""
        self._claimed: dict[str, Sleeper] = {}
        """staged grant token -> the head a release here claimed (`claim`)."""

    def fall_asleep(self, token: str, sleeper: Sleeper) -> None:
        """`sleeper`, a head with grant `token` staged, sleeps until `wake_up`."""
        with self._guard:
            self._asleep[token] = sleeper

    def wake_up(self, token: str, sleeper: Sleeper) -> bool:
        """`sleeper` wakes: True when nobody claimed it meanwhile (else its claimer's
        verdict is on its way, see `Sleeper`)."""
        with self._guard:
            return self._asleep.pop(token, None) is sleeper

    def is_asleep(self, token: str) -> bool:
        """Whether the head of grant `token` sleeps here (a release here need not ring it:
        it listens to the lock's topic)."""
        return token in self._asleep

    def claim(self, token: str) -> str | None:
        """Claim the head asleep here with grant `token` staged: its entry; None when there
        is none. It wakes only once `let_wake` gives its verdict."""
        if not self._asleep:
            return None  # nobody sleeps here (every handoff to another process)
        with self._guard:
            sleeper = self._asleep.pop(token, None)
            if sleeper is None:
                return None
            sleeper.verdict.acquire()  # free: only its one claimer takes it
            self._claimed[token] = sleeper
        return sleeper.entry

    def let_wake(self, token: str, accepted: Accepted | None) -> None:
        """Wake the head claimed under `token`, with the claimer's verdict."""
        sleeper = self._claimed.pop(token)
        sleeper.accepted = accepted
        sleeper.verdict.release()
        sleeper.waker.wake()


class _HubHolder:
    def __init__(self) -> None:
        self.hub = WakeHub(inotify_enabled=not switched_off())

    def renew_in_child(self) -> None:  # pragma: no cover - runs in forked children only
        # (test_a_forked_child_gets_its_own_identity_and_hub checks it through an exit code.)
        self.hub.drop_inherited()
        self.hub = WakeHub(inotify_enabled=not switched_off())


_holder = _HubHolder()
os.register_at_fork(after_in_child=_holder.renew_in_child)


def process_hub() -> WakeHub:
    """This process's hub of wake-up topics."""
    return _holder.hub


# -- one wait's sleep --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Subscription:
    """The wake-ups one `Await` asks for, in this process's terms."""

    topics: frozenset[str] = frozenset()
    entries: frozenset[str] = frozenset()
    """Entries of other processes' waiters, watched by themselves (inotify)."""
    directories: frozenset[str] = frozenset()
    pid: int | None = None
    bell: str | None = None
    here: bool = False
    """The process whose exit ends the wait is this one: nothing to follow."""


@dataclass(slots=True)
class _Held:
    """What a `Sleeper` holds of the hub, to give back."""

    topics: set[str] = field(default_factory=set)
    entries: set[str] = field(default_factory=set)
    directories: set[str] = field(default_factory=set)
    pid: int | None = None
    bell: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class Nap:
    """One sleep a wait asks for: on `waker`, until it is woken or `seconds` have passed."""

    waker: Waker
    seconds: float


Naps = Generator[Nap, None, T]
"""A wait whose decisions run here and whose sleeps are yielded, as `Nap`s, to whoever
carries it out: `sleep_through` in a thread, `sleep_through_async` on the event loop. So the
decisions are written once; only the sleeping differs."""


def sleep_through(naps: Naps[T]) -> T:
    """Carry out `naps`, each nap a blocking wait of this thread. An exception (an interrupt)
    goes into `naps`, which leave nothing behind before it goes on."""
    try:
        nap = next(naps)
        while True:
            try:
                nap.waker.wait(nap.seconds)
            except BaseException as error:
                nap = naps.throw(error)
            else:
                nap = naps.send(None)
    except StopIteration as done:
        result: T = done.value
        return result


async def sleep_through_async(naps: Naps[T]) -> T:
    """`sleep_through` for anyio tasks: each nap an await (cancel-safe: the cancellation goes
    into `naps`, which leave nothing behind before it goes on)."""
    try:
        nap = next(naps)
        while True:
            try:
                await nap.waker.wait_async(nap.seconds)
            except BaseException as error:
                nap = naps.throw(error)
            else:
                nap = naps.send(None)
    except StopIteration as done:
        result: T = done.value
        return result


class Sleeper:
    """How one wait for lock `name` sleeps: subscribed to what the line's `Await` names, woken
    by the cheapest way there is, re-checking at `backstop` seconds (`poll_interval` without
    push wake-ups)."""

    def __init__(
        self,
        directory: LockDir,
        name: str,
        *,
        push: bool,
        poll_interval: float,
        backstop: float,
    ) -> None:
        self._dir = directory
        self._name = name
        self._lock_topic = f"{directory.path}/{name}{LOCK_SUFFIX}"
        self._queue_dir = f"{directory.path}/{name}{QUEUE_SUFFIX}"
        self._hub = process_hub()
        self._pushed = push and self._hub.push_available
        self._poll_interval = poll_interval
        self._backstop = max(poll_interval, backstop)
        self._wanted = _Subscription()
        self._watches_moved = self._hub.watches_moved
        self._held = _Held()
        self.waker = Waker()
        self.entry = ""
        """Our entry, while we sleep as a head with our grant staged (`AsleepHeads.fall_asleep`):
        a release here that claims us (`AsleepHeads.claim`) accepts that grant for us."""
        self.verdict = threading.Lock()
        """Held by the release that claimed us, until it has given its verdict."""
        self.accepted: Accepted | None = None
        """The verdict: the grant accepted for us; None: look again."""

    def sleep(self, awaited: Await, deadline: float) -> Naps[bool | Accepted]:
        """Sleep until woken or a re-check is due (True: look again), or tell that
        `deadline` passed (False), or that a release here accepted our grant (`Accepted`).
        A subscription that changed looks again at once: a change in between woke the
        waker, or was made before the subscription could hear of it."""
        if self._subscribe(self._wanted_for(awaited)):
            self.waker.clear()
            return True
        seconds = self._seconds(deadline)
        if seconds <= 0:
            return False
        head = self._fall_asleep(awaited)
        try:
            yield Nap(self.waker, seconds)
        finally:
            accepted = self._wake_up(head)
        self.waker.clear()
        return accepted or True

    def _fall_asleep(self, awaited: Await) -> str | None:
        """A head with its grant staged sleeps where a release here can accept it for it:
        the grant's token."""
        token = awaited.bell if awaited.ahead is None else None
        if token is not None:
            self.entry = awaited.mine
            self._hub.heads.fall_asleep(token, self)
        return token

    def _wake_up(self, token: str | None) -> Accepted | None:
        """The verdict of the release that claimed us while we slept, once it is given."""
        if token is None or self._hub.heads.wake_up(token, self):
            return None
        with self.verdict:  # the claimer holds it until its verdict is in
            accepted, self.accepted = self.accepted, None
        return accepted

    def _seconds(self, deadline: float) -> float:
        """How long to sleep before the next re-check (at most until `deadline`)."""
        if not self._pushed:
            interval = self._poll_interval
        elif self._wanted.here or self._held.pid is not None:
            # Calm: every way the wait can end is pushed to it (an exit whose pidfd could
            # not be opened is not: that one is seen by a re-check).
            interval = self._backstop * DEEP_BACKSTOP_FACTOR
        else:
            interval = self._backstop
        return min(deadline - time.monotonic(), interval)

    def _wanted_for(self, awaited: Await) -> _Subscription:
        """Which topics, watches, process and doorbell end the wait `awaited` names."""
        process = awaited.process
        here = process is not None and is_this_process(process.pid, process.start_time)
        pid = None
        if self._pushed and process is not None and awaited.alive and not here:
            # Recorded pids are /proc's numbers; where those are not ours (a pid namespace
            # whose /proc was not remounted) pidfd_open would name another process.
            pid = process.pid if pids_are_local() else None
        mine = f"{self._queue_dir}/{awaited.mine}"
        if awaited.ahead is not None:
            # Our predecessor: its removal here notifies the topic; done by another process,
            # inotify on that entry alone tells (its removal is the unlink of the record in
            # it, which names the token; a removal of an entry of this process by another
            # process is seen at the next re-check, as is our own entry's).
            ahead = f"{self._queue_dir}/{awaited.ahead}"
            record = ahead if process is None else f"{ahead}/{process.token}"
            return _Subscription(
                topics=frozenset({ahead, mine, record}),
                entries=frozenset() if here else frozenset({ahead}),
                pid=pid,
                here=here,
            )
        # The head: a holder here notifies it when it releases; one elsewhere rings its
        # doorbell. Only a head without a doorbell watches the lock directory, whose events
        # would wake this process's reader thread at every lock operation.
        bell = None if here else awaited.bell
        return _Subscription(
            topics=frozenset({self._lock_topic}),
            directories=frozenset() if here or bell is not None else frozenset({self._dir.path}),
            pid=pid,
            bell=bell,
            here=here,
        )

    def _subscribe(self, wanted: _Subscription) -> bool:
        """Hold exactly what `wanted` names; False when nothing changed. What cannot be
        followed is left out: then the re-checks find what it would have told."""
        moved = self._hub.watches_moved
        if wanted == self._wanted and moved == self._watches_moved:
            return False
        self._watches_moved = moved
        hub, waker, held = self._hub, self.waker, self._held
        if held.pid is not None and held.pid != wanted.pid:
            hub.exits.unwatch(held.pid)
            held.pid = None
        if wanted.pid is not None and held.pid is None and hub.exits.watch(wanted.pid):
            held.pid = wanted.pid
        topics = set(wanted.topics)
        if held.pid is not None:
            topics.add(f"pid:{held.pid}")
        for topic in held.topics - topics:
            hub.unsubscribe(topic, waker)
        for topic in topics - held.topics:
            hub.subscribe(topic, waker)
        held.topics = topics
        if held.bell is not None and held.bell[0] != wanted.bell:
            self._close_bell()
        if wanted.bell is not None and held.bell is None:
            self._open_bell(wanted.bell)
        directories = set(wanted.directories)
        if held.bell is None and wanted.bell is not None:
            directories.add(self._dir.path)  # no doorbell could be made: watch the lock
        self._follow(wanted.entries if self._pushed else frozenset(), directories)
        self._wanted = wanted
        return True

    def _follow(self, entries: frozenset[str], directories: set[str]) -> None:
        """Watch exactly `entries` by themselves, and `directories` (plus the directory of
        each entry that cannot be watched by itself: out of inotify watches). An entry gone
        already is left out: the look that follows a change of subscription sees it gone."""
        hub, held = self._hub, self._held
        for path in held.entries - entries:
            held.entries.discard(path)
            hub.unwatch(path)
        for path in entries - held.entries:
            watched = hub.watch_entry(path)
            if watched:
                held.entries.add(path)
            elif watched is False:
                directories.add(os.path.dirname(path))
        if not self._pushed:
            directories.clear()
        # Every directory is asked for again (then the old hold given back): one that was
        # removed and made again since (a wiped queue) is a new directory to watch.
        given_back, held.directories = held.directories, set()
        for directory in directories:
            if not hub.watch(directory):
                self._pushed = False  # cannot follow it: poll from now on
                break
            held.directories.add(directory)
        for directory in given_back:
            hub.unwatch(directory)

    def _open_bell(self, token: str) -> None:
        fd = open_doorbell(self._dir, self._name, token)
        if fd is not None:
            self.waker.listen(fd)
            self._held.bell = (token, fd)

    def _close_bell(self) -> None:
        if self._held.bell is not None:
            token, fd = self._held.bell
            self._held.bell = None
            self.waker.unlisten(fd)
            close_doorbell(self._dir, self._name, token, fd)

    def close(self) -> None:
        """Give back everything held (once the wait has left the line)."""
        hub, waker, held = self._hub, self.waker, self._held
        for topic in held.topics:
            hub.unsubscribe(topic, waker)
        if held.pid is not None:
            hub.exits.unwatch(held.pid)
        for path in held.entries | held.directories:
            hub.unwatch(path)
        self._held = _Held(bell=held.bell)
        self._close_bell()
        self._wanted = _Subscription()
        waker.close()


class Drain:
    """How a wait that outwaits other agents' holds sleeps (`scopes.py`: the readers of a lock,
    the holds under a directory): woken when an entry of the directory it follows changes,
    in this process (its topics) or in another (inotify on that directory), else at its next
    re-check. `push`: follow other processes' changes by inotify (else only this process's)."""

    def __init__(self, *, push: bool) -> None:
        self._hub = process_hub()
        self._push = push
        self._waker = Waker()
        self._followed: str | None = None
        self._watched = False

    def follow(self, directory: str) -> bool:
        """Be woken by changes of `directory`'s entries from now on; True when it was not
        followed yet: the caller looks again before it sleeps (a change made before this
        call woke nobody)."""
        if directory == self._followed:
            return False
        self._drop()
        self._waker.clear()
        self._hub.subscribe(directory + "/", self._waker)
        self._followed = directory
        self._watched = self._push and self._hub.watch(directory)
        return True

    def sleep(self, seconds: float) -> Naps[None]:
        yield Nap(self._waker, seconds)
        self._waker.clear()

    def _drop(self) -> None:
        if self._followed is not None:
            self._hub.unsubscribe(self._followed + "/", self._waker)
            if self._watched:
                self._hub.unwatch(self._followed)
        self._followed, self._watched = None, False

    def close(self) -> None:
        self._drop()
        self._waker.close()


# -- doorbells -------------------------------------------------------------------------------


def open_doorbell(directory: LockDir, name: str, token: str) -> int | None:
    """Make and open the doorbell of the wait `token` for lock `name`: a FIFO
    `<name>.bell-<token>` that a release rings (`ring`) to wake that waiter directly.
    Opened for reading and writing, non-blocking: it never reads as closed, and empties to
    EAGAIN. None where no FIFO can be made here (the waiter then relies on inotify)."""
    bell = f"{name}{BELL_MARK}{token}"
    try:
        os.mkfifo(bell, 0o600, dir_fd=directory.fd)
    except FileExistsError:
        pass  # ours from an earlier look of this wait
    except OSError:
        return None  # a file system without FIFOs, or full
    try:
        fd = os.open(bell, _BELL_FLAGS | os.O_RDWR, dir_fd=directory.fd)
    except OSError:
        return None
    info = os.fstat(fd)
    if not stat.S_ISFIFO(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)  # not the FIFO we made: leave it be, and do without
        return None
    return fd


def close_doorbell(directory: LockDir, name: str, token: str, fd: int) -> None:
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(f"{name}{BELL_MARK}{token}", dir_fd=directory.fd)


def ring(directory: LockDir, name: str, token: str) -> None:
    """Wake the waiter `token` of lock `name` through its doorbell, if it has one open
    (without one: nothing, the waiter hears of the change some other way)."""
    try:
        fd = os.open(f"{name}{BELL_MARK}{token}", _BELL_FLAGS | os.O_WRONLY, dir_fd=directory.fd)
    except OSError:
        return  # ENOENT: no doorbell; ENXIO: nobody listens (it left, or died)
    try:
        os.write(fd, b"\0")
    except OSError:
        pass  # EAGAIN: full of rings already
    finally:
        os.close(fd)


def stale_doorbell(directory: LockDir, entry: str) -> bool:
    """Whether doorbell `entry` is debris: nobody listens (its waiter died) and it is older
    than a minute (a live waiter opens its doorbell as soon as it makes it)."""
    try:
        age = time.time() - os.lstat(entry, dir_fd=directory.fd).st_mtime
    except OSError:
        return False
    try:
        fd = os.open(entry, _BELL_FLAGS | os.O_WRONLY, dir_fd=directory.fd)
    except OSError as error:
        return error.errno == errno.ENXIO and age >= _STALE_BELL_SECONDS
    os.close(fd)
    return False
