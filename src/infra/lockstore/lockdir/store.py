"""`LockStore`: file locks in one private lock directory, for one checkout of a repository.

The public face of the lock directory backend: it builds the parts and hands each call to
the one that decides it. A lock is (namespace, repository-relative key) (see `checkout.py`):
stores opened on two worktrees of one clone, or on two checkouts given one explicit
namespace, share their locks. A request (take, wait, release) is decided by
`scopes.Requests` (the readers and the directory and glob locks it meets), which runs the
line's decisions (`line.py`) on the directory (`operations.py`) and sleeps with `sleep.py`;
what the directory keeps of each agent is `agents.py`'s, the clean-ups `reclamation.py`'s,
the listings `reporting.py`'s. Mutual exclusion holds under any interleaving of acquire,
release, cleanup and stale-lock breaking; docs/lock-store.md walks through the
interleavings.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from ..checkout import Checkout, open_checkout
from ..errors import CorruptRecordError, LockDirError
from ..journal.files import journal_files
from ..journal.record import JournalRecord
from ..liveness import ProcessIdentity
from ..modes import EXCLUSIVE, LockMode
from ..paths import validate_agent_id
from ..records import (
    HolderRecord,
    LockInfo,
    LostLock,
    Reclamation,
    StoreSnapshot,
    WaiterRecord,
)
from . import reclamation, reporting
from .agents import last_active, pending_reason, post_revocation, stamp_activity, take_revocations
from .disk import LockDir, default_lock_dir
from .glob_index import globs_over
from .keys import LockKeys
from .lock_journal import LockJournal
from .operations import DiskOperations, GrantRecords, Grants, OnReclaim, Waits
from .policy import read_idle_limit, write_idle_limit
from .scope_marks import ScopeMarks
from .scopes import Requests, Scopes
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
        self.root: str = self.checkout.root  # this checkout's root: keys are relative to it
        self.turn_timeout = turn_timeout
        self.keys = LockKeys(self.checkout, allow_outside_repo=allow_outside_repo)
        where = default_lock_dir() if lock_dir is None else lock_dir
        self.directory = LockDir(where, read_only=read_only)
        self.lock_dir: Path = Path(self.directory.path)
        # The journal's writer is shared by the stores of this process; None: off
        # (LOCKYARD_JOURNAL=off), or the store only reads.
        files = None if read_only else journal_files(self.lock_dir)
        journal = None if files is None else LockJournal(files, self.namespace, turn_timeout)
        self._journal = journal
        # The line carried out on the directory (`operations.py`), the readers
        # (`shared_holds.py`), the directory and glob locks and every request's decisions
        # (`scopes.py`).
        self.operations = DiskOperations(
            self.directory, turn_timeout=turn_timeout, on_reclaim=on_reclaim, journal=journal
        )
        records = GrantRecords(self.directory.cards, owner, self.namespace, self.root)
        self.grant_records = records
        self.grants = Grants(self.keys, self.directory, self.operations, records, journal)
        self.waits = Waits(self.grants, push=use_inotify, backstop=liveness_interval)
        self.shared = SharedHolds(self.directory, self.operations, journal, records)
        marks = ScopeMarks(self.directory, self.namespace, records.card)
        self.scopes = Scopes(self.directory, self.shared, self.grants, self.namespace, marks)
        self.requests = Requests(self.grants, self.waits, self.shared, self.scopes)

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
        """Stamped with this process's session when it has none (`LockJournal.append`)."""
        if self._journal is not None:
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
        """Who `agent_id`'s lock of the directory or glob `key` still waits for: one
        `faccessat` while no directory or glob request is under way, a scan of the held locks
        only while one of it is (`Scopes.waiting_below`)."""
        return self.requests.holder_below(key, agent_id)

    def take_lost_locks(self, agent_id: str) -> list[LostLock]:
        """The locks an operator revoked from `agent_id` since it last asked, with why
        (agents.py); one failed `rename` when there are none."""
        if self._read_only:
            return []
        lost = [
            LostLock(filepath=str(notice["filepath"]), fence=None, reason=str(notice["reason"]))
            for notice in take_revocations(self.lock_dir, agent_id)
        ]
        for item in lost:  # a revoked directory's or glob's mark left here goes now
            self.requests.revoked(item.filepath, agent_id)
        return lost

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
        return self.requests.try_lock(filepath, agent_id, mode)

    def release(self, filepath: str, agent_id: str) -> bool:
        """Give back your lock; False, touching nothing, when `agent_id` does not hold it."""
        return self.requests.release(filepath, agent_id)

    # -- waiting: the decisions are `scopes.Requests`'s, the sleeping `sleep.py`'s --------------

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
        return await self.requests.acquire_async(
            filepath, agent_id, timeout_seconds, poll_interval_ms, mode
        )

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
        return self.requests.acquire(filepath, agent_id, timeout_seconds, poll_interval_ms, mode)

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
        namespace = None if all_namespaces else self.namespace
        return self.requests.release_all(validate_agent_id(agent_id), namespace)

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
