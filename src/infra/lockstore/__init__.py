"""The lock store: one `LockBackend` seam, and the two backends side by side behind it.

- `lockdir/`: the lock directory, the embedded default for agents on one machine: atomic
  directory renames, FIFO queues, liveness by process, push wake-ups (its process's wake
  hub, `lockdir/sleep.py`: in-process topics, doorbells, inotify, pidfds);
- `postgres/`: PostgreSQL, for agents on many hosts: locks owned by live database sessions,
  queues in tables, wake-ups by NOTIFY;
- beside them, what both share: the seam (`backend.py`), errors, records, liveness, lock keys
  and the wait limits (`checkout.py`, `paths.py`) and wakers (`wakeup.py`).
  `choice.py` opens the backend a setting names; `default_store.py` has the module-level
  functions (`try_lock`, ...) on the default lock directory;
- beside them too, though of the backends only the lock directory uses them, because parts
  outside the store use them as well: lockyard's one inotify binding (`inotify.py`: the
  lock directory's wake hub, the cross-process monitor, the IPC transport) and reading a file
  lockyard wrote without trusting it (`own_files.py`: lock records, victim notices), and
  publishing a file whole (`atomic_files.py`: the policy, journal summaries, session records,
  victim notices, the IPC folder's files).

This module is the store's one entrance: code outside `lockyard.infra.lockstore` imports
these names from here, never from the modules inside (an import-linter contract checks it),
so the modules inside can be split and renamed without touching their users. What only
PostgreSQL has comes from that backend's own entrance, `lockyard.infra.lockstore.postgres`.

The names below are loaded on first use: `paths`, `lockdir.disk` and `liveness` need only the
standard library, and the agent CLI hooks (one process per tool call) import just those,
without paying for the pydantic records the rest of the store uses.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not `typing`'s: importing typing costs the hooks' fast path time
if TYPE_CHECKING:
    from typing import Any

    from .atomic_files import ensure_private_dir, open_dir, write_atomic
    from .backend import LockBackend
    from .checkout import (
        NAMESPACE_ENV,
        Checkout,
        canonical_repo_path,
        namespace_from_env,
        open_checkout,
        validate_namespace,
    )
    from .choice import (
        BACKEND_ENV,
        FILE_WORD,
        BackendSpecError,
        chosen_spec,
        describe_spec,
        is_postgres_spec,
        open_backend,
        open_journal,
    )
    from .default_store import (
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
    from .errors import (
        BackendError,
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
    from .holds_graph import snapshot_of_namespace, waits_below, waits_for_reader
    from .inotify import (
        CHANGES,
        IN_CLOSE_WRITE,
        IN_CREATE,
        IN_DELETE,
        IN_DELETE_SELF,
        IN_IGNORED,
        IN_ISDIR,
        IN_MOVE_SELF,
        IN_MOVED_FROM,
        IN_MOVED_TO,
        IN_Q_OVERFLOW,
        Inotify,
        InotifyEvent,
        inotify_available,
    )
    from .journal.causes import mark_victim, operator_release, unmark_victim
    from .journal.denials import journal_denied_writes
    from .journal.file_journal import FileJournal
    from .journal.files import (
        JournalFiles,
        JournalSettingError,
        append_once,
        journal_enabled,
        journal_files,
    )
    from .journal.line_replay import LineGrant, LineReplay, replay_lines
    from .journal.query import BadQueryError, JournalQuery
    from .journal.reader import JournalReader
    from .journal.record import (
        JOURNAL_KINDS,
        CycleStep,
        JournalRecord,
        JournalStep,
        deadlock_record,
    )
    from .journal.summary import AgentFigures, FileFigures, Stats
    from .liveness import (
        Liveness,
        ProcessIdentity,
        boottime_offset_ticks,
        current_process,
        liveness_of,
        new_token,
    )
    from .lockdir.agents import pending_reason, stamp_activity
    from .lockdir.disk import (
        CARD_SUFFIX,
        LOCK_SUFFIX,
        QUEUE_SUFFIX,
        SHARED_SUFFIX,
        LockDir,
        default_lock_dir,
        read_record,
    )
    from .lockdir.glob_index import globs_over
    from .lockdir.location import default_lock_dir_path
    from .lockdir.pending_scopes import any_pending, pending_requests
    from .lockdir.sleep import process_hub
    from .lockdir.store import LockStore
    from .modes import EXCLUSIVE, SHARED, LockMode, validate_mode
    from .off_loop import in_worker, store_call, waits_on_server
    from .own_files import NotOwnFileError, read_own_file
    from .paths import (
        MAX_TIMEOUT_SECONDS,
        lock_name,
        validate_agent_id,
        validate_poll_interval,
        validate_timeout,
    )
    from .records import (
        HolderRecord,
        LockInfo,
        LostLock,
        Reclamation,
        StoreSnapshot,
        WaiterRecord,
        decode_holder,
        encode_holder,
        shared_node,
    )
    from .scope_keys import (
        directory_ancestors,
        is_above,
        is_directory_key,
        is_glob_key,
        overlaps,
        places_above,
    )
    from .wakeup import Waker

_HOMES = {
    "LockBackend": "backend",
    "BACKEND_ENV": "choice",
    "FILE_WORD": "choice",
    "BackendSpecError": "choice",
    "chosen_spec": "choice",
    "describe_spec": "choice",
    "is_postgres_spec": "choice",
    "open_backend": "choice",
    "open_journal": "choice",
    "FileJournal": "journal.file_journal",
    "JournalFiles": "journal.files",
    "JournalSettingError": "journal.files",
    "append_once": "journal.files",
    "journal_enabled": "journal.files",
    "journal_files": "journal.files",
    "LineGrant": "journal.line_replay",
    "LineReplay": "journal.line_replay",
    "replay_lines": "journal.line_replay",
    "BadQueryError": "journal.query",
    "JournalQuery": "journal.query",
    "JournalReader": "journal.reader",
    "CycleStep": "journal.record",
    "JOURNAL_KINDS": "journal.record",
    "JournalStep": "journal.record",
    "deadlock_record": "journal.record",
    "journal_denied_writes": "journal.denials",
    "mark_victim": "journal.causes",
    "operator_release": "journal.causes",
    "unmark_victim": "journal.causes",
    "JournalRecord": "journal.record",
    "AgentFigures": "journal.summary",
    "FileFigures": "journal.summary",
    "Stats": "journal.summary",
    "canonicalize_path": "default_store",
    "cleanup_agent_locks": "default_store",
    "get_lock_holder": "default_store",
    "get_store": "default_store",
    "is_locked": "default_store",
    "list_locks": "default_store",
    "release_lock": "default_store",
    "try_lock": "default_store",
    "wait_for_lock": "default_store",
    "wait_for_lock_async": "default_store",
    "BackendError": "errors",
    "CorruptRecordError": "errors",
    "InvalidAgentIdError": "errors",
    "InvalidNamespaceError": "errors",
    "InvalidPathError": "errors",
    "InvalidTimeoutError": "errors",
    "LockDirError": "errors",
    "LockDirFullError": "errors",
    "LockStoreError": "errors",
    "PathOutsideRepoError": "errors",
    "EXCLUSIVE": "modes",
    "SHARED": "modes",
    "LockMode": "modes",
    "validate_mode": "modes",
    "snapshot_of_namespace": "holds_graph",
    "waits_below": "holds_graph",
    "waits_for_reader": "holds_graph",
    "directory_ancestors": "scope_keys",
    "is_above": "scope_keys",
    "is_directory_key": "scope_keys",
    "is_glob_key": "scope_keys",
    "globs_over": "lockdir.glob_index",
    "any_pending": "lockdir.pending_scopes",
    "pending_requests": "lockdir.pending_scopes",
    "places_above": "scope_keys",
    "overlaps": "scope_keys",
    "shared_node": "records",
    "SHARED_SUFFIX": "lockdir.disk",
    "read_record": "lockdir.disk",
    "NAMESPACE_ENV": "checkout",
    "Checkout": "checkout",
    "canonical_repo_path": "checkout",
    "namespace_from_env": "checkout",
    "open_checkout": "checkout",
    "validate_namespace": "checkout",
    "CHANGES": "inotify",
    "IN_CLOSE_WRITE": "inotify",
    "IN_CREATE": "inotify",
    "IN_DELETE": "inotify",
    "IN_DELETE_SELF": "inotify",
    "IN_IGNORED": "inotify",
    "IN_ISDIR": "inotify",
    "IN_MOVE_SELF": "inotify",
    "IN_MOVED_FROM": "inotify",
    "IN_MOVED_TO": "inotify",
    "IN_Q_OVERFLOW": "inotify",
    "Inotify": "inotify",
    "InotifyEvent": "inotify",
    "inotify_available": "inotify",
    "Liveness": "liveness",
    "ProcessIdentity": "liveness",
    "boottime_offset_ticks": "liveness",
    "current_process": "liveness",
    "liveness_of": "liveness",
    "new_token": "liveness",
    "stamp_activity": "lockdir.agents",
    "pending_reason": "lockdir.agents",
    "LockDir": "lockdir.disk",
    "CARD_SUFFIX": "lockdir.disk",
    "LOCK_SUFFIX": "lockdir.disk",
    "QUEUE_SUFFIX": "lockdir.disk",
    "default_lock_dir": "lockdir.disk",
    "default_lock_dir_path": "lockdir.location",
    "in_worker": "off_loop",
    "store_call": "off_loop",
    "waits_on_server": "off_loop",
    "NotOwnFileError": "own_files",
    "ensure_private_dir": "atomic_files",
    "open_dir": "atomic_files",
    "write_atomic": "atomic_files",
    "read_own_file": "own_files",
    "lock_name": "paths",
    "validate_agent_id": "paths",
    "HolderRecord": "records",
    "LockInfo": "records",
    "LostLock": "records",
    "Reclamation": "records",
    "StoreSnapshot": "records",
    "WaiterRecord": "records",
    "decode_holder": "records",
    "encode_holder": "records",
    "LockStore": "lockdir.store",
    "MAX_TIMEOUT_SECONDS": "paths",
    "validate_poll_interval": "paths",
    "validate_timeout": "paths",
    "Waker": "wakeup",
    "process_hub": "lockdir.sleep",
}

__all__ = [
    "BACKEND_ENV",
    "CARD_SUFFIX",
    "CHANGES",
    "EXCLUSIVE",
    "FILE_WORD",
    "IN_CLOSE_WRITE",
    "IN_CREATE",
    "IN_DELETE",
    "IN_DELETE_SELF",
    "IN_IGNORED",
    "IN_ISDIR",
    "IN_MOVED_FROM",
    "IN_MOVED_TO",
    "IN_MOVE_SELF",
    "IN_Q_OVERFLOW",
    "JOURNAL_KINDS",
    "LOCK_SUFFIX",
    "MAX_TIMEOUT_SECONDS",
    "NAMESPACE_ENV",
    "QUEUE_SUFFIX",
    "SHARED",
    "SHARED_SUFFIX",
    "AgentFigures",
    "BackendError",
    "BackendSpecError",
    "BadQueryError",
    "Checkout",
    "CorruptRecordError",
    "CycleStep",
    "FileFigures",
    "FileJournal",
    "HolderRecord",
    "Inotify",
    "InotifyEvent",
    "InvalidAgentIdError",
    "InvalidNamespaceError",
    "InvalidPathError",
    "InvalidTimeoutError",
    "JournalFiles",
    "JournalQuery",
    "JournalReader",
    "JournalRecord",
    "JournalSettingError",
    "JournalStep",
    "LineGrant",
    "LineReplay",
    "Liveness",
    "LockBackend",
    "LockDir",
    "LockDirError",
    "LockDirFullError",
    "LockInfo",
    "LockMode",
    "LockStore",
    "LockStoreError",
    "LostLock",
    "NotOwnFileError",
    "PathOutsideRepoError",
    "ProcessIdentity",
    "Reclamation",
    "Stats",
    "StoreSnapshot",
    "WaiterRecord",
    "Waker",
    "any_pending",
    "append_once",
    "boottime_offset_ticks",
    "canonical_repo_path",
    "canonicalize_path",
    "chosen_spec",
    "cleanup_agent_locks",
    "current_process",
    "deadlock_record",
    "decode_holder",
    "default_lock_dir",
    "default_lock_dir_path",
    "describe_spec",
    "directory_ancestors",
    "encode_holder",
    "ensure_private_dir",
    "get_lock_holder",
    "get_store",
    "globs_over",
    "in_worker",
    "inotify_available",
    "is_above",
    "is_directory_key",
    "is_glob_key",
    "is_locked",
    "is_postgres_spec",
    "journal_denied_writes",
    "journal_enabled",
    "journal_files",
    "list_locks",
    "liveness_of",
    "lock_name",
    "mark_victim",
    "namespace_from_env",
    "new_token",
    "open_backend",
    "open_checkout",
    "open_dir",
    "open_journal",
    "operator_release",
    "overlaps",
    "pending_reason",
    "pending_requests",
    "places_above",
    "process_hub",
    "read_own_file",
    "read_record",
    "release_lock",
    "replay_lines",
    "shared_node",
    "snapshot_of_namespace",
    "stamp_activity",
    "store_call",
    "try_lock",
    "unmark_victim",
    "validate_agent_id",
    "validate_mode",
    "validate_namespace",
    "validate_poll_interval",
    "validate_timeout",
    "wait_for_lock",
    "wait_for_lock_async",
    "waits_below",
    "waits_for_reader",
    "waits_on_server",
    "write_atomic",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value
