"""The line: a lock's queue, its invariant, and every decision of those who take, wait and
release. No I/O.

The invariant (the recipe of etcd's `concurrency.Mutex` and of ZooKeeper's lock):

    The oldest live entry of a lock's queue owns the right to take the lock.

A lock is free, or held by one grant; the directory makes each step below atomic (the lock
and its grants, staged grants and queue entries in `disk.py`).
Everything else follows from the invariant:

- **Taking.** A newcomer takes a free lock only when no live entry has the turn (it never
  jumps the line; an agent that holds the lock already keeps it). A lock whose holder is
  provably dead is reclaimed first; a taken lock is never taken from anyone alive.
- **Queueing.** A waiter that could not take the lock adds an entry to the lock's queue, named
  by a ticket one above the highest there, claimed by exclusive creation: entries sort in
  arrival order. While our entry exists no entry can appear ahead of it, so the entries ahead
  of ours, listed once when we queue, only ever go away: a waiter never lists the queue again.
  A ticket is taken again once its entry and every one after it are gone, so an entry is
  stamped and removed by its wait's token, never by its ticket alone: whoever read a dead
  or stalled waiter's entry never removes a later wait's under the same ticket.
- **The head** (nothing ahead of its entry) stages the grant it would publish, then takes the
  lock when it is free or empty; otherwise it sleeps until the lock changes hands or its
  holder's process ends (its doorbell is rung, `Await.bell`). It sleeps only on another live
  agent's grant, never on a lock it last saw empty: nothing may be left to wake it then.
- **Everyone else** watches only its predecessor, the nearest entry ahead: that entry's removal
  and its process's exit. When it goes, the next entry of the list ahead is the predecessor.
  So a release wakes one waiter, and a waiter's look costs O(1) whatever the queue's length.
- **Releasing** removes our grant (the lock is then empty: held by nobody, never free), finds
  the first waiter, stamps its turn and rings it, and renames the grant it staged onto the
  lock: the lock passes to the head without ever looking free. The head accepts the grant by
  removing its entry, as when it takes the lock itself; until then the grant is still its turn.
  With no waiter, or none that staged its grant, the lock goes.
- **Turns.** The first entry's turn starts when it becomes first at a free lock or is handed
  the lock: a release stamps the first entry before the lock goes or is handed over; a first
  entry that leaves stamps its successor before its own entry goes.
- **Liveness.** A predecessor whose process is provably dead is dropped by its successor (and
  a grant handed over to it is released). A first entry that leaves a free lock, or a grant
  handed over to it, untaken for longer than its turn (stopped, stuck) is passed over by its
  successor or by the next newcomer; its dropping and its accepting (removing that same
  entry) exclude each other, so exactly one of the two succeeds.
- **Leaving** (granted, timed out, cancelled) takes back the staged grant and removes our
  entry, synchronously: a wait leaves no entry and no lock behind however it ends. A grant
  handed over just before is released, which hands it on.

Each decision is a *recipe*: a generator that yields the operations it needs, one at a time,
as `(operation, *arguments)`, and receives each one's result. A recipe keeps what it knows in
its local variables (never in the iterator of a loop over a result), so the explorer can tell
two points of a recipe apart by them. The operations are those of `Operations` below: each
is one atomic step (a rename, a removal, a read), a look at a process, or a wake-up.
Whoever runs a recipe carries them out: the store on the lock directory (`operations.py`),
the explorer of the tests on a lock directory in memory (`tests/unit/line_explorer.py`: every
interleaving of the recipes' operations, with deaths, timeouts and stalled turns, checked
against the invariants). Between
two operations other processes may do anything: a recipe relies only on what each operation
makes atomic. A waiting recipe yields `(SLEEP, awaited)` when nothing is left to do but wait
for what `awaited` names; the sleeping itself is `sleep.py`'s.

Where the events of a lock's life happen (the points a journal records): a grant in `take`
(`_grant`) and in `_accept`; a wait's beginning and end in `wait`; a release, a hand-over
and a pass-over-to-the-next in `release`; a reclamation in `_reclaim`; a pass-over in
`pass_over`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from ..errors import CorruptRecordError, LockDirFullError
from ..liveness import Liveness

T = TypeVar("T")

Op = tuple[Any, ...]
"""`(operation, *arguments)`: one operation of `Operations` (or `SLEEP`) for the runner."""

Recipe = Generator[Op, Any, T]
"""A decision: yields operations, receives each one's result, returns its outcome."""

SLEEP: Final = "sleep"
"""`(SLEEP, awaited)`: wait for what `awaited` names. The runner answers True to look again
(woken, or a re-check is due), False when the wait's time is up, or `Accepted` when a
release in this process accepted its grant for a head while it slept (see `_accept_for`)."""

TICKET_DIGITS: Final = 20
FIRST_TICKET: Final = f"{1:0{TICKET_DIGITS}d}"
"""The lowest ticket: when its entry exists it is first (nothing sorts ahead of it, and a
queue that empties numbers from it again), so a short queue's head is found in one read."""

TAKE_ATTEMPTS: Final = 8
"""How often one `take` looks again at a lock that changed hands under it before it gives up
for now (a waiter's next look tries again)."""


class Record(Protocol):
    """What the line (and the sleeping) reads of a holder's or a waiter's record."""

    @property
    def agent_id(self) -> str: ...
    @property
    def token(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def start_time(self) -> int | None: ...
    def liveness(self) -> tuple[Liveness, str]:
        """Whether its process is alive, provably dead or unknown (reads /proc), and why."""


Holder = Record
"""A lock's holder record."""
Waiter = Record
"""A queue entry's record."""


class Operations(Protocol):
    """The operations a recipe asks for. Each is atomic; none waits."""

    # -- the lock: a directory holding one grant, published and removed whole -------------
    def lock_exists(self, name: str) -> bool:
        """The lock exists: held, or empty in mid-release."""

    def read_holder(self, name: str) -> Holder | None:
        """Its holder; None when free or empty (raises CorruptRecordError when unreadable)."""

    def holds(self, name: str, token: str) -> bool:
        """Grant `token` is the lock's current grant."""

    def publish(self, name: str, token: str, record: str) -> bool:
        """Create the lock holding grant `token` (`record`) at once; False when it is held."""

    def drop_grant(self, name: str, token: str) -> bool:
        """Remove grant `token` (False, touching nothing, when it is not the current one),
        leaving the lock empty."""

    def free(self, name: str) -> None:
        """Remove the lock when it is empty (a grant renamed in meanwhile stays)."""

    # -- the grant a head stages for a release to hand over --------------------------------
    def make_staging(self, name: str, token: str) -> bool:
        """Create the staging of grant `token`; False when it exists already."""

    def write_staging(self, name: str, token: str, record: str) -> bool:
        """Put the grant's record in its staging; False when the staging is gone."""

    def rename_staging(self, name: str, token: str) -> bool | None:
        """Rename the staging onto the lock: True when done (the lock now holds what the
        staging held), False when the lock holds a grant, None when there is no staging."""

    def unstage(self, name: str, token: str) -> bool:
        """Take the staged record back and remove its staging; False when there was none."""

    # -- the queue: entries named by tickets, in arrival order, each a wait's ------------
    def queue_exists(self, name: str) -> bool: ...
    def enqueue(self, name: str, token: str, record_for: Callable[[int], str]) -> str:
        """Add the entry of wait `token` under the next ticket, holding
        `record_for(ticket)`; its name."""

    def queue_order(self, name: str) -> Sequence[str]:
        """The queue's entries in arrival order (empty when there is no queue)."""

    def checked_queue_order(self, name: str) -> Sequence[str]:
        """`queue_order`, raising LockDirError when the queue is not a directory of ours."""

    def queued(self, name: str, entry: str) -> bool: ...
    def bears(self, name: str, entry: str, token: str) -> bool:
        """The entry is wait `token`'s."""

    def entry_token(self, name: str, entry: str) -> str | None:
        """The wait token of an entry; None when it is gone."""

    def waiter(self, name: str, entry: str) -> Waiter | None:
        """An entry's whole record; None when it is gone or no waiter's record."""

    def dequeue(self, name: str, entry: str, token: str) -> bool:
        """Remove the entry when it is wait `token`'s (and the queue once empty); False,
        touching nothing, when it is not (gone, or a later wait's under the same ticket)."""

    def stamp_turn(self, name: str, entry: str, token: str) -> bool:
        """Record now as the moment the turn of wait `token` (at `entry`) began; False when
        that entry is not its."""

    def turn_stamp(self, name: str, entry: str, token: str) -> int | None:
        """The turn stamp of wait `token` at `entry` (changed by every `stamp_turn`); None
        when that entry is not its."""

    def turn_over(self, name: str, entry: str, token: str) -> bool:
        """The turn of wait `token` at `entry` began longer ago than a turn lasts."""

    # -- processes, wake-ups, reports --------------------------------------------------------
    def liveness(self, record: Holder | Waiter) -> Liveness:
        """Whether the process a record names is alive (this process always is)."""

    def ring(self, name: str, token: str) -> None:
        """Wake the waiter `token` of the lock through its doorbell, if it has one open."""

    def claim_asleep(self, token: str) -> str | None:
        """The entry of the head of wait `token` when it sleeps in this process with its
        grant staged, claimed: until `let_wake`, it cannot wake into a look of its own.
        None when no such head sleeps here (elsewhere, awake, or gone)."""

    def let_wake(self, token: str, accepted: Accepted | None) -> None:
        """Give back the head claimed by `claim_asleep`, and wake it: with `accepted`, its
        wait ends holding the lock; with None, it looks again."""

    def lock_changed(self, name: str) -> None:
        """Tell this process's waiters that the lock changed hands."""

    def entry_gone(self, name: str, entry: str) -> None:
        """Tell this process's waiters that a queue entry was removed."""

    def reclaimed(self, name: str, holder: Holder, by_agent: str | None) -> object:
        """Report the reclamation of a provably dead holder's lock (the report)."""

    def passed_over(self, name: str, waiter: Waiter) -> None:
        """Report a first waiter passed over: it let its turn pass."""

    def waits_without_space(self, key: str, agent: str, error: LockDirFullError) -> None:
        """Report a head that keeps waiting because the directory is full."""

    def new_token(self) -> str:
        """A token no grant or wait has had (no I/O)."""


@dataclass(frozen=True, slots=True)
class Accepted:
    """What a head asleep in this process is woken with when a release accepted the grant
    handed over to it for it (`_accept_for`): it holds the lock; `successor` as
    `Place.successor`."""

    successor: tuple[str, str] | None


@dataclass(frozen=True, slots=True)
class Await:
    """What a sleeping waiter waits for (`sleep.py` picks how it is woken).

    The head (`ahead` None) waits for the lock to change hands, or for its holder's process
    to end, and is rung at its doorbell (`bell`: the token of the grant it staged, when it
    did). Anyone else waits for its predecessor's entry (`ahead`) to go, or its process to
    end. Both wake when their own entry (`mine`) is removed in their process."""

    mine: str
    ahead: str | None
    process: Holder | Waiter | None
    """The holder (head) or predecessor whose process's exit ends the wait; None: unknown."""
    alive: bool
    """That process was seen alive (not merely not provably dead): following its exit names
    the right process."""
    bell: str | None = None


# -- taking ----------------------------------------------------------------------------------


Taken = tuple[str, bool]
"""What a `take` that got the lock returns: the token of the grant the agent now holds, and
whether that grant is new (False: the agent held the lock already and keeps that grant)."""


def take(
    ops: Operations,
    name: str,
    agent: str,
    grant: Callable[[], str],
    *,
    staged: str | None = None,
    entry: str = "",
) -> Recipe[Taken | None]:
    """One attempt at lock `name` for `agent` (`grant()`: the record of a grant made now):
    the grant it now holds (`Taken`), or None.

    A newcomer (`staged` None) takes a free lock only when no live entry has the turn. The
    head of the queue passes `staged`, the token of the grant it staged: a release may have
    handed it over already, else the head publishes it; and its queue `entry`.
    """
    newcomer = staged is None
    if staged is not None and (yield ops.holds, name, staged):
        return staged, True  # handed over at a release
    if newcomer and not (yield ops.queue_exists, name):
        # The usual case: nobody queues, so publish at once. The publishing fails while
        # anybody holds the lock; only then is the holder read (below).
        token = ops.new_token()
        if (yield ops.publish, name, token, grant()):
            return token, True
    for _attempt in range(TAKE_ATTEMPTS):
        if (yield ops.lock_exists, name):
            try:
                holder = yield ops.read_holder, name
            except CorruptRecordError:
                return None  # held by something unreadable: never guess, never break
            if holder is not None:
                alive = (yield ops.liveness, holder) is not Liveness.DEAD
                if holder.agent_id == agent and alive:
                    # Held by this agent id (here, or in another live process: the lock
                    # belongs to the agent id): keep that grant.
                    if staged is not None and holder.token != staged:
                        yield from _withdraw(ops, name, staged)
                    return str(holder.token), False
                # A dead holder's grant is reclaimed, even one of this very agent id: a
                # restarted agent must not inherit a lock whose liveness follows its
                # dead predecessor.
                if not alive:
                    yield from _reclaim(ops, name, holder, agent)
                    continue
                # A grant handed over to a first waiter that left it unaccepted past its
                # turn is passed over, as a free lock's turn is.
                if newcomer and (yield from _pass_over_unaccepted(ops, name, holder.token)):
                    continue
                return None
        if newcomer and (yield from reserved(ops, name)):
            return None
        if staged is not None:
            # Our turn's stamp first, as a release stamps before it hands over: until we
            # accept, the lock holding our grant is still our turn, judged by that stamp
            # (`_turn_expired`), which must not be the old one of our queueing (a release
            # that died before stamping leaves that one).
            yield ops.stamp_turn, name, entry, staged
            published = yield ops.rename_staging, name, staged
            if published is not False and (yield ops.holds, name, staged):
                return staged, True  # published now, or handed over by a release just before
            if published is not False:
                # Gone (reaped as debris), or published empty (withdrawn): stage it anew.
                yield from stage(ops, name, staged, grant)
            continue  # taken by someone meanwhile: look at the holder
        token = ops.new_token()
        if (yield ops.publish, name, token, grant()):
            return token, True
    return None


def reserved(ops: Operations, name: str) -> Recipe[bool]:
    """Whether a live waiter has the turn at lock `name` (so a newcomer must not take it);
    drops dead and stalled first entries on the way."""
    if not (yield ops.queue_exists, name):
        return False
    order: Sequence[str] = yield ops.checked_queue_order, name
    for entry in order:
        waiter = yield ops.waiter, name, entry
        if waiter is None:
            continue  # left meanwhile, or not a waiter's record: never obeyed
        if (yield ops.liveness, waiter) is Liveness.DEAD:
            yield from _end_wait(ops, name, entry, waiter)
            continue
        if (yield from _turn_expired(ops, name, entry, waiter.token, handed=False)):
            yield from pass_over(ops, name, entry, waiter)
            continue
        return True
    return False


def stage(ops: Operations, name: str, token: str, grant: Callable[[], str]) -> Recipe[None]:
    """Stage the grant a head publishes, or a release hands over to it (once per wait)."""
    while (yield ops.make_staging, name, token):
        if (yield ops.write_staging, name, token, grant()):
            return
        # A release renamed the still empty staging onto the lock (and, finding no grant
        # there, freed the lock again): build it anew.


# -- releasing -------------------------------------------------------------------------------


def release(
    ops: Operations, name: str, token: str, hint: tuple[str, str] | None = None
) -> Recipe[bool]:
    """Release grant `token` of lock `name`: False, touching nothing, when it is not the
    current grant; else hand the lock over to the first waiter, or free it. `hint`: (entry,
    wait token) of the waiter that was next when we took the lock from the queue (see
    `Place.successor`), most likely first now.

    Between the removal of our grant and the hand-over the lock is empty: held by nobody, so
    a head that looks meanwhile finds it free and takes it itself; and not free, so no
    newcomer that sees the queue takes it, and nobody judges the first waiter's turn over
    before it is stamped. (A newcomer that found no queue before the head queued may publish
    onto the empty lock: it came first. Our hand-over then fails, or, once that newcomer has
    released in turn, succeeds.)

    The head is rung before the hand-over, so that it looks while we stamp and rename. A
    look before the rename finds the lock empty and takes it itself (the renames race, one
    wins: `take`); a look after it finds its grant. A look that spends the ring while a
    newcomer holds the lock sleeps on that holder, whose release rings it or whose exit wakes
    it; should that release die before ringing, the head finds the lock empty and does not
    sleep (`_await_lock`). So no second ring after the rename is needed."""
    if not (yield ops.drop_grant, name, token):
        return False
    first = yield from first_waiter(ops, name, hint)
    handed = False
    if first is None:
        yield ops.free, name
    else:
        entry, head = first
        yield ops.ring, name, head  # it looks while we hand over (see the docstring)
        yield ops.stamp_turn, name, entry, head
        handed = yield from _hand_over(ops, name, head)
    yield ops.lock_changed, name
    if first is not None and not handed:
        # Freed with a queue there: ring whoever is first now. One that became first after
        # our look (its predecessor left) may have seen our grant and sleeps until rung: its
        # doorbell was open before that look, and the look before our removal. Mostly the
        # head we found is still there, and so still first: one read, not a listing.
        entry, head = first
        if not (yield ops.bears, name, entry, head):
            first = yield from first_waiter(ops, name)
        while first is not None:
            # A first entry leaving (it stamped its successor's turn: that successor may take
            # itself for the head, and wait for this lock alone) is not the one to ring once
            # it is gone, nor one that died leaving.
            waiter = yield ops.waiter, name, first[0]
            if waiter is not None and (yield ops.liveness, waiter) is not Liveness.DEAD:
                break
            if waiter is None:  # gone meanwhile: whoever is first now
                first = yield from first_waiter(ops, name)
                continue
            # Dead: ring the next one too, which may take itself for the head (its successor
            # or a newcomer drops it).
            yield ops.ring, name, first[1]
            order: Sequence[str] = yield ops.queue_order, name
            after = [other for other in order if other > first[0]]
            behind: str | None = (yield ops.entry_token, name, after[0]) if after else None
            first = None if behind is None else (after[0], behind)
        if first is not None:
            yield ops.ring, name, first[1]
    return True


def _hand_over(ops: Operations, name: str, to: str) -> Recipe[bool]:
    """Publish the grant staged under `to` in place of the one just dropped; free the lock
    when nothing was staged (withdrawn, not staged yet) or a grant got in first. A head
    asleep in this process is accepted for at once."""
    if (yield ops.rename_staging, name, to):
        entry = yield ops.claim_asleep, to
        if entry is not None:
            # It sleeps with its whole grant staged (it withdraws only when awake): the
            # rename published that grant.
            yield from _accept_for(ops, name, entry, to)
            return True
        if (yield ops.holds, name, to):
            return True
    yield ops.free, name  # empty (a staging withdrawn just before the rename): free
    return False


def _accept_for(ops: Operations, name: str, entry: str, token: str) -> Recipe[None]:
    """Accept grant `token`, just handed over to its head (asleep in this process, `entry`,
    claimed), as the head's own look would (`_accept`): remove its entry, which is first.
    The head then wakes holding the lock with nothing left to do, where its own look would
    read its entry and the lock again. When the removal fails (passed over meanwhile), the
    head wakes to look: it finds its entry gone and passes the grant on."""
    try:
        removed, successor = yield from _leave_entry(
            ops, name, entry, token, first=True, holding=True
        )
    except GeneratorExit:
        raise  # closed unfinished: only when its runner itself died (they throw all in)
    except BaseException:
        # Whatever stops us (an interrupt included), the head must not sleep on its
        # verdict for ever: it wakes and looks, and finds what we left.
        yield ops.let_wake, token, None
        raise
    yield ops.let_wake, token, Accepted(successor) if removed else None


def first_waiter(
    ops: Operations, name: str, hint: tuple[str, str] | None = None
) -> Recipe[tuple[str, str] | None]:
    """(entry, wait token) of the first entry of the queue that holds a waiter's record.
    `hint`: an entry that was first, and is still when it holds the same wait (no entry can
    appear ahead of an existing one): one read, not a listing, which would cost every
    handoff O(queue length)."""
    if hint is not None and (yield ops.bears, name, *hint):
        return hint
    if not (yield ops.queue_exists, name):
        return None
    token = yield ops.entry_token, name, FIRST_TICKET
    if token is not None:
        return FIRST_TICKET, token  # no listing: nothing sorts ahead of the lowest ticket
    order: Sequence[str] = yield ops.queue_order, name
    for entry in order:
        token = yield ops.entry_token, name, entry
        if token is not None:
            return entry, token
    return None


def _reclaim(ops: Operations, name: str, holder: Holder, by_agent: str | None) -> Recipe[Any]:
    """Release the grant of a provably dead `holder` by its token: exactly one reclaimer
    wins, and a lock taken after the dead one went is never touched. The report of the
    reclamation; None when another reclaimer won."""
    if not (yield from release(ops, name, holder.token)):
        return None
    return (yield ops.reclaimed, name, holder, by_agent)


def reclaim(ops: Operations, name: str, holder: Holder) -> Recipe[Any]:
    """`_reclaim` for the clean-up of every dead holder's lock (`reclaim_stale`)."""
    return (yield from _reclaim(ops, name, holder, None))


# -- waiting ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Place:
    """One waiter's place in the queue of lock `name`: its entry, and the entries ahead of it,
    listed once when it queued (none can appear ahead of an existing entry)."""

    name: str
    key: str
    agent: str
    record_for: Callable[[int, str], str]
    """The record of our entry, given its ticket and the wait's token."""
    grant: Callable[[], str]
    """The record of the grant we stage, made now."""
    entry: str = ""
    """Our entry, named by its ticket."""
    token: str = ""
    """The wait's token: in our entry's record, and the token of the grant we stage."""
    created: int | None = None
    """Our entry's turn stamp when it was created: a changed stamp means we are first."""
    ahead: deque[str] | None = None
    staged: str = ""
    """The token of the grant we staged ("": none)."""
    successor: tuple[str, str] | None = None
    """(entry, wait token) of the waiter behind us when we left the queue holding the lock:
    the first waiter when we release (`release`'s hint), unless it left meanwhile."""
    held: str = ""
    """The token of the grant we hold, once we took the lock."""
    told_full: bool = False


def wait(ops: Operations, place: Place) -> Recipe[bool]:
    """Wait in line until the lock is ours (True) or the time is up (False); leave the line
    however the wait ends (cancelled included)."""
    try:
        got = yield from _wait_in_line(ops, place)
    except GeneratorExit:
        raise  # abandoned unrun (a process that dies leaves its entry for others to drop)
    except BaseException:
        yield from _leave_line(ops, place)
        raise
    yield from _leave_line(ops, place)
    return got


def _wait_in_line(ops: Operations, place: Place) -> Recipe[bool]:
    yield from _join(ops, place)
    while True:
        awaited = yield from look(ops, place)
        if awaited is None:
            return True
        woke = yield SLEEP, awaited
        if isinstance(woke, Accepted):  # a release here accepted our staged grant for us
            place.held, place.entry, place.successor = place.staged, "", woke.successor
            return True
        if not woke:
            return False


def _join(ops: Operations, place: Place) -> Recipe[None]:
    """Queue at the back (again, after our entry was ended by someone else): a new wait."""
    token = ops.new_token()
    place.token = token
    place.entry = yield (
        ops.enqueue,
        place.name,
        token,
        lambda ticket: place.record_for(ticket, token),
    )
    place.created = yield ops.turn_stamp, place.name, place.entry, token
    order = yield ops.queue_order, place.name
    place.ahead = deque(entry for entry in order if entry < place.entry)


def look(ops: Operations, place: Place) -> Recipe[Await | None]:
    """One look: act on what is seen until the lock is ours (None) or there is something to
    wait for (the `Await`). Each step reads O(1) entries."""
    name = place.name
    while True:
        if not (yield from _in_line(ops, place)):
            # Our entry was ended by someone else (passed over, `lockyard clean`).
            yield from _give_back_staged(ops, place)
            yield from _join(ops, place)
            continue
        ahead = place.ahead
        assert ahead is not None
        if ahead:
            predecessor = ahead[-1]
            waiter = yield ops.waiter, name, predecessor
            if waiter is None:
                ahead.pop()  # it left: the next entry ahead is the predecessor now
                continue
            liveness = yield ops.liveness, waiter
            if liveness is Liveness.DEAD:
                yield from _end_wait(ops, name, predecessor, waiter)
                ahead.pop()
                continue
            if (yield from _stalled(ops, place, predecessor, waiter)):
                yield from pass_over(ops, name, predecessor, waiter)
                ahead.pop()
                continue
            return Await(place.entry, predecessor, waiter, liveness is Liveness.ALIVE)
        # The head: our turn.
        try:
            if not place.staged:
                yield from stage(ops, name, place.token, place.grant)
                place.staged = place.token
            taken = yield from take(
                ops, name, place.agent, place.grant, staged=place.staged, entry=place.entry
            )
        except LockDirFullError as full:
            # No room for our grant's record: keep our place, and try again when woken or
            # at the next re-check, when space may have been freed (a release needs none).
            if not place.told_full:
                place.told_full = True
                yield ops.waits_without_space, place.key, place.agent, full
            taken = None
        else:
            place.told_full = False
        if taken is not None:
            if (yield from _accept(ops, place, taken[0])):
                return None
            continue
        awaited = yield from _await_lock(ops, place, full=place.told_full)
        if awaited is not None:
            return awaited
        # The lock is no longer another live agent's: look again, and take it.


def _await_lock(ops: Operations, place: Place, *, full: bool) -> Recipe[Await | None]:
    """What the head waits for: the lock to change hands (its doorbell rung), or the
    holder's process to end. None when `take`'s look is out of date: the lock is free,
    empty, this agent's (a grant handed over to us since), or held by a dead process. A head
    that slept on that would wait for a wake-up that may never come: the release that
    emptied the lock rang us before it handed over (`release`), and a look of ours may
    have spent that ring while someone else still held the lock; or that release died half
    way. Looking again, `take` takes the lock (a rename onto an empty one), accepts the
    grant or reclaims it. `full`: our grant could not be staged (no space), so there is
    nothing to take: sleep until a re-check all the same."""
    try:
        holder = yield ops.read_holder, place.name
    except Exception:  # unreadable: it may change all the same
        holder = None
    else:
        if not full and (holder is None or holder.agent_id == place.agent):
            return None
    liveness = Liveness.UNKNOWN if holder is None else (yield ops.liveness, holder)
    if liveness is Liveness.DEAD and not full:
        return None
    return Await(place.entry, None, holder, liveness is Liveness.ALIVE, place.staged or None)


def _in_line(ops: Operations, place: Place) -> Recipe[bool]:
    """Our entry is still there and still ours. A changed turn stamp means someone stamped
    our turn: a release, when we were first, or the first entry as it leaves (or whoever
    drops it), before that entry goes. So every entry ahead is gone, known without looking
    at each of them, but for that first one: when our predecessor is still there, it is
    that one, and we keep watching it (its leaving may yet fail to end: its process may die
    first). A predecessor gone before a first entry that stamped us is not told apart here:
    the release that finds that entry first, gone or dead, rings us too (`release`)."""
    if not place.entry:
        return False
    # The stamp read is compared at once, never kept: a local would make each stamp a
    # point of its own for the explorer, where only "changed or not" matters.
    if place.ahead and (
        (yield ops.turn_stamp, place.name, place.entry, place.token) not in (None, place.created)
    ):
        if (yield ops.queued, place.name, place.ahead[-1]):
            while len(place.ahead) > 1:
                place.ahead.popleft()
        else:
            place.ahead.clear()
    return bool((yield ops.bears, place.name, place.entry, place.token))


def _stalled(ops: Operations, place: Place, entry: str, waiter: Waiter) -> Recipe[bool]:
    """Whether our predecessor is first and let its turn pass: the lock free, or holding the
    grant handed over to it, for longer than a turn (cheapest test first)."""
    if not (yield from _turn_expired(ops, place.name, entry, waiter.token)):
        return False
    ahead = place.ahead
    assert ahead is not None
    # Whether it is first (amortised O(1): each entry ahead is found gone once).
    while len(ahead) > 1 and not (yield ops.queued, place.name, ahead[0]):
        ahead.popleft()
    return len(ahead) == 1


def _turn_expired(
    ops: Operations, name: str, entry: str, token: str, *, handed: bool = True
) -> Recipe[bool]:
    """Wait `token` at entry `entry` has had its turn at lock `name` for longer than a turn
    without taking it: the lock is free, or (`handed`) holds the grant a release handed
    over to that waiter (its staged grant bears the wait's token).

    The turn is read again after the lock: a release stamps the turn before it frees the
    lock or hands it over, so a lock seen free or handed over since the first read comes
    with a new stamp, which the second read sees. The first read alone may be older than
    the hand-over it would judge (a waiter queued long ago, behind a long hold: its stamp is
    old until the release that hands it the lock). The first read is the cheap test that
    settles the usual case."""
    if not (yield ops.turn_over, name, entry, token):
        return False
    if (yield ops.lock_exists, name) and not (handed and (yield ops.holds, name, token)):
        return False
    return bool((yield ops.turn_over, name, entry, token))


def _accept(ops: Operations, place: Place, token: str) -> Recipe[bool]:
    """The lock holds grant `token` (ours): accept it by removing our entry. That fails when
    we were passed over meanwhile: the grant is then not ours; pass it on, and queue again."""
    if (yield from _leave(ops, place, holding=True)):
        place.held = token
        return True
    token, place.staged = place.staged, ""
    if token:
        yield from release(ops, place.name, token)
    yield from _join(ops, place)
    return False


def _leave_line(ops: Operations, place: Place) -> Recipe[None]:
    """However a wait ends: take back the staged grant, remove our entry, and release a grant
    handed over to us meanwhile (our entry gone, it goes to the next waiter)."""
    handed = "" if place.held else (yield from _give_back_staged(ops, place, requeue=False))
    yield from _leave(ops, place)
    if handed:
        yield from release(ops, place.name, handed)


def _give_back_staged(ops: Operations, place: Place, *, requeue: bool = True) -> Recipe[str]:
    """Take back our staged grant. When a release handed it over first, we hold the lock
    though no longer in line: released at once when we queue again (`requeue`), else its
    token is returned for the caller to release once our entry is gone."""
    token, place.staged = place.staged, ""
    if not token or not (yield from _withdraw(ops, place.name, token)):
        return ""
    if requeue:
        yield from release(ops, place.name, token)
        return ""
    return token


def _withdraw(ops: Operations, name: str, token: str) -> Recipe[bool]:
    """Take back the grant staged under `token`: False when taken back (or never staged),
    True when a release handed it over first (the caller then holds the lock)."""
    if (yield ops.unstage, name, token):
        return False
    return bool((yield ops.holds, name, token))


def _leave(ops: Operations, place: Place, *, holding: bool = False) -> Recipe[bool]:
    """Remove our entry (if still ours), stamping our successor's turn when we are first
    (`holding`: we leave because we took the lock). True when this call removed it: leaving
    holding the lock is how the head accepts its grant, and the removal succeeds for only
    one of the head and a successor passing it over."""
    if not place.entry:
        return False
    entry, place.entry = place.entry, ""
    removed, successor = yield from _leave_entry(
        ops, place.name, entry, place.token, first=not place.ahead, holding=holding
    )
    if successor is not None:
        place.successor = successor
    return removed


def _leave_entry(
    ops: Operations, name: str, entry: str, token: str, *, first: bool, holding: bool
) -> Recipe[tuple[bool, tuple[str, str] | None]]:
    """Remove entry `entry` of wait `token` while it is still that wait's (`first`: known
    to be first). (Whether this call removed it, the (entry, wait token) of the successor
    whose turn a leaving `holding` the lock stamped.)"""
    if not (yield ops.bears, name, entry, token):
        return False, None  # ended by someone else; the ticket may be a newcomer's by now
    if not first:
        return (yield from drop(ops, name, entry, token)), None  # first or not: the queue tells
    return (yield from _leave_as_head(ops, name, entry, token, holding=holding))


def _leave_as_head(
    ops: Operations, name: str, entry: str, mine: str, *, holding: bool
) -> Recipe[tuple[bool, tuple[str, str] | None]]:
    """Remove our entry (of wait `mine`), which is first: stamp our successor's turn first.
    The successor is
    usually the next ticket, found in O(1). A gap (a waiter behind us left) costs a listing,
    except when we leave holding the lock: no turn starts now then (the release stamps the
    first entry), and a successor not told it is first finds out by looking ahead."""
    successor = f"{int(entry) + 1:0{TICKET_DIGITS}d}"
    token = yield ops.entry_token, name, successor
    if token is None and not holding:
        order: Sequence[str] = yield ops.queue_order, name
        after = [other for other in order if other > entry]
        successor = after[0] if after else ""
        token = (yield ops.entry_token, name, successor) if successor else None
    told = None
    if token is not None:
        yield ops.stamp_turn, name, successor, token
        if holding:
            told = successor, token
    return (yield from _remove(ops, name, entry, mine)), told


def drop(ops: Operations, name: str, entry: str, token: str) -> Recipe[bool]:
    """Remove the queue entry of wait `token`, stamping its successor's turn when it was
    first; True when this call removed it (never another wait's entry under that ticket)."""
    order = yield ops.queue_order, name
    if len(order) > 1 and order[0] == entry:
        # The first leaves: its successor's turn.
        successor = yield ops.entry_token, name, order[1]
        if successor is not None:
            yield ops.stamp_turn, name, order[1], successor
    return (yield from _remove(ops, name, entry, token))


def _remove(ops: Operations, name: str, entry: str, token: str) -> Recipe[bool]:
    if not (yield ops.dequeue, name, entry, token):
        return False
    yield ops.entry_gone, name, entry
    return True


# -- ending someone else's wait --------------------------------------------------------------


def _end_wait(ops: Operations, name: str, entry: str, waiter: Waiter) -> Recipe[bool]:
    """Drop the entry of a waiter that will not take its turn (dead, stalled, ended by an
    operator), and release a grant handed over to it that it never accepted (accepting is
    removing that same entry, which this removal forestalls). True when this call dropped it."""
    if not (yield from drop(ops, name, entry, waiter.token)):
        return False
    if (yield ops.holds, name, waiter.token):
        yield from release(ops, name, waiter.token)
    return True


def end_wait(ops: Operations, name: str, entry: str, waiter: Waiter) -> Recipe[bool]:
    """`_end_wait`, for the clean-ups of dead waiters and of an operator's `end_waits`."""
    return (yield from _end_wait(ops, name, entry, waiter))


def pass_over(ops: Operations, name: str, entry: str, waiter: Waiter) -> Recipe[bool]:
    """End the wait of a first waiter that let its turn pass (reported); if its process goes
    on, it finds its entry gone and queues again at the back."""
    if not (yield from _end_wait(ops, name, entry, waiter)):
        return False
    yield ops.passed_over, name, waiter
    return True


def pass_over_stalled(ops: Operations, name: str) -> Recipe[Waiter | None]:
    """Pass over the first live waiter of lock `name` when it let its turn pass (an
    operator's `end_stalled_waits`); the waiter passed over, or None."""
    order: Sequence[str] = yield ops.queue_order, name
    for entry in order:
        waiter: Waiter | None = yield ops.waiter, name, entry
        if waiter is None or (yield ops.liveness, waiter) is Liveness.DEAD:
            continue  # the dead are the reclaimer's
        expired = yield from _turn_expired(ops, name, entry, waiter.token)
        if expired and (yield from pass_over(ops, name, entry, waiter)):
            return waiter
        return None  # only the first live waiter has a turn
    return None


def _pass_over_unaccepted(ops: Operations, name: str, token: str) -> Recipe[bool]:
    """Pass over the first waiter when the lock holds grant `token`, handed over to it at a
    release and left unaccepted past its turn; True when it was."""
    order: Sequence[str] = yield ops.queue_order, name
    for entry in order:
        waiter = yield ops.waiter, name, entry
        if waiter is None:
            continue
        if waiter.token != token or not (yield from _turn_expired(ops, name, entry, token)):
            return False
        return (yield from pass_over(ops, name, entry, waiter))
    return False
