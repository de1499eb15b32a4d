"""The line carried out for one store on its lock directory: the line's operations on disk,
the loops that run its recipes, and the store's grants and waits made with them.

`DiskOperations` is `line.Operations` on disk: most operations are the directory's own
(`disk.py`: its locks, stagings and queues), bound as they are (a recipe's operation is one
call, no wrapper in between); the rest look at processes (`liveness.py`), wake waiters
(`sleep.py`) or report.

`run` carries out a recipe that never sleeps (a take, a release, a clean-up); `wait` and
`wait_async` carry out a waiting recipe, the same loop around it but for the sleeping
(`sleep.Sleeper`): a thread blocks, an anyio task awaits. An operation that raises raises
inside the recipe, at its `yield`, so the recipe catches what it expects; a wait interrupted
while asleep (cancelled, KeyboardInterrupt) is interrupted inside the recipe too, which leaves
the line (synchronously) before the interruption goes on.

`Grants`: a store's grants, taken now (`line.take`) and given back (`line.release`), and what
the store remembers of the grants it made for their release: each grant's token, the key
spelling it was asked by, and the waiter that was next when a wait took the lock. Only the
tokens are needed (a release removes its grant by token); the rest are hints that save a
canonicalisation or a listing, dropped when there are too many. A grant is published with a
short record, `@<card>:<acquired at>` (`GrantRecords`), naming a holder card that holds the
rest (the agent, the processes, the key, the checkout) and is written once per agent and key,
so that a grant's record lives in its symlink's inode (`disk.py`).

`Waits`: a store's waits, from their place in line to what they leave behind: each waiter's
`line.Place` and `Sleeper`, the run of the line's `wait` recipe (blocking or async: only the
sleeping differs), and at its end the grant kept for its release. `LockWait`: the journal's
record of one request's wait (`lock_journal.py`), from its first sleep to its end, whatever
lines it passed through.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Final, TypeVar

from ..errors import CorruptRecordError, LockDirFullError
from ..liveness import Liveness, ProcessIdentity, current_process, is_this_process, new_token
from ..modes import SHARED
from ..paths import validate_agent_id, validate_poll_interval, validate_timeout
from ..records import HolderRecord, Reclamation, WaiterRecord, encode_waiter, holder_card
from . import line
from .disk import CARD_MARK, LOCK_SUFFIX, QUEUE_SUFFIX, SHARED_SUFFIX, HolderCards, LockDir
from .keys import LockKeys
from .line import SLEEP, Accepted, Recipe, Record
from .lock_journal import LockJournal
from .sleep import Drain, Naps, Sleeper, process_hub, ring

log = logging.getLogger(__name__)

T = TypeVar("T")

OnReclaim = Callable[[Reclamation], None]


class DiskOperations:
    """`line.Operations` on the lock directory `directory`."""

    def __init__(
        self,
        directory: LockDir,
        *,
        turn_timeout: float,
        on_reclaim: OnReclaim | None = None,
        journal: LockJournal | None = None,
    ) -> None:
        self.turn_timeout = turn_timeout
        self._dir = directory
        self._on_reclaim = on_reclaim
        self._journal = journal
        self._path = directory.path
        queues = directory.queues
        self.lock_exists = directory.lock_exists
        self.read_holder = directory.read_holder
        self.holds = directory.holds
        self.publish = directory.publish
        self.drop_grant = directory.drop_grant if journal is None else self._drop_and_record
        self.releases: dict[str, tuple[str, str, float | None, str | None]] = {}
        """grant token -> (agent, lock key, when granted if not here, namespace if not the
        store's) of a release under way here: journalled the moment its grant is dropped
        (`_drop_and_record`)."""
        self.free = directory.free
        self.make_staging = directory.stagings.make_staging
        self.write_staging = directory.stagings.write_staging
        self.rename_staging = directory.stagings.rename_staging
        self.unstage = directory.stagings.unstage
        self.queue_exists = queues.queue_exists
        self.enqueue = queues.enqueue
        self.queue_order = queues.queue_order
        self.checked_queue_order = queues.checked_queue_order
        self.queued = queues.queued
        self.bears = queues.bears
        self.entry_token = queues.entry_token
        self.waiter = queues.waiter
        self.dequeue = queues.dequeue
        self.stamp_turn = queues.stamp_turn
        self.turn_stamp = queues.turn_stamp
        self.new_token = new_token

    def turn_over(self, name: str, entry: str, token: str) -> bool:
        started = self._dir.queues.turn_started(name, entry, token)
        return started is not None and time.time() - started >= self.turn_timeout

    def liveness(self, record: Record) -> Liveness:
        if is_this_process(record.pid, record.start_time):
            return Liveness.ALIVE  # no need to ask /proc
        return record.liveness()[0]

    def ring(self, name: str, token: str) -> None:
        if not process_hub().heads.is_asleep(token):  # one asleep here hears `lock_changed`
            ring(self._dir, name, token)

    def claim_asleep(self, token: str) -> str | None:
        return process_hub().heads.claim(token)

    def let_wake(self, token: str, accepted: Accepted | None) -> None:
        process_hub().heads.let_wake(token, accepted)

    def lock_changed(self, name: str) -> None:
        process_hub().notify(f"{self._path}/{name}{LOCK_SUFFIX}")

    def entry_gone(self, name: str, entry: str) -> None:
        process_hub().notify(f"{self._path}/{name}{QUEUE_SUFFIX}/{entry}")

    def member_gone(self, name: str, member: str, *, last: bool) -> None:
        """A reader's member record of lock `name` went (the `last` one: its directory too):
        wake the drains of this process that wait for it (`sleep.Drain`)."""
        hub = process_hub()
        hub.notify(f"{self._path}/{name}{SHARED_SUFFIX}/{member}")
        if last:  # what a drain of the holds under a directory follows
            hub.notify(f"{self._path}/{name}{SHARED_SUFFIX}")

    def _drop_and_record(self, name: str, token: str) -> bool:
        """`drop_grant`, and the journal's release record as soon as it dropped: before the
        lock is handed on, so the successor's hand-over (written by its own wait, maybe in
        another thread or process) never comes before the release that caused it."""
        dropped = self._dir.drop_grant(name, token)
        if dropped and self._journal is not None:
            release = self.releases.pop(token, None)
            if release is not None:
                self._journal.released(token, *release)
        return dropped

    def reclaimed(self, name: str, holder: Record, by_agent: str | None) -> Reclamation:
        assert isinstance(holder, HolderRecord)  # what `LockDir.read_holder` reads
        _liveness, reason = holder.liveness()
        reclamation = Reclamation(
            lock_path=holder.lock_path,
            namespace=holder.namespace,
            holder=holder,
            reason=reason,
            reclaimed_by_pid=os.getpid(),
            reclaimed_by_agent=by_agent,
        )
        log.warning(
            "reclaimed stale lock %s of agent %s (%s)", holder.lock_path, holder.agent_id, reason
        )
        if self._journal is not None:
            self._journal.reclaimed(reclamation)
        if self._on_reclaim is not None:
            self._on_reclaim(reclamation)
        return reclamation

    def waits_without_space(self, key: str, agent: str, error: LockDirFullError) -> None:
        log.warning("agent %s keeps waiting for %s: %s", agent, key, error)

    def passed_over(self, name: str, waiter: Record) -> None:
        assert isinstance(waiter, WaiterRecord)  # what `QueueEntries.waiter` reads
        log.warning(
            "passed over waiter %s (pid %d) on %s: it did not take its turn at the lock for "
            "over %gs",
            waiter.agent_id,
            waiter.pid,
            waiter.lock_path,
            self.turn_timeout,
        )
        if self._journal is not None:
            self._journal.passed_over(waiter)


def run(recipe: Recipe[T]) -> T:
    """Carry out a recipe that never sleeps, operation by operation, here and now. Every
    exception goes into the recipe (an interrupt included): a release that claimed a head
    asleep here gives it its verdict before the exception goes on (`line._accept_for`)."""
    try:
        op = next(recipe)
        while True:
            try:
                result = op[0](*op[1:])
            except BaseException as error:
                op = recipe.throw(error)
            else:
                op = recipe.send(result)
    except StopIteration as done:
        value: T = done.value
        return value


def wait(recipe: Recipe[bool], sleeper: Sleeper, seconds: float) -> Naps[bool]:
    """Carry out a waiting recipe for at most `seconds` of waiting, its sleeps yielded where
    it says (`sleep.Naps`). Every exception goes into the recipe, a cancellation included:
    it leaves the line before the exception goes on."""
    deadline = time.monotonic() + seconds
    try:
        op = next(recipe)
        while True:
            try:
                if op[0] is SLEEP:
                    result = yield from sleeper.sleep(op[1], deadline)
                else:
                    result = op[0](*op[1:])
            except BaseException as error:
                op = recipe.throw(error)
            else:
                op = recipe.send(result)
    except StopIteration as done:
        got: bool = done.value
        return got
    finally:
        sleeper.close()


_MAX_HINTS: Final = 4096


class Grants:
    """The grants of one store (shared by its threads): its locks found by `keys` in
    `directory`, taken and given back by the line's recipes run with `operations`, published
    with `records`, journalled in `journal` (None: off)."""

    def __init__(
        self,
        keys: LockKeys,
        directory: LockDir,
        operations: DiskOperations,
        records: GrantRecords,
        journal: LockJournal | None,
    ) -> None:
        self.keys, self.directory, self.operations = keys, directory, operations
        self.records, self.journal = records, journal
        """What the store's waits carry out with too (`Waits`)."""
        self._tokens: dict[tuple[str, str], str] = {}  # (lock name, agent) -> grant token
        self._by_key: dict[tuple[str, str], tuple[str, str]] = {}
        """(lock key as the caller spelled it, agent) -> (lock name, agent)."""
        self._successors: dict[str, tuple[str, str]] = {}
        """lock name -> (entry, wait token) of the waiter that was next when a wait here took
        the lock from the queue: where its release looks for the first waiter first."""
        self._reads_absorbed: dict[tuple[str, str], float] = {}
        """(lock name, agent) -> when the read was granted that an upgrade of it just
        absorbed, until the upgrade's grant is journalled (`journal_grant`)."""
        self._guard = threading.Lock()

    def remember(self, name: str, agent: str, token: str, key: str) -> None:
        """`agent` holds grant `token` of lock `name`, asked for by `key`."""
        with self._guard:
            self._tokens[(name, agent)] = token
            if len(self._by_key) >= _MAX_HINTS:
                self._by_key.clear()  # a hint only: dropping it costs a canonicalisation
            self._by_key[(key, agent)] = (name, agent)

    def forget(self, name: str, agent: str) -> None:
        """Forget `agent`'s grant of lock `name` (released elsewhere)."""
        with self._guard:
            self._tokens.pop((name, agent), None)

    def take_by_key(self, key: str, agent: str) -> tuple[str, str] | None:
        """(lock name, token) of the grant made here to `agent` for this very spelling of
        the key, forgotten; None when none is known."""
        with self._guard:
            granted = self._by_key.pop((key, agent), None)
            token = None if granted is None else self._tokens.pop(granted, None)
        return None if granted is None or token is None else (granted[0], token)

    def take_token(self, name: str, agent: str) -> str | None:
        """The token of `agent`'s grant of lock `name`, forgotten; None when none is known."""
        with self._guard:
            return self._tokens.pop((name, agent), None)

    def note_successor(self, name: str, successor: tuple[str, str]) -> None:
        if len(self._successors) >= _MAX_HINTS:
            self._successors.clear()  # a hint only: dropping it costs a listing
        self._successors[name] = successor

    def take_successor(self, name: str) -> tuple[str, str] | None:
        """(entry, wait token) of the waiter that was next at lock `name`, forgotten."""
        return self._successors.pop(name, None) if self._successors else None

    # -- taking and giving back --------------------------------------------------------------

    def take(self, name: str, key: str, agent: str) -> bool:
        """Take lock `name` (`key`) for `agent` now, if it is free and nobody alive queues
        for it (or `agent` holds it)."""
        return self.take_fresh(name, key, agent) is not None

    def take_fresh(self, name: str, key: str, agent: str) -> bool | None:
        """`take`, saying whether the grant is new (True) or `agent` held it already
        (False); None when not taken."""
        taken = self.take_line(name, key, agent)
        if taken is None:
            return None
        token, new = taken
        self.remember(name, agent, token, key)
        return new

    def take_line(self, name: str, key: str, agent: str) -> tuple[str, bool] | None:
        """Lock `name` (`key`) taken for `agent` now, not remembered (a reader's member
        keeps its token, `shared_holds.py`): (its token, whether new); None when not taken."""
        return run(line.take(self.operations, name, agent, self.records.maker(agent, key)))

    def give_line_back(self, name: str, token: str) -> None:
        """Give back grant `token` of lock `name`, taken by `take_line` and never made."""
        run(line.release(self.operations, name, token, None))

    def read_absorbed(self, name: str, agent: str, read_since: float) -> None:
        """The exclusive grant of lock `name` being made to `agent` absorbed its read,
        granted at `read_since` (an upgrade): what `journal_grant` tells the journal."""
        if self.journal is not None:
            with self._guard:
                if len(self._reads_absorbed) >= _MAX_HINTS:
                    self._reads_absorbed.clear()
                self._reads_absorbed[(name, agent)] = read_since

    def journal_grant(self, name: str, key: str, agent: str, *, waited: bool = False) -> None:
        """Journal the exclusive grant of lock `name` (`key`) that `agent` was just made
        (`waited`: at the end of a wait). A take of the line is no grant until then: it may
        be given back for a directory over it (`scopes.py`)."""
        if self.journal is not None:
            with self._guard:
                token = self._tokens.get((name, agent))
                read_since = self._reads_absorbed.pop((name, agent), None)
            self.journal.granted(token, agent, key, waited=waited, read_since=read_since)

    def release(self, filepath: str, agent_id: str, *, journalled: bool = True) -> bool:
        """Give back `agent_id`'s lock of `filepath`; False, touching nothing, when it does
        not hold it. Not `journalled`: a line given back before its grant was made (a
        turnstile, a take backed off), which the journal never heard of."""
        if type(filepath) is str and type(agent_id) is str:
            # A lock this store granted under this very key needs no canonicalising: the
            # grant's token names the lock, and removal by token succeeds only while that
            # grant is current (else the full path below decides, as for any other path).
            granted = self.take_by_key(filepath, agent_id)
            if granted is not None and self._release(
                *granted, agent_id, filepath, journalled=journalled
            ):
                return True
        agent = validate_agent_id(agent_id)
        key, name = self.keys.locate(filepath)
        token = self.take_token(name, agent)
        if token is not None and self._release(name, token, agent, key, journalled=journalled):
            return True
        try:
            holder = self.directory.read_holder(name)
        except CorruptRecordError:
            return False
        if holder is None or holder.agent_id != agent:
            return False
        return self._release(
            name, holder.token, agent, key, holder.acquired_at, journalled=journalled
        )

    def _release(
        self, name: str, token: str, agent: str, key: str, acquired_at: float | None = None,
        *, journalled: bool = True,
    ) -> bool:  # fmt: skip
        # Hands the lock over to the queue's head when it staged its grant (`line.release`).
        hint = self.take_successor(name)
        if self.journal is None or not journalled:
            return run(line.release(self.operations, name, token, hint))
        # Journalled when the grant is dropped, before the hand-over (operations.py).
        releases = self.operations.releases
        releases[token] = (agent, key, acquired_at, None)
        try:
            return run(line.release(self.operations, name, token, hint))
        finally:
            releases.pop(token, None)


_MAX_CARDS_KNOWN: Final = 4096


class GrantRecords:
    """The grant records of one store: its holder is `owner` (None: the process that makes
    the grant), its locks are of `namespace`, keyed in the checkout at `root`."""

    def __init__(
        self, cards: HolderCards, owner: ProcessIdentity | None, namespace: str, root: str
    ) -> None:
        self._cards = cards
        self.owner, self.namespace, self.root = owner, namespace, root
        self._known: dict[tuple[str, str], tuple[ProcessIdentity, str]] = {}
        """(agent, key) -> (this process, the holder card its grants name)."""

    def maker(self, agent: str, key: str) -> Callable[[], str]:
        """The record of `agent`'s grants of `key`, made when a grant is."""
        return lambda: f"{CARD_MARK}{self.card(agent, key)}:{time.time()!r}"

    def card(self, agent: str, key: str) -> str:
        """The holder card of `agent`'s grants of `key` made by this process."""
        me = current_process()
        known = self._known.get((agent, key))
        if known is not None and known[0] is me:  # a forked child is another writer
            return known[1]
        text = holder_card(self.owner or me, agent, key, self.namespace, self.root, me)
        card = self._cards.write(text)
        if len(self._known) >= _MAX_CARDS_KNOWN:
            self._known.clear()
        self._known[(agent, key)] = (me, card)
        return card


class Waits:
    """The waits of one store, which end in its `grants` (and run on their directory, with
    their operations, records and journal). `push`: sleep on push wake-ups across processes
    (else poll); `backstop`: how often a pushed waiter still re-checks on its own."""

    def __init__(self, grants: Grants, *, push: bool, backstop: float) -> None:
        self._keys, self._directory, self._operations = (
            grants.keys,
            grants.directory,
            grants.operations,
        )
        self._grants, self._grant_records, self._journal = grants, grants.records, grants.journal
        self._push, self._backstop = push, backstop

    def drain(self) -> Drain:
        """How a wait of this store sleeps while it outwaits others' holds (`scopes.py`)."""
        return Drain(push=self._push)

    def begin(
        self, filepath: str, agent_id: str, timeout_seconds: float, poll_interval_ms: float
    ) -> bool | tuple[line.Place, Sleeper, float]:
        """What a wait does first: check the arguments and try the lock. True: taken;
        False: not, and no time to wait; else the place in line, how it sleeps, and for how
        long at most."""
        agent = validate_agent_id(agent_id)
        return self.begin_at(self._keys.locate(filepath), agent, timeout_seconds, poll_interval_ms)

    def begin_at(
        self, located: tuple[str, str], agent: str, timeout_seconds: float, poll_interval_ms: float
    ) -> bool | tuple[line.Place, Sleeper, float]:
        """`begin` for the lock `located` ((key, name), `LockKeys.locate`) by a valid `agent`."""
        timeout = validate_timeout(timeout_seconds)
        poll = validate_poll_interval(poll_interval_ms)
        key, name = located
        if self._grants.take(name, key, agent):
            return True
        if timeout == 0:
            return False
        return (*self.line_up(name, key, agent, poll), timeout)

    def line_up(self, name: str, key: str, agent: str, poll: float) -> tuple[line.Place, Sleeper]:
        """A wait for lock `name` (`key`) by `agent`, not begun: its place in line (the line's
        `wait` recipe queues it) and how it sleeps (polling every `poll` seconds without
        push wake-ups). The tests drive one look at a time with these."""
        me = current_process()  # the waiting is done here, whoever the store's owner is
        namespace, root = self._grant_records.namespace, self._grant_records.root

        def record_for(ticket: int, token: str) -> str:
            return encode_waiter(me, agent, token, ticket, key, namespace, root)

        place = line.Place(name, key, agent, record_for, self._grant_records.maker(agent, key))
        sleeper = Sleeper(
            self._directory, name, push=self._push, poll_interval=poll, backstop=self._backstop
        )
        return place, sleeper

    def lock_wait(self, key: str, name: str, agent: str, *, exclusive: bool) -> LockWait:
        """The journal's record of `agent`'s request for lock `name` (`key`)."""
        return LockWait(self._journal, self._grants, key, name, agent, exclusive)

    def run(self, place: line.Place, sleeper: Sleeper, timeout: float) -> Naps[bool]:
        """Wait in line, sleeping with `sleeper` for at most `timeout` seconds: True when the
        lock is ours (a cancelled wait leaves nothing behind)."""
        got = yield from wait(line.wait(self._operations, place), sleeper, timeout)
        return self.record_wait(place, got)

    def record_wait(self, place: line.Place, got: bool) -> bool:
        """Keep what a wait that ended with the lock (`got`) leaves for the release: its
        grant's token, and the waiter that was next. Returns `got`."""
        if got:
            self._grants.remember(place.name, place.agent, place.held, place.key)
            if place.successor is not None:
                self._grants.note_successor(place.name, place.successor)
        return got


class LockWait:
    """What the journal hears of one request for lock `name` (`key`) by `agent`: a wait that
    begins when the request first sleeps (in any line it passes through, or outwaiting
    readers or the holds under a directory) and ends with the request, and the grant it
    ends with. A request that never sleeps is a grant alone."""

    def __init__(
        self, journal: LockJournal | None, grants: Grants, key: str, name: str, agent: str,
        exclusive: bool,
    ) -> None:  # fmt: skip
        self._journal, self._grants = journal, grants
        self._key, self._name, self._agent, self._exclusive = key, name, agent, exclusive
        self._began: float | None = None

    def sleeping(self) -> None:
        """The request is about to sleep: its wait begins, if it had not."""
        if self._began is None and self._journal is not None:
            self._began = self._journal.wait_began(self._agent, self._key)

    def ended(self, got: bool) -> None:
        """The request ended: with the lock made its own (`got`), or out of time."""
        journal, began = self._journal, self._began
        if journal is None:
            return
        if got and self._exclusive:
            self._grants.journal_grant(self._name, self._key, self._agent, waited=began is not None)
        elif got:  # a shared hold: its token is the member's (its release says when it began)
            journal.granted(None, self._agent, self._key, SHARED, waited=began is not None)
        if began is not None:
            journal.wait_ended(self._agent, self._key, began, got)

    def interrupted(self) -> None:
        """The request was interrupted (cancelled, or given way as a deadlock's victim)."""
        if self._journal is not None and self._began is not None:
            self._journal.wait_ended(self._agent, self._key, self._began, None)
