"""The lock protocol: every decision a lock takes, in one place and without I/O.

The invariant (the recipe of etcd's `concurrency.Mutex` and of ZooKeeper's lock):

    The oldest live entry of a lock's queue owns the right to take the lock.

A lock is free or held by one grant (`lockdir.py` makes that atomic). Everything else follows
from the invariant:

- **Queueing.** A waiter that could not take the lock adds an entry to the lock's queue, named
  by a ticket one above the highest there, claimed by exclusive creation: entries sort in
  arrival order. While our entry exists no entry can appear below it, so the entries ahead of
  ours, listed once when we queue, only ever go away: a waiter never reads the queue again.
- **The head** (no entry ahead of ours) takes the lock when it is free, reclaiming it from a
  holder that is provably dead; otherwise it watches the lock and its holder's process.
- **Everyone else** watches only its predecessor, the nearest entry ahead: that entry's removal
  and its process's exit. When it goes, the next entry of the list ahead is the predecessor.
  So a release wakes one waiter, and a waiter's re-check costs O(1) whatever the queue length.
- **Liveness.** A predecessor whose process is provably dead is dropped by its successor. A
  head that leaves a free lock untaken for longer than its turn (stopped, stuck) is passed
  over by its successor, or by the next `try_lock`; so is a head that leaves a grant handed
  over to it unaccepted, and its grant is released: dropping its entry and its accepting
  (removing that same entry) exclude each other. A taken lock is never taken from anyone.
- **Handing over.** The head stages the grant it would publish (`<name>.tmp-<token>`, its
  holder record) and opens its doorbell (a FIFO, `<name>.bell-<token>`) before it looks at
  the lock. A release publishes that staged grant in place of its own (`unlink` of its
  record, `rename` of the staging onto the lock), so the lock passes to the head without
  ever looking free, and rings the doorbell (one byte), which wakes the head's own thread
  or task directly. The head accepts the
  grant by removing its queue entry, as when it takes the lock itself: until then the grant
  is still its turn. A head that stops waiting takes its staged grant back (`unlink` of its
  record) or, if a release handed it over first, releases it, which hands it on.
- **Turns.** The first entry's turn starts when it becomes first at a free lock or is handed
  the lock: a release stamps the first entry before removing or handing over the lock, a
  first entry that leaves stamps its successor before its own entry goes.
- **`try_lock`** takes a free lock only when no live entry has the turn: it never jumps the
  queue (the holder's re-acquire still succeeds).
- **Leaving** (granted, timed out, cancelled) removes our entry, synchronously: a cancelled
  wait leaves no queue entry and no lock behind.

`step` below is the whole of a waiter's recipe; `watch_predecessor` and `watch_lock` say what
wakes it. The drivers (`waiting.py`, one loop for threads and one for async tasks) only read
what a step needs and carry out the move it names.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Seen(Enum):
    """What a waiter found of its predecessor."""

    GONE = "gone"
    """Its entry was removed: the next entry ahead is the predecessor now."""
    DEAD = "dead"
    """Its process is provably dead: its entry must go."""
    STALLED = "stalled"
    """It is first at a free lock and its turn is over: it must be passed over."""
    WAITING = "waiting"
    """Alive (or not provably dead), waiting its turn: watch it."""


class Move(Enum):
    """What a waiter does next."""

    QUEUE_AGAIN = "queue again"
    """Our entry was ended by someone else (passed over, `lockyard clean`): queue at the back."""
    NEXT_AHEAD = "next ahead"
    """Forget the predecessor, which left; look at the next entry ahead."""
    DROP_AHEAD = "drop ahead"
    """Remove the dead predecessor's entry, then look at the next entry ahead."""
    PASS_OVER_AHEAD = "pass over ahead"
    """Remove the stalled first entry (logged), then look at the next entry ahead."""
    TAKE = "take"
    """We are the head: try to take the lock."""
    WATCH_AHEAD = "watch ahead"
    """Wait until the predecessor leaves or its process exits."""


@dataclass(frozen=True, slots=True)
class Look:
    """What one round of a wait read from the lock directory (each an O(1) read)."""

    in_line: bool
    """Our entry is still there and still ours."""
    ahead: Seen | None
    """What we found of our predecessor; None when no entry is ahead of ours."""


_AFTER_SEEING = {
    Seen.GONE: Move.NEXT_AHEAD,
    Seen.DEAD: Move.DROP_AHEAD,
    Seen.STALLED: Move.PASS_OVER_AHEAD,
    Seen.WAITING: Move.WATCH_AHEAD,
}


def step(look: Look) -> Move:
    """A waiter's next move: am I still in line, am I the head, what of my predecessor?"""
    if not look.in_line:
        return Move.QUEUE_AGAIN
    if look.ahead is None:
        return Move.TAKE
    return _AFTER_SEEING[look.ahead]


def judge_predecessor(*, present: bool, dead: bool, first: bool, turn_over: bool) -> Seen:
    """`present`: its entry exists; `dead`: its process is provably dead; `first`: no entry is
    ahead of it; `turn_over`: the lock is free and its turn began over `turn_timeout` ago."""
    if not present:
        return Seen.GONE
    if dead:
        return Seen.DEAD
    if first and turn_over:
        return Seen.STALLED
    return Seen.WAITING


def turn_is_over(*, untaken: bool, turn_age: float | None, turn_timeout: float) -> bool:
    """Whether the first entry's turn at the lock has lasted too long: only ever while the
    lock is `untaken`, free or holding the grant a release handed over to that entry which
    it has not accepted (a lock taken by anyone is never taken from them, however old the
    turn)."""
    return untaken and turn_age is not None and turn_age >= turn_timeout


@dataclass(frozen=True, slots=True)
class Watch:
    """What ends a wait: topics (entries whose removal this process hears of), the
    directories and single entries whose inotify events carry them from other processes,
    and processes whose exit does."""

    topics: frozenset[str]
    directories: frozenset[str]
    pids: frozenset[int]
    entries: frozenset[str] = frozenset()


def watch_predecessor(
    queue_dir: str, entry: str, pid: int | None, *, mine: str, elsewhere: bool
) -> Watch:
    """A waiter behind `entry` wakes when that entry goes, or when its process `pid` exits
    (None: not followed); and when its own entry `mine` is removed in this process.

    A predecessor `elsewhere` (in another process) is watched by its entry itself, through
    inotify. Not the queue directory: a directory watch would wake every process with a
    waiter in the queue at every change in it, so each handoff would cost as many wake-ups
    as there are waiting processes. A predecessor in this process needs no inotify at all:
    its entry goes by a removal here, which notifies the topic directly (one done by another
    process, a stalled head passed over or `lockyard clean`, is seen at the next backstop
    re-check, as is our own entry's removal by another process)."""
    predecessor = f"{queue_dir}/{entry}"
    return Watch(
        topics=frozenset({predecessor, f"{queue_dir}/{mine}"}),
        directories=frozenset(),
        pids=frozenset() if pid is None else frozenset({pid}),
        entries=frozenset({predecessor}) if elsewhere else frozenset(),
    )


def watch_lock(
    lock_dir: str,
    lock_topic: str,
    holder_pid: int | None,
    *,
    holder_is_here: bool,
    doorbell: bool = False,
) -> Watch:
    """The head wakes when the lock goes or its holder's process `pid` exits.

    A holder in this process notifies the head itself when it releases, and a holder in
    another process rings the head's `doorbell` (a FIFO it listens on) when there is one; so
    the head does not watch the lock directory then: its inotify events would wake this
    process's reader thread at every lock operation, which takes the GIL from the handoff.
    (Another process removing that holder's lock without a release, an earlier lockyard
    version or a hand in the directory, is seen at the next backstop re-check.)"""
    return Watch(
        topics=frozenset({lock_topic}),
        directories=frozenset() if holder_is_here or doorbell else frozenset({lock_dir}),
        pids=frozenset() if holder_pid is None else frozenset({holder_pid}),
    )
