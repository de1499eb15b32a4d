"""The lock store: atomic directory locks with liveness, FIFO queues and push wake-ups.

The names below are loaded on first use: `paths`, `lockdir` and `liveness` need only the
standard library, and the agent CLI hooks (one process per tool call) import just those,
without paying for the pydantic records the rest of the store uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import LockBackend
    from .errors import (
        CorruptRecordError,
        InvalidAgentIdError,
        InvalidNamespaceError,
        InvalidPathError,
        InvalidTimeoutError,
        LockDirError,
        LockDirFullError,
        LockStoreError,
        PathOutsideRepoError,
    )
    from .identity import NAMESPACE_ENV, RepoIdentity, resolve_identity, validate_namespace
    from .liveness import Liveness
    from .lockdir import default_lock_dir
    from .records import HolderRecord, LockInfo, Reclamation, StoreSnapshot, WaiterRecord
    from .store import MAX_TIMEOUT_SECONDS, LockStore

_HOMES = {
    "LockBackend": "backend",
    "CorruptRecordError": "errors",
    "InvalidAgentIdError": "errors",
    "InvalidNamespaceError": "errors",
    "InvalidPathError": "errors",
    "InvalidTimeoutError": "errors",
    "LockDirError": "errors",
    "LockDirFullError": "errors",
    "LockStoreError": "errors",
    "PathOutsideRepoError": "errors",
    "NAMESPACE_ENV": "identity",
    "RepoIdentity": "identity",
    "resolve_identity": "identity",
    "validate_namespace": "identity",
    "Liveness": "liveness",
    "default_lock_dir": "lockdir",
    "HolderRecord": "records",
    "LockInfo": "records",
    "Reclamation": "records",
    "StoreSnapshot": "records",
    "WaiterRecord": "records",
    "MAX_TIMEOUT_SECONDS": "store",
    "LockStore": "store",
}

__all__ = [
    "MAX_TIMEOUT_SECONDS",
    "NAMESPACE_ENV",
    "CorruptRecordError",
    "HolderRecord",
    "InvalidAgentIdError",
    "InvalidNamespaceError",
    "InvalidPathError",
    "InvalidTimeoutError",
    "Liveness",
    "LockBackend",
    "LockDirError",
    "LockDirFullError",
    "LockInfo",
    "LockStore",
    "LockStoreError",
    "PathOutsideRepoError",
    "Reclamation",
    "RepoIdentity",
    "StoreSnapshot",
    "WaiterRecord",
    "default_lock_dir",
    "resolve_identity",
    "validate_namespace",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value
