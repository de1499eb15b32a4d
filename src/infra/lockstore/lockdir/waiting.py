"""Driving the lock protocol: one wait's rounds, and the two loops that run them.

A `Waiting` holds one waiter's place in line (`queue.Place`) and its wake-up subscriptions.
Each round reads what `protocol.step` needs (O(1) reads), carries out the move it names,
and ends either with the lock or with the `protocol.Watch` of what ends the wait, to which
it subscribes before looking again (so a change in between is not missed). `wait` (threads,
scripts) and `wait_async` (anyio tasks) are the same loop around those rounds; they differ
only in how they sleep.

The lock store is reached through the callables it hands in (`stage`, `take`,
`handed_over`, `holder`): this module calls nothing else of the store, and the store alone
calls it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from types import TracebackType

from ..errors import LockDirFullError
from ..liveness import Liveness, pids_are_local
from ..records import HolderRecord, WaiterRecord
from ..wakeup import Waker
from .protocol import Look, Move, Watch, step, watch_lock, watch_predecessor
from .queue import Place, Queues, is_ours
from .wake_hub import WakeHub, process_hub

log = logging.getLogger(__name__)

DEEP_BACKSTOP_FACTOR = 10
"""A waiter every wake-up source of which is pushed (its predecessor or the holder is in
this process, or followed by a pidfd) and that judges nobody's turn re-checks this many
times less often: with a thousand waiters in a process, their re-checks are all the CPU
they use while nobody moves."""


_WATCH_NOTHING = Watch(frozenset(), frozenset(), frozenset())


class Waiting:
    """One queued wait for lock `name`: queue on enter, leave the queue on exit (always)."""

    def __init__(
        self,
        *,
        queues: Queues,
        place: Place,
        stage: Callable[[str], None],
        take: Callable[[str], bool],
        handed_over: Callable[[str], bool],
        holder: Callable[[], HolderRecord | None],
        lock_topic: str,
        lock_dir: str,
        push: bool,
        poll_interval: float,
        backstop: float,
        agent: str,
        key: str,
    ) -> None:
        self._queues = queues
        self._place = place
        self._stage = stage
        self._take = take
        self._handed_over = handed_over
        self._staged = ""
        self._bell: tuple[str, int] | None = None
        self._rang_in = False  # a doorbell opened in this round
        """(token, fd) of our open doorbell, which a release in another process rings."""
        """The token of the grant we staged for a release to hand over to us ("": none)."""
        self._taken = False
        self._granted = False
        """A release in this process handed us the lock and accepted it for us (we left the
        queue): the next `advance` returns True at once, and a wait that ends without it
        passes the lock on."""
        self._guard = threading.Lock()
        """Held through each round and the exit: a release in another thread accepts a
        grant for us only between them (see `_accept_handed`)."""
        self._holder = holder
        self._lock_topic = lock_topic
        self._lock_dir = lock_dir
        self._push_wanted = push
        self._poll_interval = poll_interval
        self._backstop = max(poll_interval, backstop)
        self._agent = agent
        self._key = key
        self._hub: WakeHub = process_hub()
        self._pushed = False
        self._watch = _WATCH_NOTHING
        self._topics: set[str] = set()
        self._calm = False
        self._watched_dirs: set[str] = set()
        self._watched_entries: set[str] = set()
        self._followed: set[int] = set()
        self._told_full = False
        self.waker = Waker()
        self.interval = poll_interval
        """How long to sleep before the next round when nothing wakes us."""

    def __enter__(self) -> Waiting:
        try:
            self._place.join()
            self._pushed = self._push_wanted and self._hub.push_available
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # Synchronous on purpose: it runs to the end even when the waiting task is cancelled.
        with self._guard:
            if self._staged:
                self._hub.forget_grant(self._staged)
            handed_over = "" if self._taken else self._withdraw_staged()
            self._place.leave()
            if handed_over:
                # A release handed the lock over to us as we stopped waiting (and maybe
                # accepted it for us): pass it on (our entry is gone, so it goes to the next
                # waiter).
                self._queues.release(self._place.name, handed_over)
            self._unsubscribe_all()
            self._close_bell()
            self.waker.close()

    def advance(self) -> bool:
        """One round: True when the lock is ours; else subscribed to what ends the wait."""
        with self._guard:
            if self._granted:
                self._taken = True
                return True
            if self._bell is not None and self._accept_handover():
                return True
            return self._advance()

    def _advance(self) -> bool:
        while True:
            self.waker.clear()
            self._rang_in = False
            watch = self._round()
            if watch is None:
                return True
            changed = self._subscribe(watch)
            self._set_interval()
            if not changed and not self._rang_in:
                return False
            # Subscribed anew, or a doorbell opened: look again (a change in between woke the
            # waker, or was done before a release could find the doorbell).

    def _round(self) -> Watch | None:
        """Apply protocol steps until the lock is ours (None) or there is something to watch."""
        place = self._place
        while True:
            record: WaiterRecord | None = None
            liveness: Liveness | None = None
            in_line = place.in_line()
            seen = None
            if in_line and not place.at_head:
                record = place.predecessor_record()
                liveness = None if record is None or is_ours(record) else record.liveness()[0]
                seen = place.judge(record, dead=liveness is Liveness.DEAD)
            move = step(Look(in_line=in_line, ahead=seen))
            if move is Move.QUEUE_AGAIN:
                handed_over = self._withdraw_staged()
                if handed_over:  # our old wait's grant, released as we are no longer in line
                    self._queues.release(place.name, handed_over)
                self._queue_again()
            elif move is Move.NEXT_AHEAD:
                place.next_ahead()
            elif move is Move.DROP_AHEAD:
                assert record is not None
                self._queues.end_wait(place.name, place.predecessor, record)
                place.next_ahead()
            elif move is Move.PASS_OVER_AHEAD:
                assert record is not None
                self._queues.pass_over(place.name, place.predecessor, record)
                place.next_ahead()
            elif move is Move.TAKE:
                if self._take_if_space():
                    if self._accept():
                        return None
                    continue
                return self._watch_holder()
            else:
                assert record is not None
                pid = self._exit_to_follow(record, liveness)
                here = is_ours(record)
                # Calm: every way our predecessor can leave is pushed to us.
                self._calm = pid is not None or here
                return watch_predecessor(
                    self._queues.queue_dir(place.name),
                    place.predecessor,
                    pid,
                    mine=place.entry,
                    elsewhere=not here,
                )

    def _accept(self) -> bool:
        """The lock holds our grant: accept it by removing our entry. That fails when we
        were passed over meanwhile: the grant is then not ours; pass it on, queue again."""
        if self._place.leave(holding=True):
            self._taken = True
            return True
        token = self._unstage()
        if token:
            self._queues.release(self._place.name, token)
        self._queue_again()
        return False

    def _accept_handover(self) -> bool:
        """The fast way out for a head rung at its doorbell: when the lock holds its staged
        grant (one `faccessat`), accept it at once, without the round's other reads (the
        acceptance checks that our entry is still ours, as the round would). The waker is
        not cleared: we stop waiting either way, or the round that follows clears it."""
        return bool(self._staged) and self._handed_over(self._staged) and self._accept()

    def _queue_again(self) -> None:
        self._place.join()
        # The queue directory may be a new one: watch it anew.
        self._unwatch_dir(self._queues.queue_dir(self._place.name))
        self._watch = Watch(self._watch.topics, frozenset(), self._watch.pids)

    def _watch_holder(self) -> Watch:
        holder = self._holder()
        here = holder is not None and is_ours(holder)
        if not here and self._staged and (self._bell is None or self._bell[0] != self._staged):
            # A holder in another process rings our doorbell when it releases. One that did
            # so before the doorbell existed released before the look that follows it
            # (`advance` looks again), so nothing is missed. (A holder here notifies us.) A
            # wait that queued again has a new token: its doorbell is named by that one.
            self._open_bell(self._staged)
        liveness = None if holder is None or here else holder.liveness()[0]
        pid = self._exit_to_follow(holder, liveness)
        self._calm = here or pid is not None
        return watch_lock(
            self._lock_dir, self._lock_topic, pid, holder_is_here=here, doorbell=bool(self._bell)
        )

    def _take_if_space(self) -> bool:
        """Our turn: take the lock. A full lock directory cannot hold the grant's record:
        keep our place and try again at the next wake-up or backstop re-check, when space
        may have been freed (releases need none), rather than end the wait with an error."""
        try:
            token = self._place.token
            if self._staged != token:
                self._stage(token)
                self._staged = token
                self._hub.expect_grant(token, self._accept_handed)
            taken = self._take(token)
        except LockDirFullError as full:
            if not self._told_full:
                self._told_full = True
                log.warning("agent %s keeps waiting for %s: %s", self._agent, self._key, full)
            return False
        self._told_full = False
        return taken

    def _open_bell(self, token: str) -> None:
        self._close_bell()
        fd = self._queues.open_doorbell(self._place.name, token)
        if fd is not None:
            self.waker.listen(fd)
            self._bell = (token, fd)
            self._rang_in = True

    def _close_bell(self) -> None:
        if self._bell is not None:
            token, fd = self._bell
            self._bell = None
            self.waker.unlisten(fd)
            self._queues.close_doorbell(self._place.name, token, fd)

    def _withdraw_staged(self) -> str:
        """Take back our staged grant; the token of the lock we then hold when a release
        handed it over to us first ("": none)."""
        token = self._unstage()
        if token and self._queues.withdraw(self._place.name, token):
            return token
        return ""

    def _unstage(self) -> str:
        """Forget our staged grant (a release in this process no longer offers it to us);
        its token, "" when none."""
        token, self._staged = self._staged, ""
        if token:
            self._hub.forget_grant(token)
        return token

    def _accept_handed(self, token: str) -> bool:
        """A release in this process has just handed the lock over to our staged grant
        `token`: accept it by leaving the queue, exactly as our own next round would, so
        that we return as soon as we are woken. Left to that round (False) while our thread
        is in a round or exiting, or when the grant is no longer what we wait with; a
        removal that fails (we were passed over meanwhile) leaves us out of line, which that
        round sees and handles (the grant is passed on, we queue again)."""
        if not self._guard.acquire(blocking=False):
            return False
        try:
            if self._taken or self._granted or token != self._staged:
                return False
            self._granted = self._place.leave(holding=True)
            return self._granted
        finally:
            self._guard.release()

    def _exit_to_follow(
        self, record: HolderRecord | WaiterRecord | None, liveness: Liveness | None
    ) -> int | None:
        """The pid whose exit ends our wait: a live process of this machine other than ours."""
        if not self._pushed or record is None or liveness is not Liveness.ALIVE:
            return None
        # Recorded pids are /proc's numbers; where those are not ours (a pid namespace whose
        # /proc was not remounted) pidfd_open would name another process.
        return record.pid if pids_are_local() else None

    def _set_interval(self) -> None:
        """Poll without push; with push, re-check only as a backstop (lost events, exits no
        pidfd follows, turns to judge), rarely when every wake-up source is pushed."""
        if not self._pushed:
            self.interval = self._poll_interval
        elif self._calm and self._watch.pids <= self._followed:
            self.interval = self._backstop * DEEP_BACKSTOP_FACTOR
        else:
            self.interval = self._backstop

    # -- subscriptions -------------------------------------------------------------------

    def _subscribe(self, watch: Watch) -> bool:
        """Subscribe to exactly `watch`; False when nothing changed. A process or directory
        that cannot be watched is left out: then we re-check at the backstop interval, or
        poll (a directory: out of inotify watches, or gone)."""
        if watch == self._watch:
            return False
        hub, waker = self._hub, self.waker
        for pid in self._followed - watch.pids:
            hub.unwatch_process(pid)
            self._followed.discard(pid)
        for pid in watch.pids - self._followed:
            if hub.watch_process(pid):
                self._followed.add(pid)
        topics = set(watch.topics) | {f"pid:{pid}" for pid in self._followed}
        for topic in self._topics - topics:
            hub.unsubscribe(topic, waker)
        for topic in topics - self._topics:
            hub.subscribe(topic, waker)
        self._topics = topics
        wanted = watch.directories | self._watch_entries(watch)
        if not self._pushed:
            wanted = frozenset()
        for directory in self._watched_dirs - wanted:
            self._unwatch_dir(directory)
        for directory in wanted - self._watched_dirs:
            if not hub.watch(directory):
                self._pushed = False  # cannot follow it: poll from now on
                break
            self._watched_dirs.add(directory)
        self._watch = watch
        return True

    def _watch_entries(self, watch: Watch) -> frozenset[str]:
        """Watch exactly `watch.entries` by themselves; the directories to watch instead for
        those that cannot be (out of inotify watches). An entry gone already is left out:
        the look that follows any change of subscription sees it gone."""
        wanted = watch.entries if self._pushed else frozenset()
        for path in self._watched_entries - wanted:
            self._watched_entries.discard(path)
            self._hub.unwatch(path)
        instead: set[str] = set()
        for path in wanted - self._watched_entries:
            watched = self._hub.watch_entry(path)
            if watched:
                self._watched_entries.add(path)
            elif watched is False:
                instead.add(os.path.dirname(path))
        return frozenset(instead)

    def _unsubscribe_all(self) -> None:
        hub, waker = self._hub, self.waker
        for topic in self._topics:
            hub.unsubscribe(topic, waker)
        for pid in self._followed:
            hub.unwatch_process(pid)
        for directory in self._watched_dirs:
            hub.unwatch(directory)
        for path in self._watched_entries:
            hub.unwatch(path)
        self._topics.clear()
        self._followed.clear()
        self._watched_dirs.clear()
        self._watched_entries.clear()
        self._watch = _WATCH_NOTHING

    def _unwatch_dir(self, directory: str) -> None:
        if directory in self._watched_dirs:
            self._watched_dirs.discard(directory)
            self._hub.unwatch(directory)


def wait(waiting: Waiting, seconds: float) -> bool:
    """Wait in line until the lock is ours (True) or `seconds` pass (False)."""
    deadline = time.monotonic() + seconds
    with waiting:
        while True:
            if waiting.advance():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            waiting.waker.wait(min(remaining, waiting.interval))


async def wait_async(waiting: Waiting, seconds: float) -> bool:
    """`wait` for anyio tasks; cancel-safe (leaving the queue is synchronous)."""
    deadline = time.monotonic() + seconds
    with waiting:
        while True:
            if waiting.advance():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await waiting.waker.wait_async(min(remaining, waiting.interval))
