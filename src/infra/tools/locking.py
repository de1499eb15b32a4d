"""`lockyard.infra.tools.locking`: the design card's import path of the lock store's
module-level functions.

They live in `lockyard.infra.lockstore.default_store`; the store, its types and its errors
are imported from `lockyard.infra.lockstore`. This module only names the functions here.
"""

from ..lockstore import (
    canonicalize_path,
    cleanup_agent_locks,
    get_lock_holder,
    get_store,
    is_locked,
    list_locks,
    release_lock,
    try_lock,
    wait_for_lock,
    wait_for_lock_async,
)

__all__ = [
    "canonicalize_path",
    "cleanup_agent_locks",
    "get_lock_holder",
    "get_store",
    "is_locked",
    "list_locks",
    "release_lock",
    "try_lock",
    "wait_for_lock",
    "wait_for_lock_async",
]
