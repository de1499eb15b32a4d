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
        InvalidPathError,
        InvalidTimeoutError,
        LockDirError,
        LockDirFullError,
        LockStoreError,
        PathOutsideRepoError,
    )
    from .liveness import Liveness
    from .lockdir import default_lock_dir
    from .records import HolderRecord, LockInfo, Reclamation, StoreSnapshot, WaiterRecord
    from .store import MAX_TIMEOUT_SECONDS, LockStore

_HOMES = {
    "LockBackend": "backend",
    "CorruptRecordError": "errors",
    "InvalidAgentIdError": "errors",
    "InvalidPathError": "errors",
    "InvalidTimeoutError": "errors",
    "LockDirError": "errors",
    "LockDirFullError": "errors",
    "LockStoreError": "errors",
    "PathOutsideRepoError": "errors",
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
    "CorruptRecordError",
    "HolderRecord",
    "InvalidAgentIdError",
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
    "StoreSnapshot",
    "WaiterRecord",
    "default_lock_dir",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value
