"""The interface the tools, hooks and monitor rely on; what every lock backend implements.

Two do: the file-system `LockStore` (lockyard.infra.lockstore) and `PgLockStore`
(lockyard.infra.lockstore.postgres), whose locks belong to live database sessions and carry
fencing numbers. `lockyard.infra.lockstore.open_backend` picks one from a setting.

A lock is the pair (namespace, key): the repository's namespace and the file's path relative
to the checkout's root (see `checkout.py`). A backend opens a checkout with
`open_checkout(repo_path, namespace)` and stores only these pairs, so it never sees a
machine's absolute paths: `checkout.key(filepath)` is its `canonicalize`, and
`checkout.namespace` its namespace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .journal.record import JournalRecord
from .modes import LockMode
from .records import HolderRecord, LockInfo, LostLock, Reclamation, StoreSnapshot, WaiterRecord


@runtime_checkable
class LockBackend(Protocol):
    """Locks keyed by repository-relative path within one repository namespace."""

    namespace: str
    """The repository's namespace (shared by its worktrees, or an explicit name)."""
    root: str
    """This checkout's root directory on this machine: keys are relative to it."""

    @property
    def location(self) -> str:
        """Where the locks live, fit to show a user (a directory; a server, no password)."""
        ...

    def close(self) -> None: ...

    def canonicalize(self, filepath: str) -> str: ...

    def try_lock(self, filepath: str, agent_id: str, *, mode: LockMode = "exclusive") -> bool: ...

    async def acquire_async(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float = 30.0,
        poll_interval_ms: float = 100,
        *,
        mode: LockMode = "exclusive",
    ) -> bool: ...

    def acquire(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float = 30.0,
        poll_interval_ms: float = 100,
        *,
        mode: LockMode = "exclusive",
    ) -> bool: ...

    def release(self, filepath: str, agent_id: str) -> bool: ...

    def holder(self, filepath: str) -> str | None: ...

    def holder_record(self, filepath: str) -> HolderRecord | None: ...

    def is_locked(self, filepath: str) -> bool: ...

    def waiters(self, filepath: str) -> list[WaiterRecord]: ...

    def list_locks(self) -> list[LockInfo]: ...

    def cleanup_agent_locks(self, agent_id: str, *, all_namespaces: bool = False) -> list[str]: ...

    def reclaim_stale(self) -> list[Reclamation]: ...

    def snapshot(self) -> StoreSnapshot: ...

    def end_waits(self, agent_id: str | None) -> list[WaiterRecord]:
        """Drop the queue entries of `agent_id` (of everyone: None); running waiters queue
        again at the back."""
        ...

    def end_stalled_waits(self) -> list[WaiterRecord]:
        """Drop first waiters that leave a free lock untaken too long; return them."""
        ...

    def grant_fence(self, filepath: str, agent_id: str) -> int | None:
        """The fencing number of the agent's current grant here (None: no fencing)."""
        ...

    def stale_grant(self, filepath: str, agent_id: str) -> str | None:
        """Why the agent's grant of this lock, as this process knows it, is no longer valid."""
        ...

    def holds_of(self, keys: Sequence[str]) -> dict[str, tuple[str | None, tuple[str, ...]]]:
        """Each of `keys` (lock keys) with its holder and its readers, as `holder` and
        `readers` answer them, in one look where the backend can (the guards ask it for a
        file and every directory and glob over it)."""
        ...

    def readers(self, filepath: str) -> tuple[str, ...]:
        """The agents holding this file shared (readers, who may not write it), not provably
        dead. While any other is left, the lock's holder waits for them and may not write."""
        ...

    def globs_over(self, key: str) -> tuple[str, ...]:
        """The glob locks that cover the file `key` (held or not; the guards ask who holds
        them), outermost first: () where no glob was ever locked."""
        ...

    def holder_below(self, key: str, agent_id: str) -> str | None:
        """An agent other than `agent_id` holding (or, exclusive or shared, reading) a lock
        below the directory or glob `key` (`scope_keys.is_above`), not provably dead; None
        when none, or for a file's key. While there is one, `agent_id`'s lock of `key` still
        waits for it ("draining": it holds its line, its acquire has not returned), so the
        guards do not let it write under `key` yet."""
        ...

    def take_lost_locks(self, agent_id: str) -> list[LostLock]:
        """Locks the agent lost without releasing them, each reported once."""
        ...

    def revoke(self, agent_id: str, reason: str) -> list[str]:
        """An operator takes every lock of `agent_id` (all namespaces; waiters get them in
        turn); the agent learns it, with `reason` where the backend keeps it, from
        `take_lost_locks` on its next lock call. Returns the keys released."""
        ...

    def stamp_activity(self, agent_id: str) -> None:
        """`agent_id` did something now (a tool call, a hook event): a heartbeat, cheap
        enough for every call. Never raises."""
        ...

    def last_active(self, agent_id: str) -> float | None:
        """When `agent_id` last did anything (seconds since the epoch), by its heartbeats;
        None when none was seen."""
        ...

    def idle_limit(self) -> float | None:
        """The idle limit set for every process of this store (seconds; None: off): a holder
        idle this long while someone waits for its locks has them revoked by the deadlock
        leader (`crossproc/idle_policy.py`)."""
        ...

    def set_idle_limit(self, seconds: float | None) -> None:
        """Set the idle limit for every process of this store (None: off)."""
        ...

    def journal_write(self, record: JournalRecord) -> None:
        """Add a record to this backend's journal that no lock change writes by itself (a
        deadlock, a denied write). Never raises, never blocks on the journal."""
        ...
