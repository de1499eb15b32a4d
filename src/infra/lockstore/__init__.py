"""The lock store: atomic directory locks with liveness, FIFO queues and push wake-ups."""

from .backend import LockBackend
from .errors import (
    CorruptRecordError,
    InvalidAgentIdError,
    InvalidPathError,
    InvalidTimeoutError,
    LockDirError,
    LockStoreError,
    PathOutsideRepoError,
)
from .liveness import Liveness
from .lockdir import default_lock_dir
from .records import HolderRecord, LockInfo, Reclamation, StoreSnapshot, WaiterRecord
from .store import MAX_TIMEOUT_SECONDS, LockStore

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
    "LockInfo",
    "LockStore",
    "LockStoreError",
    "PathOutsideRepoError",
    "Reclamation",
    "StoreSnapshot",
    "WaiterRecord",
    "default_lock_dir",
]
