"""`LockStore`: file locks in one private lock directory, for one checkout of a repository.

The public face of the lock directory backend. A lock is (namespace, repository-relative key)
(see `checkout.py`): stores opened on two worktrees of one clone, or on two checkouts given
one explicit namespace, share their locks. Each operation turns a file path into its lock's
name here, and runs the line's decision (`line.py`) on the directory (`operations.py`):
mutual exclusion holds under any interleaving of acquire, release, cleanup and stale-lock
breaking; docs/lock-store.md walks through the interleavings.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from ..checkout import Checkout, open_checkout
from ..errors import CorruptRecordError, LockDirError
from ..journal.files import JournalFiles, journal_files
from ..journal.record import JournalRecord, process_session
from ..liveness import ProcessIdentity, current_process
from ..modes import EXCLUSIVE, SHARED, LockMode, validate_mode
from ..paths import lock_name, validate_agent_id, validate_poll_interval, validate_timeout
from ..records import (
    HolderRecord,
    LockInfo,
    LostLock,
    Reclamation,
    StoreSnapshot,
    WaiterRecord,
)
from ..scope_keys import is_scoped
from . import line, reclamation, reporting
from .agents import last_active, pending_reason, post_revocation, stamp_activity, take_revocations
from .disk import LockDir, default_lock_dir
from .glob_index import globs_over
from .keys import LockKeys
from .lock_journal import LockJournal
from .operations import DiskOperations, GrantRecords, Grants, LockWait, OnReclaim, Waits, run
from .policy import read_idle_limit, write_idle_limit
from .scope_marks import ScopeMarks
from .scopes import Scopes, Steps, run_steps, run_steps_async
from .shared_holds import SharedHolds

TURN_TIMEOUT_SECONDS: Final = 5.0
"""How long the first waiter may leave a free lock untaken before others pass it over. A
running waiter takes its turn within milliseconds (pushed) or one poll interval; one that
does not is stopped or stuck, and must not block a free file for everyone."""


class LockStore:
    """Locks on files of one repository, kept in one lock directory shared by processes.

    `repo_namespace` is a directory of the checkout (default: the working directory);
    relative file paths are resolved in the checkout's root. `namespace` names the repository
    explicitly (default: `LOCKYARD_NAMESPACE`, else the name derived from the repository; see
    `checkout.py`).

    `use_inotify=False` disables cross-process push wake-ups (waiters in other processes
    are then seen by polling); in-process notifications always work.
    `liveness_interval` is how often a pushed waiter still re-checks on its own, to notice
    holders and queued waiters that died without releasing.
    `turn_timeout` is how long the first waiter of a free lock has to take it before the
    next one that asks passes it over (it is stopped or stuck; see TURN_TIMEOUT_SECONDS).
    `owner` is the process the store's lock records name as holder (default: this process);
    an agent CLI session's server names the CLI process, so the session's locks live as long
    as the CLI does. Queue entries always name this process: the waiting is done here.
    """

    def __init__(
        self,
        repo_namespace: str | os.PathLike[str] | None = None,
        lock_dir: str | os.PathLike[str] | None = None,
        *,
        namespace: str | None = None,
        allow_outside_repo: bool = False,
        use_inotify: bool = True,
        liveness_interval: float = 0.5,
        turn_timeout: float = TURN_TIMEOUT_SECONDS,
        on_reclaim: OnReclaim | None = None,
        owner: ProcessIdentity | None = None,
        read_only: bool = False,
    ) -> None:
        self._read_only = read_only
        self.checkout: Checkout = open_checkout(repo_namespace, namespace)
        self.namespace: str = self.checkout.namespace
        self.root: str = self.checkout.root
        """This checkout's root: lock keys are relative to it."""
        self.keys = LockKeys(self.checkout, allow_outside_repo=allow_outside_repo)
        """File paths to their keys and lock names (`keys.py`)."""
        self.directory = LockDir(
            lock_dir if lock_dir is not None else default_lock_dir(), read_only=read_only
        )
        """The lock directory's atomic operations (`disk.py`)."""
        self.lock_dir: Path = Path(self.directory.path)
        self._journal: JournalFiles | None = None if read_only else journal_files(self.lock_dir)
        """The journal's writer (journal/files.py), shared by the stores of this process;
        None when it is off (LOCKYARD_JOURNAL=off) or the store only reads."""
        self.turn_timeout = turn_timeout
        self._lock_journal = (
            None
            if self._journal is None
            else LockJournal(self._journal, self.namespace, turn_timeout)
        )
        """The records of this store's own lock changes (`lock_journal.py`); None when off."""
        self.operations = DiskOperations(
            self.directory,
            turn_timeout=turn_timeout,
            on_reclaim=on_reclaim,
            journal=self._lock_journal,
        )
        """The line's operations on that directory (`operations.py`)."""
        self.grant_records = GrantRecords(self.directory.cards, owner, self.namespace, self.root)
        """The records its grants are published with (`operations.py`)."""
        self.grants = Grants(
            self.keys, self.directory, self.operations, self.grant_records, self._lock_journal
        )
        """Taking and giving back, and what it granted (`operations.py`)."""
        self.waits = Waits(
            self.keys,
            self.directory,
            self.operations,
            self.grants,
            self.grant_records,
            self._lock_journal,
            namespace=self.namespace,
            root=self.root,
            push=use_inotify,
            backstop=liveness_interval,
        )
        """How its waits begin and end (`operations.py`)."""
        self.shared = SharedHolds(
            self.directory,
            self.operations,
            self._lock_journal,
            owner=owner,
            namespace=self.namespace,
            root=self.root,
        )
        """Shared holds, and the exclusive grant's wait for them (`shared_holds.py`)."""
        self.scopes = Scopes(
            self.directory,
            self.shared,
            self.grants,
            self.namespace,
            ScopeMarks(self.directory, self.namespace, self.grant_records.card),
        )
        """Directory locks: who blocks a grant over it or under it, and their marks
        (`scopes.py`, `scope_marks.py`)."""

    def __repr__(self) -> str:
        return (
            f"LockStore(namespace={self.namespace!r}, root={self.root!r}, "
            f"lock_dir={str(self.lock_dir)!r})"
        )

    def close(self) -> None:
        """Close the lock directory handle (also done when the store is garbage-collected)."""
        self.directory.close()

    @property
    def location(self) -> str:
        return str(self.lock_dir)

    def journal_write(self, record: JournalRecord) -> None:
        """Append a record to the lock directory's journal (a deadlock, a denied write); never
        raises (see journal/files.py for what happens when it cannot be written). A record
        with no `session` is stamped with this process's."""
        if self._journal is None:
            return
        if not record.session:  # made by a caller that left who-wrote-it to the store
            me = current_process()
            record.session = process_session(me.pid, me.start_time)
            record.pid, record.host = me.pid, me.host
        self._journal.append(record)

    # A lock directory issues no fencing numbers: a grant is lost by release, proof of death
    # (which the holder's own calls see) or revocation, which the guards say until it is told.
    def grant_fence(self, filepath: str, agent_id: str) -> int | None:
        return None

    def stale_grant(self, filepath: str, agent_id: str) -> str | None:
        """`revoked: REASON` while the agent has not been told that the lock of `filepath`
        was revoked and does not hold it again; else None."""
        key = self.canonicalize(filepath)
        reason = pending_reason(self.lock_dir, agent_id, key)
        if reason is None or self.holder(key) == agent_id:
            return None
        return f"revoked: {reason}"

    def holds_of(self, keys: Sequence[str]) -> dict[str, tuple[str | None, tuple[str, ...]]]:
        """Each key's holder and readers, looked at one by one (a system call or two each)."""
        return {key: (self.holder(key), self.readers(key)) for key in keys}

    def readers(self, filepath: str) -> tuple[str, ...]:
        """The agents holding the file shared, not provably dead (one `faccessat` when none)."""
        return self.shared.readers(self.keys.locate(filepath)[1])

    def globs_over(self, key: str) -> tuple[str, ...]:
        """The globs locked here that cover `key` (`glob_index.py`): one `faccessat` when no
        glob was ever locked here."""
        return globs_over(self.directory.fd, self.namespace, key)

    def holder_below(self, key: str, agent_id: str) -> str | None:
        """An agent other than `agent_id` holding or reading something below the directory
        or glob `key`, not provably dead: `agent_id`'s lock of it still waits for it. A scan
        of the held locks (`Scopes.holders_below`), as the draining lock's own look."""
        scoped, _name = self.keys.locate(key)
        if not is_scoped(scoped):
            return None
        found = self.scopes.holders_below(scoped, agent_id, exclusive=True)
        return found[0] if found else None

    def take_lost_locks(self, agent_id: str) -> list[LostLock]:
        """The locks an operator revoked from `agent_id` since it last asked, with why
        (agents.py); one failed `rename` when there are none."""
        if self._read_only:
            return []
        return [
            LostLock(filepath=str(notice["filepath"]), fence=None, reason=str(notice["reason"]))
            for notice in take_revocations(self.lock_dir, agent_id)
        ]

    def revoke(self, agent_id: str, reason: str) -> list[str]:
        """Release every lock `agent_id` holds (all namespaces; its waiters get them in
        turn), and tell it why on its next lock call. For an operator: wrap it in
        `journal.causes.operator_release(who)` so the journal names who did it."""
        released = self.cleanup_agent_locks(agent_id, all_namespaces=True)
        post_revocation(self.lock_dir, agent_id, released, reason)
        return released

    # -- activity: when each agent last did anything (agents.py) ------------------------------

    def stamp_activity(self, agent_id: str) -> None:
        """`agent_id` did something now: a heartbeat (one system call; never raises)."""
        if not self._read_only:
            stamp_activity(self.lock_dir, agent_id)

    def last_active(self, agent_id: str) -> float | None:
        """When `agent_id` last did anything, by its heartbeats; None: none seen here."""
        return last_active(self.lock_dir, agent_id)

    # -- policy: settings kept in the lock directory (policy.py) ------------------------------

    def idle_limit(self) -> float | None:
        return read_idle_limit(self.lock_dir)

    def set_idle_limit(self, seconds: float | None) -> None:
        if self._read_only:
            raise LockDirError(f"{self.lock_dir} was opened read-only: its policy stays as it is")
        write_idle_limit(self.lock_dir, seconds)

    def __enter__(self) -> LockStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- keys ------------------------------------------------------------------------------

    def canonicalize(self, filepath: str) -> str:
        """The repository-relative lock key of `filepath` (`__name__` keys as they are)."""
        return self.keys.locate(filepath)[0]

    # -- taking and giving back --------------------------------------------------------------

    def try_lock(self, filepath: str, agent_id: str, *, mode: LockMode = EXCLUSIVE) -> bool:
        """Take the lock now if it is free and nobody alive queues for it (or you hold it).
        `mode="shared"`: hold it with other readers (`shared_holds.py`); an exclusive lock
        is then granted only once no other reader holds it. A directory (`src/api/`) is
        granted only when nobody else holds anything under it nor a directory over it
        (`scopes.py`)."""
        agent = validate_agent_id(agent_id)
        key, name = self.keys.locate(filepath)
        exclusive = mode is EXCLUSIVE or validate_mode(mode) == EXCLUSIVE
        if not is_scoped(key):
            return self._try(name, key, agent, exclusive)
        self.scopes.marks.want(key, name, agent)  # before taking the line: Dekker's order
        try:
            return self._try(name, key, agent, exclusive)
        finally:
            self._settle(name, agent, request_ended=True)

    def _try(self, name: str, key: str, agent: str, exclusive: bool) -> bool:
        """`try_lock` of lock `name` (`key`), a directory's mark made."""
        if not exclusive:
            return self._try_share(name, key, agent)
        new = self._take_now(name, key, agent)
        if not new:
            return new is not None  # False: held already
        if self._scope_conflict(key, agent, exclusive=True):
            self.grants.release(key, agent, journalled=False)
            return False
        self.scopes.made(name, key, agent, exclusive=True)
        self.grants.journal_grant(name, key, agent)
        return True

    def _take_now(self, name: str, key: str, agent: str) -> bool | None:
        """Take lock `name` exclusively now, once no other live reader holds it: True for a
        new grant (not made yet: see `Scopes.made`), False when `agent` held it already,
        None when refused."""
        shared = self.shared
        if shared.present(name) and shared.others_alive(name, agent):
            return None
        new = self.grants.take_fresh(name, key, agent)
        # A reader may have joined between the look and the take.
        if new and shared.present(name) and shared.others_alive(name, agent):
            self.grants.release(key, agent, journalled=False)
            return None
        return new

    def _try_share(self, name: str, key: str, agent: str) -> bool:
        """`try_lock` in shared mode (a member already, or the exclusive holder: held)."""
        if self.shared.holds_shared(name, agent):
            return True
        maker = self.grant_records.maker(agent, key)
        taken = run(line.take(self.operations, name, agent, maker))
        if taken is None:
            return False
        token, new = taken
        if not new:
            return True  # it holds the lock exclusively: that covers reading
        if self._scope_conflict(key, agent, exclusive=False):
            run(line.release(self.operations, name, token, None))
            return False
        self.shared.join(name, key, agent, token)
        if self._lock_journal is not None:
            self._lock_journal.granted(token, agent, key, SHARED)
        return True

    def _scope_conflict(self, key: str, agent: str, *, exclusive: bool) -> bool:
        """Whether `agent`, holding the line of `key`, must give it back for a directory:
        one over it held by another, or (a directory itself) holds under it. One
        `faccessat` while no directory lock was ever taken here."""
        if self.scopes.blocker(key, agent, exclusive) is not None:
            return True
        return is_scoped(key) and bool(self.scopes.holders_below(key, agent, exclusive))

    def release(self, filepath: str, agent_id: str) -> bool:
        """Give back your lock; False, touching nothing, when `agent_id` does not hold it."""
        released = self.grants.release(filepath, agent_id)
        if not released:
            # Not the lock's holder: a reader giving back its shared hold (`shared_holds.py`).
            name = self.keys.locate(filepath)[1]
            released = self.shared.present(name) and self.shared.leave(
                name, validate_agent_id(agent_id)
            )
        if released and self.scopes.marks.any_mine():  # a directory's mark may go now
            key, name = self.keys.locate(filepath)
            if is_scoped(key):
                self._settle(name, validate_agent_id(agent_id), request_ended=False)
        return released

    def _settle(self, name: str, agent: str, *, request_ended: bool) -> None:
        """The mark of `agent`'s directory or glob lock `name` goes once no request here
        wants it and the agent holds it no more (`scope_marks.py`)."""
        scopes = self.scopes
        scopes.marks.settle(
            name, agent, lambda: scopes.holds(name, agent), request_ended=request_ended
        )

    # -- waiting ---------------------------------------------------------------------------
    #
    # A wait's decisions (its turn in the key's line, readers to outwait, a directory over it
    # to pass through, holds under a directory) are one generator, `Scopes.acquisition`;
    # `run_steps` and `run_steps_async` only do the sleeping it asks for.

    async def acquire_async(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float = 30.0,
        poll_interval_ms: float = 100,
        *,
        mode: LockMode = EXCLUSIVE,
    ) -> bool:
        """Wait (in arrival order) until the lock is yours: True, or False on timeout.
        `mode="shared"`: see `try_lock`; a directory: see `try_lock`.

        Cancel-safe: a cancelled wait leaves no lock and no queue entry behind.
        """
        steps = self._acquisition(filepath, agent_id, timeout_seconds, poll_interval_ms, mode)
        if isinstance(steps, bool):
            return steps
        run, ended = steps
        try:
            return await run_steps_async(*run, poll_interval_ms)
        finally:
            if ended is not None:
                ended()

    def acquire(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float = 30.0,
        poll_interval_ms: float = 100,
        *,
        mode: LockMode = EXCLUSIVE,
    ) -> bool:
        """The blocking twin of `acquire_async`, for threads and scripts."""
        steps = self._acquisition(filepath, agent_id, timeout_seconds, poll_interval_ms, mode)
        if isinstance(steps, bool):
            return steps
        run, ended = steps
        try:
            return run_steps(*run, poll_interval_ms)
        finally:
            if ended is not None:
                ended()

    def _acquisition(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float,
        poll_interval_ms: float,
        mode: LockMode,
    ) -> bool | tuple[tuple[Steps, Waits, LockWait, str], Callable[[], None] | None]:
        """What an acquire does before it sleeps: the answer at once (held already, or taken
        without a wait), or the steps of its wait (`Scopes.acquisition`) with what a runner
        needs to carry them out (the waits, the journal's record of the request, the agent),
        and what to call once they ended (a directory's mark settled), if anything."""
        deadline = time.monotonic() + validate_timeout(timeout_seconds)
        poll = validate_poll_interval(poll_interval_ms)
        agent, key, name, held = self._before_wait(filepath, agent_id, mode)
        if held:
            return True
        exclusive = mode == EXCLUSIVE
        quick = self._quick(key, name, agent, exclusive)
        if quick is not None:
            return quick
        if not is_scoped(key):
            ended = None
        else:  # marked by `_quick`: settled when the wait ends, however it ends
            ended = functools.partial(self._settle, name, agent, request_ended=True)
        try:
            steps = self.scopes.acquisition(key, name, agent, exclusive, deadline, poll)
            wait = self.waits.lock_wait(key, name, agent, exclusive=exclusive)
        except BaseException:
            if ended is not None:
                ended()
            raise
        return (steps, self.waits, wait, agent), ended

    def _quick(self, key: str, name: str, agent: str, exclusive: bool) -> bool | None:
        """A file's exclusive lock taken at once (True, also when held already), or None:
        the wait decides (`Scopes.acquisition`). A directory marks the lock directory
        first (Dekker's order, `scopes.py`)."""
        if is_scoped(key):
            self.scopes.marks.want(key, name, agent)
            if exclusive:  # held already: never a wait, whose end would give the hold back
                with contextlib.suppress(CorruptRecordError):
                    holder = self.directory.read_holder(name)
                    if holder is not None and holder.agent_id == agent:
                        self._settle(name, agent, request_ended=True)
                        return True
            return None
        if not exclusive:
            return None
        new = self._take_now(name, key, agent)
        if new is False:
            return True
        if new is None:
            return None
        if self._scope_conflict(key, agent, exclusive=True):
            self.grants.release(key, agent, journalled=False)
            return None
        self.scopes.made(name, key, agent, exclusive=True)
        self.grants.journal_grant(name, key, agent)
        return True

    def _before_wait(
        self, filepath: str, agent_id: str, mode: LockMode
    ) -> tuple[str, str, str, bool]:
        """(agent, key, lock name, whether `agent` holds the lock in `mode` already: a
        member, or the exclusive holder asking to read)."""
        agent = validate_agent_id(agent_id)
        key, name = self.keys.locate(filepath)
        if mode is EXCLUSIVE or validate_mode(mode) == EXCLUSIVE:
            return agent, key, name, False
        if self.shared.holds_shared(name, agent):
            return agent, key, name, True
        holder = self.directory.read_holder(name)
        return agent, key, name, holder is not None and holder.agent_id == agent

    # -- reading (never writes) ------------------------------------------------------------

    def holder_record(self, filepath: str) -> HolderRecord | None:
        _key, name = self.keys.locate(filepath)
        return self.directory.read_holder(name)

    def holder(self, filepath: str) -> str | None:
        record = self.holder_record(filepath)
        return None if record is None else record.agent_id

    def is_locked(self, filepath: str) -> bool:
        try:
            return self.holder_record(filepath) is not None
        except CorruptRecordError:
            return True

    def waiters(self, filepath: str) -> list[WaiterRecord]:
        _key, name = self.keys.locate(filepath)
        return [record for _entry, record in self.directory.queues.read_queue(name)]

    def list_locks(self) -> list[LockInfo]:
        """Every lock in the lock directory (all namespaces), with holder, age and waiters
        (see `reporting.list_locks`)."""
        return reporting.list_locks(self.directory, self.turn_timeout)

    def snapshot(self) -> StoreSnapshot:
        """Holds and live waits of the whole lock directory, for a wait-for graph."""
        return reporting.snapshot(self.directory, self.turn_timeout)

    # -- cleaning up -----------------------------------------------------------------------

    def cleanup_agent_locks(self, agent_id: str, *, all_namespaces: bool = False) -> list[str]:
        """Release every lock `agent_id` holds (in this namespace, or in all); return the keys."""
        agent = validate_agent_id(agent_id)
        namespace = None if all_namespaces else self.namespace
        # Each release is journalled as it is made, before the lock or read is handed on.
        released = reclamation.release_all(self.operations, self.directory, agent, namespace)
        for name in released:
            self.grants.forget(name, agent)
        reads = self.shared.release_all(agent, namespace)
        if self.scopes.marks.any_mine():  # the marks of its directory locks may go now
            for holder in [*released.values(), *reads]:
                if is_scoped(holder.lock_path):
                    lock = lock_name(holder.namespace, holder.lock_path)
                    self._settle(lock, agent, request_ended=False)
        return sorted([holder.lock_path for holder in released.values()]
                      + [member.lock_path for member in reads])  # fmt: skip

    def reclaim_stale(self) -> list[Reclamation]:
        """Reclaim every lock whose holder is provably dead; drop dead waiters and debris."""
        self.scopes.marks.prune()  # before the dead's holder cards go (a mark names one)
        reclaimed = reclamation.reclaim_stale(self.operations, self.directory)
        self.shared.remove_dead()
        return reclaimed

    def remove_unreadable(self) -> list[str]:
        """Remove every lock whose holder record cannot be read (an operator's decision);
        return the lock entries removed (see `reclamation.remove_unreadable`)."""
        return reclamation.remove_unreadable(self.operations, self.directory)

    def end_stalled_waits(self) -> list[WaiterRecord]:
        """Drop the first waiter of every free lock that left its turn untaken for longer
        than `turn_timeout` (stopped or stuck); return the waits ended."""
        return reclamation.end_stalled_waits(self.operations, self.directory)

    def end_waits(self, agent_id: str | None) -> list[WaiterRecord]:
        """Drop every queue entry of `agent_id` (of every agent: None), in all namespaces.

        A waiter that is still running finds its entry gone and queues again at the back.
        """
        return reclamation.end_waits(self.operations, self.directory, agent_id)
