"""The interface the tools, hooks and monitor rely on; what another lock backend implements.

The file-system `LockStore` implements it. A PostgreSQL backend fits the same shape:
session-scoped advisory locks (`pg_try_advisory_lock(hash(namespace, key))`, dropped with a
crashed client) for holds, a table of (agent, key, ticket) rows for visible, ordered waits,
and LISTEN/NOTIFY for push wake-ups; its own deadlock detector is a backstop.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .records import HolderRecord, LockInfo, Reclamation, StoreSnapshot, WaiterRecord


@runtime_checkable
class LockBackend(Protocol):
    """Locks keyed by canonical path within one repository namespace."""

    namespace: str

    def canonicalize(self, filepath: str) -> str: ...

    def try_lock(self, filepath: str, agent_id: str) -> bool: ...

    async def acquire_async(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float = 30.0,
        poll_interval_ms: float = 100,
    ) -> bool: ...

    def acquire(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float = 30.0,
        poll_interval_ms: float = 100,
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
