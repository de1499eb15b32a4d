"""The lock store as module-level functions (`try_lock`, `wait_for_lock`, `release_lock`...).

Each function below runs on a cached default store per (checkout, namespace, backend).
`repo_namespace` is the checkout's directory (default: the working directory); the namespace
is the name derived from the repository, or `LOCKYARD_NAMESPACE` when set. The backend is the one
`LOCKYARD_BACKEND` names (`postgresql://...`, a lock directory, or `file`), as for every other
entry point; without it the lock directory `LOCKYARD_LOCK_DIR`, else a private per-user
runtime directory.
"""

from __future__ import annotations

import os
import threading

from .backend import LockBackend
from .checkout import NAMESPACE_ENV, canonical_repo_path, namespace_from_env
from .choice import BACKEND_ENV, FILE_WORD, chosen_spec, is_postgres_spec, open_backend
from .lockdir.disk import default_lock_dir
from .records import LockInfo

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

_stores: dict[tuple[str, str | None, str], LockBackend] = {}
_stores_guard = threading.Lock()

_EnvValue = str | bytes | None
_RecentKey = tuple[bool, str, _EnvValue, _EnvValue, _EnvValue]
_recent: dict[_RecentKey, tuple[LockBackend, int, int]] = {}
"""(whether the repository is the working directory, that directory or the absolute path
given, LOCKYARD_NAMESPACE, LOCKYARD_LOCK_DIR and LOCKYARD_BACKEND as set) -> the store
`get_store` found for them, and the (device, inode) of the directory it was opened on. Every
contract call looks its store up: this answers with a `getcwd` or one `stat` instead of
canonicalising the repository path and probing the default lock directory each time."""
_MAX_RECENT = 256

_ENV_KEYS = (os.fsencode(NAMESPACE_ENV), b"LOCKYARD_LOCK_DIR", os.fsencode(BACKEND_ENV))


def _env_values() -> tuple[_EnvValue, _EnvValue, _EnvValue]:
    """LOCKYARD_NAMESPACE, LOCKYARD_LOCK_DIR and LOCKYARD_BACKEND as set (bytes, or str off
    POSIX), or None.

    os.environ decodes key and value on every lookup; on POSIX its backing dict (bytes to
    bytes, kept in step by every os.environ update) answers in a tenth of the time."""
    environ_bytes = getattr(os.environ, "_data", None)
    if isinstance(environ_bytes, dict):
        namespace: bytes | None = environ_bytes.get(_ENV_KEYS[0])
        lock_dir: bytes | None = environ_bytes.get(_ENV_KEYS[1])
        backend: bytes | None = environ_bytes.get(_ENV_KEYS[2])
        return namespace, lock_dir, backend
    return (
        os.environ.get(NAMESPACE_ENV),
        os.environ.get("LOCKYARD_LOCK_DIR"),
        os.environ.get(BACKEND_ENV),
    )


def get_store(repo_namespace: str | os.PathLike[str] | None = None) -> LockBackend:
    """The cached store for this checkout (canonical path), the current `LOCKYARD_NAMESPACE`
    and the backend in force (`LOCKYARD_BACKEND`, else the lock directory). The checkout's
    repository is read once per store."""
    recent = _recent_store(repo_namespace)
    if recent is not None:
        return recent
    repo = canonical_repo_path(repo_namespace)
    explicit = namespace_from_env()
    spec = chosen_spec()
    if spec is not None and is_postgres_spec(spec):
        where = spec
    elif spec is not None and spec.strip() != FILE_WORD:
        where = os.path.abspath(spec)  # a lock directory named by the setting
    else:
        where = os.path.abspath(default_lock_dir())
    with _stores_guard:
        store = _stores.get((repo, explicit, where))
        if store is None:
            store = open_backend(repo, None if spec is None else where, namespace=explicit)
            _stores[(repo, explicit, where)] = store
    _note_recent(repo_namespace, store)
    return store


def _recent_key(repo_namespace: object) -> _RecentKey | None:
    """The `_recent` key of a call, or None when the call takes the full path (a relative or
    `~` repository path, or a relative lock directory: both depend on more than this)."""
    namespace, lock_dir, backend = _env_values()
    if lock_dir and not os.path.isabs(lock_dir):
        return None
    if backend:
        text = os.fsdecode(backend)
        if not (os.path.isabs(text) or text.strip() == FILE_WORD or is_postgres_spec(text)):
            return None  # a relative lock directory depends on the working directory
    if repo_namespace is None:
        return True, os.getcwd(), namespace, lock_dir, backend
    if type(repo_namespace) is str and repo_namespace.startswith("/"):
        return False, repo_namespace, namespace, lock_dir, backend
    return None


def _recent_store(repo_namespace: object) -> LockBackend | None:
    """The store of an earlier call with the same arguments and environment, while its
    directory is still the same one (a symlink in the path retargeted, or the directory
    replaced, sends the call down the full path)."""
    try:
        key = _recent_key(repo_namespace)
    except OSError:
        return None  # e.g. the working directory was removed: the full path says so
    if key is None:
        return None
    entry = _recent.get(key)
    if entry is None:
        return None
    store, device, inode = entry
    if key[0] or key[1] == store.root:
        # getcwd() names a directory canonically, and so does a path that is the store's
        # own checkout root: no symlink on the way to re-read. (Only moving the checkout
        # and leaving a symlink in its place could change where that path leads, and a
        # store whose checkout moved resolves no key any more in any case.)
        return store
    try:
        info = os.stat(key[1])
    except OSError:
        return None
    return store if (info.st_dev, info.st_ino) == (device, inode) else None


def _note_recent(repo_namespace: object, store: LockBackend) -> None:
    try:
        key = _recent_key(repo_namespace)
        if key is None:
            return
        info = os.stat(key[1])
    except OSError:
        return
    if len(_recent) >= _MAX_RECENT:
        _recent.clear()
    _recent[key] = (store, info.st_dev, info.st_ino)


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
