"""Directory locks: a lock on `src/api/` covers every file and directory under it, those
created later included, and conflicts with every hold it covers and every hold covering it.

Each directory key has the line of any key (`line.py`: FIFO, hand-over, push wake-ups,
liveness); what a directory adds is a look in two directions, ordered so that of two agents
taking overlapping keys at once at least one sees the other (Dekker's order):

- a directory lock first leaves its mark in the lock directory (`scope_marks.py`: while one
  is there, file grants look for directories; it goes with the lock), then takes its line,
  then waits holding it until no other agent holds anything below (`Scopes.acquisition`): it
  never backs off;
- any grant, once it holds its own line, looks for its ancestors' locks when a mark is
  there (`Scopes.blocker`): one held by another agent (a directory lock, or one still
  draining) or, for an exclusive grant, readers of an ancestor, and it backs off: it gives
  its line back and passes through that ancestor's line (the ancestor's turnstile, held until
  the grant is made, so FIFO order holds there) before taking its own again.

While no directory lock is held or wanted in the lock directory, a file grant pays one
`faccessat` (`scopes/`, `scope_marks.py`); while one is, two per ancestor directory,
whatever their number. A shared directory hold is a member of the directory's key, as any
reader (`shared_holds.py`).

`Scopes` is what directory and glob locks look like (who blocks a grant, over or under)
and the decisions of a wait among them (`Scopes.acquisition`, one generator of steps);
`Requests` is every request of a store, a file's too, from its first look to its end: a
take now (`try_lock`), an acquire (its quick take, then the steps carried out by `run_steps`,
whose sleeps `sleep.sleep_through` sleeps in a thread and `sleep_through_async` on the event
loop: only the sleeping differs), a release, and the directory's mark settled when it ended.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

from ..errors import CorruptRecordError
from ..liveness import Liveness
from ..modes import EXCLUSIVE, SHARED, LockMode, validate_mode
from ..paths import lock_name, validate_agent_id, validate_poll_interval, validate_timeout
from ..scope_keys import is_above, is_scoped, places_above
from . import reclamation
from .disk import LOCK_SUFFIX, SHARED_SUFFIX, LockDir, shared_entry_exists
from .glob_index import any_globs, globs_at
from .operations import Grants, LockWait, Waits
from .pending_scopes import any_pending, pending_requests
from .scope_marks import SCOPES, ScopeMarks
from .shared_holds import SharedHolds, read_members
from .sleep import Drain, Naps, sleep_through, sleep_through_async


class Scopes:
    """Directory locks among the locks of `namespace` in `directory`; `marks` are theirs."""

    def __init__(
        self,
        directory: LockDir,
        shared: SharedHolds,
        grants: Grants,
        namespace: str,
        marks: ScopeMarks,
    ) -> None:
        self._directory, self._shared, self._grants = directory, shared, grants
        self._namespace = namespace
        self.marks = marks
        """The marks that tell file grants to look above them (`scope_marks.py`)."""

    def holds(self, name: str, agent: str) -> bool:
        """Whether `agent` holds lock `name`, exclusively or as a reader (an unreadable record
        counts as held: a mark stays while in doubt)."""
        try:
            holder = self._directory.read_holder(name)
        except CorruptRecordError:
            return True
        return (holder is not None and holder.agent_id == agent) or self._shared.holds_shared(
            name, agent
        )

    def blocker(self, key: str, agent: str, exclusive: bool) -> tuple[str, str] | None:
        """(key, lock name) of the outermost directory or glob above `key` (`is_above`) whose
        lock another agent holds (or, for an `exclusive` grant, that another agent reads);
        None when none. One `faccessat` while no directory or glob lock is held or wanted
        here; then two per directory over it, and one more per directory while a glob is."""
        if not self._directory.exists(SCOPES):  # `scope_marks.py`'s invariant: no mark, no lock
            return None
        globbed = any_globs(self._directory.fd)
        for place in places_above(key):
            if place:
                name = lock_name(self._namespace, place)
                if (place != key and is_above(place, key)) and self._blocks(name, agent, exclusive):
                    return place, name
            if globbed:
                for glob, name in globs_at(self._directory.fd, self._namespace, place):
                    if is_above(glob, key) and self._blocks(name, agent, exclusive):
                        return glob, name
        return None

    def _blocks(self, name: str, agent: str, exclusive: bool) -> bool:
        """Whether lock `name` is held by another agent, or (for an `exclusive` request)
        read by another live one."""
        directory = self._directory
        if directory.lock_exists(name):
            with contextlib.suppress(CorruptRecordError):
                holder = directory.read_holder(name)
                if holder is not None and holder.agent_id != agent:
                    return True
        return exclusive and read_by_others(directory, self._shared, name, agent)

    def holders_below(self, key: str, agent: str, exclusive: bool) -> list[str]:
        """The other agents, not provably dead, holding something below the directory or
        glob `key` (`is_above`; for a shared request, only exclusive holds count)."""
        found = []
        directory = self._directory
        for name in directory.names_with(LOCK_SUFFIX):
            try:
                holder = directory.read_holder(name)
            except CorruptRecordError:
                continue
            if holder is None or holder.agent_id == agent:
                continue
            if (
                holder.namespace == self._namespace
                and is_above(key, holder.lock_path)
                and holder.liveness()[0] is not Liveness.DEAD
            ):
                found.append(holder.agent_id)
        if exclusive:
            for name in directory.names_with(SHARED_SUFFIX):
                with contextlib.suppress(CorruptRecordError):
                    for member in read_members(directory, name):
                        if (
                            member.agent_id != agent
                            and member.namespace == self._namespace
                            and is_above(key, member.lock_path)
                            and member.liveness()[0] is not Liveness.DEAD
                        ):
                            found.append(member.agent_id)
        return found

    def waiting_below(self, key: str, name: str, agent: str) -> str | None:
        """Another agent, not provably dead, holding or reading something below the
        directory or glob `key` (lock `name`) that `agent`'s lock of it still waits for; None
        once that lock is granted. The guards ask it for a write under the agent's own lock:
        one `faccessat` while no directory or glob request is under way here, and a scan of
        the held locks only while one of `agent` for `name` is (`pending_scopes.py`)."""
        directory = self._directory
        if not any_pending(directory.fd) or agent not in pending_requests(directory, name).get(
            name, {}
        ):
            return None
        found = self.holders_below(key, agent, exclusive=True)
        return found[0] if found else None

    # -- a wait's decisions, once for both ways of sleeping ----------------------------------

    def acquisition(
        self, key: str, name: str, agent: str, exclusive: bool, deadline: float, poll: float
    ) -> Steps:
        """The decisions of `agent`'s wait for lock `name` (`key`) until `deadline`
        (time.monotonic), as steps a runner carries out (`run_steps`):
        its turn in the key's line; for an exclusive grant, the key's other readers gone;
        with a directory over it held by another, back off and pass through that
        directory's line (held until the grant is made); for a directory, the holds under
        it gone. Returns whether the lock is `agent`'s; a timeout or an exception (a
        cancellation thrown in) leaves nothing of the wait behind."""
        turnstiles: list[str] = []
        # A directory or glob request says it is under way before it first takes its line,
        # until its grant is made or it gives up (`pending_scopes.py`).
        request = (
            self.marks.request(key, name, agent, exclusive=exclusive) if is_scoped(key) else None
        )
        try:
            while True:
                if not (yield InLine((key, name), _left(deadline))):
                    return False
                try:
                    blocker = None
                    if exclusive:
                        cleared = yield from self._outwait_readers(name, agent, deadline, poll)
                    else:
                        cleared = True
                    if cleared:
                        blocker = self.blocker(key, agent, exclusive)
                    if cleared and blocker is None and is_scoped(key):
                        cleared = yield from self._outwait_below(
                            key, agent, exclusive, deadline, poll
                        )
                except BaseException:
                    self._grants.release(key, agent, journalled=False)
                    raise
                if cleared and blocker is None:
                    return self.made(name, key, agent, exclusive=exclusive)
                self._grants.release(key, agent, journalled=False)
                if blocker is None:
                    return False  # out of time
                # Lines are waited for in one order, from above down (`is_above`): the
                # turnstiles below this blocker go back first (its holder may be waiting,
                # holding its line, for the holds below it).
                for turnstile in [t for t in turnstiles if not is_above(t, blocker[0])]:
                    turnstiles.remove(turnstile)
                    self._grants.release(turnstile, agent, journalled=False)
                if not (yield InLine(blocker, _left(deadline))):
                    return False
                turnstiles.append(blocker[0])
                if exclusive and not (
                    yield from self._outwait_readers(blocker[1], agent, deadline, poll)
                ):
                    return False
        finally:
            for ancestor in turnstiles:
                self._grants.release(ancestor, agent, journalled=False)
            if request is not None:  # its line is given back or granted by now
                self.marks.request_ended(request)

    def made(self, name: str, key: str, agent: str, *, exclusive: bool) -> bool:
        """`agent`, holding the line of `name`, is granted it: an exclusive grant absorbs
        its own read (an upgrade: only now, so a refused upgrade keeps its read); a shared
        one joins the readers and lets the line go (`shared_holds.py`)."""
        shared = self._shared
        if exclusive:
            if shared_entry_exists(self._directory.fd, name):
                read = shared.settle(name, agent)
                if read is not None:
                    self._grants.read_absorbed(name, agent, read.acquired_at)
            return True
        token = self._grants.take_token(name, agent)
        if token is not None:
            shared.join(name, key, agent, token)
        return True

    def _outwait_readers(
        self, name: str, agent: str, deadline: float, poll: float
    ) -> Generator[Step, object, bool]:
        """Until lock `name` has no live reader but `agent` (True), or `deadline` (False).
        Woken when a member goes; a re-check every poll interval sees a dead one."""
        members = f"{self._directory.path}/{name}{SHARED_SUFFIX}"
        while read_by_others(self._directory, self._shared, name, agent):
            left = _left(deadline)
            if left <= 0:
                return False
            yield Pause(min(poll, left), members)
        return True

    def _outwait_below(
        self, key: str, agent: str, exclusive: bool, deadline: float, poll: float
    ) -> Generator[Step, object, bool]:
        """Until nobody else holds anything under the directory `key` (True), or `deadline`
        (False). Woken by any change of the lock directory's entries (holds under a
        directory are many locks, whose releases no one entry announces; a directory lock is
        rare); a re-check every poll interval sees a dead holder."""
        while self.holders_below(key, agent, exclusive):
            left = _left(deadline)
            if left <= 0:
                return False
            yield Pause(min(poll, left), self._directory.path)
        return True


class Requests:
    """A store's requests for locks, whatever their size and mode: the decisions of a take
    now (`try_lock`) and of a wait (`acquire`, `acquire_async`: the same steps, only the
    sleeping differs), with the locks they meet: the key's readers (`shared_holds.py`), a
    directory or glob over the key, and (for a directory or glob) the holds under it.

    A directory or glob request leaves its mark (`scope_marks.py`) before it takes its line
    (Dekker's order, see the module's docstring); the mark goes once the request ended and the
    agent holds the lock no more (`settle`)."""

    def __init__(self, grants: Grants, waits: Waits, shared: SharedHolds, scopes: Scopes) -> None:
        self._keys, self._directory = grants.keys, grants.directory
        self._operations, self._journal = grants.operations, grants.journal
        self._grants, self._waits, self._shared = grants, waits, shared
        self._scopes, self._marks = scopes, scopes.marks

    # -- taking now and giving back ----------------------------------------------------------

    def try_lock(self, filepath: str, agent_id: str, mode: LockMode) -> bool:
        """`LockStore.try_lock`."""
        agent = validate_agent_id(agent_id)
        key, name = self._keys.locate(filepath)
        exclusive = mode is EXCLUSIVE or validate_mode(mode) == EXCLUSIVE
        if not is_scoped(key):
            return self._try(name, key, agent, exclusive)
        self._marks.want(key, name, agent)  # before taking the line: Dekker's order
        request = self._marks.request(key, name, agent, exclusive=exclusive)  # (pending_scopes)
        try:
            return self._try(name, key, agent, exclusive)
        finally:
            self._marks.request_ended(request)  # granted, or its line given back
            self.settle(name, agent, request_ended=True)

    def _try(self, name: str, key: str, agent: str, exclusive: bool) -> bool:
        """`try_lock` of lock `name` (`key`), a directory's mark made."""
        return self._take(name, key, agent) if exclusive else self._try_share(name, key, agent)

    def _take(self, name: str, key: str, agent: str) -> bool:
        """Lock `name` (`key`) made `agent`'s exclusively now (True, also when it held it
        already), or left as it was (False: a live reader, or a directory or glob over it
        held, or holds under it)."""
        new = self._take_now(name, key, agent)
        if not new:
            return new is not None  # False: held already
        if self._scope_conflict(key, agent, exclusive=True):
            self._grants.release(key, agent, journalled=False)
            return False
        self._scopes.made(name, key, agent, exclusive=True)
        self._grants.journal_grant(name, key, agent)
        return True

    def _take_now(self, name: str, key: str, agent: str) -> bool | None:
        """Take lock `name` exclusively now, once no other live reader holds it: True for a
        new grant (not made yet: see `Scopes.made`), False when `agent` held it already,
        None when refused."""
        directory, shared = self._directory, self._shared
        if read_by_others(directory, shared, name, agent):
            return None
        new = self._grants.take_fresh(name, key, agent)
        # A reader may have joined between the look and the take.
        if new and read_by_others(directory, shared, name, agent):
            self._grants.release(key, agent, journalled=False)
            return None
        return new

    def _try_share(self, name: str, key: str, agent: str) -> bool:
        """`try_lock` in shared mode (a member already, or the exclusive holder: held)."""
        if self._shared.holds_shared(name, agent):
            return True
        taken = self._grants.take_line(name, key, agent)
        if taken is None:
            return False
        token, new = taken
        if not new:
            return True  # it holds the lock exclusively: that covers reading
        if self._scope_conflict(key, agent, exclusive=False):
            self._grants.give_line_back(name, token)
            return False
        self._shared.join(name, key, agent, token)
        if self._journal is not None:
            self._journal.granted(token, agent, key, SHARED)
        return True

    def _scope_conflict(self, key: str, agent: str, *, exclusive: bool) -> bool:
        """Whether `agent`, holding the line of `key`, must give it back for a directory:
        one over it held by another, or (a directory itself) holds under it. One
        `faccessat` while no directory lock was ever taken here."""
        if self._scopes.blocker(key, agent, exclusive) is not None:
            return True
        return is_scoped(key) and bool(self._scopes.holders_below(key, agent, exclusive))

    def release(self, filepath: str, agent_id: str) -> bool:
        """`LockStore.release`."""
        released = self._grants.release(filepath, agent_id)
        if not released:
            # Not the lock's holder: a reader giving back its shared hold (`shared_holds.py`).
            name = self._keys.locate(filepath)[1]
            released = self._shared.present(name) and self._shared.leave(
                name, validate_agent_id(agent_id)
            )
        if released and self._marks.any_mine():  # a directory's mark may go now
            key, name = self._keys.locate(filepath)
            if is_scoped(key):
                self.settle(name, validate_agent_id(agent_id), request_ended=False)
        return released

    def release_all(self, agent: str, namespace: str | None) -> list[str]:
        """`LockStore.cleanup_agent_locks` of a valid `agent` (in `namespace`; None: all)."""
        # Each release is journalled as it is made, before the lock or read is handed on.
        released = reclamation.release_all(self._operations, self._directory, agent, namespace)
        for name in released:
            self._grants.forget(name, agent)
        reads = self._shared.release_all(agent, namespace)
        if self._marks.any_mine():  # the marks of its directory locks may go now
            for holder in [*released.values(), *reads]:
                if is_scoped(holder.lock_path):
                    lock = lock_name(holder.namespace, holder.lock_path)
                    self.settle(lock, agent, request_ended=False)
        return sorted([holder.lock_path for holder in released.values()]
                      + [member.lock_path for member in reads])  # fmt: skip

    def holder_below(self, key: str, agent_id: str) -> str | None:
        """`LockStore.holder_below`."""
        scoped, name = self._keys.locate(key)
        if not is_scoped(scoped):
            return None
        return self._scopes.waiting_below(scoped, name, validate_agent_id(agent_id))

    def revoked(self, key: str, agent: str) -> None:
        """`agent`'s lock of `key` was revoked (released by another process) and it is told
        so here: the mark this process left for it, if any, goes now, as at a release."""
        if not (is_scoped(key) and self._marks.any_mine()):
            return
        try:
            name = self._keys.locate(key)[1]
        except ValueError:  # a key of another checkout's (a revocation of all namespaces)
            return
        self.settle(name, agent, request_ended=False)

    def settle(self, name: str, agent: str, *, request_ended: bool) -> None:
        """The mark of `agent`'s directory or glob lock `name` goes once no request here
        wants it and the agent holds it no more (`scope_marks.py`)."""
        scopes = self._scopes
        self._marks.settle(
            name, agent, lambda: scopes.holds(name, agent), request_ended=request_ended
        )

    # -- waiting: the decisions once, for both ways of sleeping -------------------------------

    async def acquire_async(
        self, filepath: str, agent_id: str, timeout_seconds: float, poll_ms: float, mode: LockMode
    ) -> bool:
        """`LockStore.acquire_async`."""
        steps = self._begin(filepath, agent_id, timeout_seconds, poll_ms, mode)
        if isinstance(steps, bool):
            return steps
        run, ended = steps
        try:
            return await sleep_through_async(run_steps(*run, poll_ms))
        finally:
            if ended is not None:
                ended()

    def acquire(
        self, filepath: str, agent_id: str, timeout_seconds: float, poll_ms: float, mode: LockMode
    ) -> bool:
        """`LockStore.acquire`: `acquire_async`'s steps, sleeping in this thread."""
        steps = self._begin(filepath, agent_id, timeout_seconds, poll_ms, mode)
        if isinstance(steps, bool):
            return steps
        run, ended = steps
        try:
            return sleep_through(run_steps(*run, poll_ms))
        finally:
            if ended is not None:
                ended()

    def _begin(
        self, filepath: str, agent_id: str, timeout_seconds: float, poll_ms: float, mode: LockMode
    ) -> bool | tuple[tuple[Steps, Waits, LockWait, str], Callable[[], None] | None]:
        """What an acquire does before it sleeps: the answer at once (held already, or taken
        without a wait), or the steps of its wait (`Scopes.acquisition`) with what a runner
        needs to carry them out (the waits, the journal's record of the request, the agent),
        and what to call once they ended (a directory's mark settled), if anything."""
        deadline = time.monotonic() + validate_timeout(timeout_seconds)
        poll = validate_poll_interval(poll_ms)
        agent, key, name, held = self._before_wait(filepath, agent_id, mode)
        if held:
            return True
        exclusive, scoped = mode == EXCLUSIVE, is_scoped(key)
        quick = self._quick(key, name, agent, exclusive, scoped)
        if quick is not None:
            return quick
        if not scoped:
            ended = None
        else:  # marked by `_quick`: settled when the wait ends, however it ends
            ended = functools.partial(self.settle, name, agent, request_ended=True)
        try:
            steps = self._scopes.acquisition(key, name, agent, exclusive, deadline, poll)
            wait = self._waits.lock_wait(key, name, agent, exclusive=exclusive)
        except BaseException:
            if ended is not None:
                ended()
            raise
        return (steps, self._waits, wait, agent), ended

    def _quick(self, key: str, name: str, agent: str, exclusive: bool, scoped: bool) -> bool | None:
        """A file's exclusive lock taken at once (True, also when held already), or None:
        the wait decides (`Scopes.acquisition`). A directory or glob (`scoped`) marks the
        lock directory first (Dekker's order)."""
        if scoped:
            self._marks.want(key, name, agent)
            if exclusive:  # held already: never a wait, whose end would give the hold back
                with contextlib.suppress(CorruptRecordError):
                    holder = self._directory.read_holder(name)
                    if holder is not None and holder.agent_id == agent:
                        self.settle(name, agent, request_ended=True)
                        return True
            return None
        return True if exclusive and self._take(name, key, agent) else None

    def _before_wait(
        self, filepath: str, agent_id: str, mode: LockMode
    ) -> tuple[str, str, str, bool]:
        """(agent, key, lock name, whether `agent` holds the lock in `mode` already: a
        member, or the exclusive holder asking to read)."""
        agent = validate_agent_id(agent_id)
        key, name = self._keys.locate(filepath)
        if mode is EXCLUSIVE or validate_mode(mode) == EXCLUSIVE:
            return agent, key, name, False
        if self._shared.holds_shared(name, agent):
            return agent, key, name, True
        holder = self._directory.read_holder(name)
        return agent, key, name, holder is not None and holder.agent_id == agent


@dataclass(frozen=True, slots=True)
class InLine:
    """Wait in the line of `located` ((key, lock name)) for at most `seconds`: the runner
    sends back whether the lock is the waiter's."""

    located: tuple[str, str]
    seconds: float


@dataclass(frozen=True, slots=True)
class Pause:
    """Sleep `seconds` before looking again, or less when an entry of the directory `watched`
    changes (`sleep.Drain`)."""

    seconds: float
    watched: str


Step = InLine | Pause
Steps = Generator[Step, object, bool]


def run_steps(
    steps: Steps, waits: Waits, journal: LockWait, agent: str, poll_ms: float
) -> Naps[bool]:
    """Carry out a wait's steps (`Scopes.acquisition`), telling `journal` when the request
    sleeps and how it ended; the sleeps are yielded (`sleep.Naps`: `sleep_through` in a
    thread, `sleep_through_async` on the event loop). An exception (a cancellation) is
    thrown into the steps, which leave nothing behind."""
    drain: Drain | None = None
    try:
        step = next(steps)
        while True:
            try:
                if isinstance(step, Pause):
                    drain = drain or waits.drain()
                    if not drain.follow(step.watched):  # newly followed: look again first
                        journal.sleeping()
                        yield from drain.sleep(step.seconds)
                    outcome: object = None
                else:
                    begun = waits.begin_at(step.located, agent, step.seconds, poll_ms)
                    if not isinstance(begun, bool):
                        journal.sleeping()
                    outcome = begun if isinstance(begun, bool) else (yield from waits.run(*begun))
            except BaseException as error:
                step = steps.throw(error)  # it cleans up and raises again
                continue
            step = steps.send(outcome)
    except StopIteration as done:
        journal.ended(bool(done.value))
        return bool(done.value)
    except BaseException:
        journal.interrupted()
        raise
    finally:
        if drain is not None:
            drain.close()


def read_by_others(directory: LockDir, shared: SharedHolds, name: str, agent: str) -> bool:
    """Whether an agent other than `agent`, not provably dead, reads lock `name`: one
    `faccessat` while nobody reads it (`disk.shared_entry_exists`), its members read only
    then (`shared_holds.py`)."""
    return shared_entry_exists(directory.fd, name) and shared.others_alive(name, agent)


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())
