"""The lock store's contract, as the design documents name it.

`LockStore` (lockyard.infra.lockstore) does the work; the functions below keep the user's
contract callable exactly so, each on a cached default store per (checkout, namespace, lock
dir). `repo_namespace` is the checkout's directory (default: the working directory); the
namespace is the repository's identity, or `LOCKYARD_NAMESPACE` when set. The lock directory
is `LOCKYARD_LOCK_DIR`, else a private per-user runtime directory.
"""

from __future__ import annotations

import os
import threading

from ..lockstore import (
    MAX_TIMEOUT_SECONDS,
    CorruptRecordError,
    HolderRecord,
    InvalidAgentIdError,
    InvalidNamespaceError,
    InvalidPathError,
    InvalidTimeoutError,
    Liveness,
    LockBackend,
    LockDirError,
    LockInfo,
    LockStore,
    LockStoreError,
    PathOutsideRepoError,
    Reclamation,
    StoreSnapshot,
    WaiterRecord,
    default_lock_dir,
)
from ..lockstore.identity import canonical_repo_path, namespace_from_env

__all__ = [
    "MAX_TIMEOUT_SECONDS",
    "CorruptRecordError",
    "HolderRecord",
    "InvalidAgentIdError",
    "InvalidNamespaceError",
    "InvalidPathError",
    "InvalidTimeoutError",
    "Liveness",
    "LockBackend",
    "LockDirError",
    "LockInfo",
    "LockStore",
    "LockStoreError",
    "PathOutsideRepoError",
    "Reclamation",
    "StoreSnapshot",
    "WaiterRecord",
    "canonicalize_path",
    "cleanup_agent_locks",
    "default_lock_dir",
    "get_lock_holder",
    "get_store",
    "is_locked",
    "list_locks",
    "release_lock",
    "try_lock",
    "wait_for_lock",
    "wait_for_lock_async",
]

_stores: dict[tuple[str, str | None, str], LockStore] = {}
_stores_guard = threading.Lock()


def get_store(repo_namespace: str | os.PathLike[str] | None = None) -> LockStore:
    """The cached store for this checkout (canonical path), the current `LOCKYARD_NAMESPACE`
    and the current lock directory. The checkout's identity is read once per store."""
    repo = canonical_repo_path(repo_namespace)
    explicit = namespace_from_env()
    lock_dir = os.path.abspath(default_lock_dir())
    with _stores_guard:
        store = _stores.get((repo, explicit, lock_dir))
        if store is None:
            store = LockStore(repo, lock_dir, namespace=explicit)
            _stores[(repo, explicit, lock_dir)] = store
        return store


def canonicalize_path(filepath: str, repo_namespace: str | None = None) -> str:
    """The lock key of `filepath`: its path relative to the checkout's root (`src/app.py`,
    the same in every worktree of the repository), or a literal `__name__` as it is."""
    return get_store(repo_namespace).canonicalize(filepath)


def try_lock(filepath: str, agent_id: str, repo_namespace: str | None = None) -> bool:
    return get_store(repo_namespace).try_lock(filepath, agent_id)


async def wait_for_lock_async(
    filepath: str,
    agent_id: str,
    repo_namespace: str | None = None,
    timeout_seconds: float = 30.0,
    poll_interval_ms: float = 100,
) -> bool:
    """True when acquired, False on timeout. `poll_interval_ms` is only the fallback cadence."""
    return await get_store(repo_namespace).acquire_async(
        filepath, agent_id, timeout_seconds, poll_interval_ms
    )


def wait_for_lock(
    filepath: str,
    agent_id: str,
    repo_namespace: str | None = None,
    timeout_seconds: float = 30.0,
    poll_interval_ms: float = 100,
) -> bool:
    return get_store(repo_namespace).acquire(filepath, agent_id, timeout_seconds, poll_interval_ms)


def release_lock(filepath: str, agent_id: str, repo_namespace: str | None = None) -> bool:
    return get_store(repo_namespace).release(filepath, agent_id)


def get_lock_holder(filepath: str, repo_namespace: str | None = None) -> str | None:
    return get_store(repo_namespace).holder(filepath)


def is_locked(filepath: str, repo_namespace: str | None = None) -> bool:
    return get_store(repo_namespace).is_locked(filepath)


def list_locks(repo_namespace: str | None = None) -> list[LockInfo]:
    """Every lock in the lock directory (all namespaces)."""
    return get_store(repo_namespace).list_locks()


def cleanup_agent_locks(agent_id: str, repo_namespace: str | None = None) -> list[str]:
    """Release `agent_id`'s locks: in every namespace, or only `repo_namespace` when given."""
    store = get_store(repo_namespace)
    return store.cleanup_agent_locks(agent_id, all_namespaces=repo_namespace is None)
