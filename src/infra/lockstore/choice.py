"""Picking a lock backend from a setting: the one place that knows both.

- the lock directory (`lockyard.infra.lockstore.lockdir`): the embedded default, one machine;
- PostgreSQL (`lockyard.infra.lockstore.postgres`): agents on many hosts.

A backend spec is `postgresql://...` (or the word `postgresql` for libpq's environment), a
lock directory path, or `file` (the default lock directory). Without one, `LOCKYARD_BACKEND`
decides, else the lock directory (`LOCKYARD_LOCK_DIR` or the per-user default).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

from .postgres.dsn import BackendSpecError, is_postgres_spec, redact

if TYPE_CHECKING:  # `lockyard log` and `stats` read a journal: they load no store (pydantic)
    from .backend import LockBackend
    from .journal.reader import JournalReader

BACKEND_ENV: Final = "LOCKYARD_BACKEND"
FILE_WORD: Final = "file"

__all__ = [
    "BACKEND_ENV",
    "BackendSpecError",
    "chosen_spec",
    "describe_spec",
    "is_postgres_spec",
    "open_backend",
    "open_journal",
]


def chosen_spec(backend: str | os.PathLike[str] | None = None) -> str | None:
    """The spec in force: `backend`, else LOCKYARD_BACKEND, else None (the lock directory)."""
    if backend is not None:
        text = os.fspath(backend)
        if not text.strip():
            raise BackendSpecError(
                "the backend is blank: pass postgresql://..., a lock directory, or file"
            )
        return text
    from_env = os.environ.get(BACKEND_ENV, "")
    return from_env if from_env.strip() else None


def describe_spec(spec: str | None) -> str:
    """A spec as it may be shown to users (no password)."""
    return "the default lock directory" if spec is None else redact(spec)


def open_backend(
    repo_namespace: str | os.PathLike[str] | None = None,
    backend: str | os.PathLike[str] | None = None,
    *,
    lock_dir: str | os.PathLike[str] | None = None,
    namespace: str | None = None,
    allow_outside_repo: bool = False,
    read_only: bool = False,
) -> LockBackend:
    """A lock store for `repo_namespace` on the backend `backend` names (see the module doc).

    `lock_dir` is the older way to name a lock directory; it cannot be combined with a
    PostgreSQL backend. `namespace` names the repository explicitly (default:
    `LOCKYARD_NAMESPACE`, else the name derived from the repository). `read_only`: for
    inspecting (`lockyard status`): nothing is created or changed, and read rights are enough.
    """
    spec = chosen_spec(backend)
    if spec is not None and is_postgres_spec(spec):
        if lock_dir is not None:
            raise BackendSpecError(
                f"pass either a lock directory or the PostgreSQL backend {redact(spec)}, not both"
            )
        from .postgres import PgLockStore

        return PgLockStore(
            repo_namespace,
            spec,
            namespace=namespace,
            allow_outside_repo=allow_outside_repo,
            read_only=read_only,
        )
    if spec is not None and spec.strip() != FILE_WORD:
        if lock_dir is not None and os.fspath(lock_dir) != spec:
            raise BackendSpecError(f"pass either lock_dir={lock_dir!s} or backend={spec}, not both")
        lock_dir = spec
    from .lockdir.store import LockStore

    return LockStore(
        repo_namespace,
        lock_dir,
        namespace=namespace,
        allow_outside_repo=allow_outside_repo,
        read_only=read_only,
    )


def open_journal(
    source: LockBackend | str | os.PathLike[str] | None = None,
) -> JournalReader:
    """The journal of a store (of its backend: a lock directory's, or the PostgreSQL
    database's), or of the backend a spec names (as `open_backend` reads it: None means
    LOCKYARD_BACKEND, else the default lock directory). Read-only; close it when done."""
    if source is not None and not isinstance(source, (str, os.PathLike)):
        return _journal_of_store(source)
    spec = chosen_spec(source)
    if spec is not None and is_postgres_spec(spec):
        from .postgres import PgJournal

        return PgJournal(spec)
    # Loaded here, not at the top: a PostgreSQL journal's reader needs none of the lock
    # directory's journal modules (inotify, segments), and `lockyard log` pays for each import.
    from .journal.file_journal import FileJournal
    from .lockdir.disk import default_lock_dir

    if spec is None or spec.strip() == FILE_WORD:
        return FileJournal(default_lock_dir())
    return FileJournal(spec)


def _journal_of_store(store: LockBackend) -> JournalReader:
    from .lockdir.store import LockStore

    if isinstance(store, LockStore):
        from .journal.file_journal import FileJournal

        return FileJournal(store.lock_dir)
    spec = getattr(store, "spec", None)
    if spec is None:
        raise BackendSpecError(f"{store!r} keeps no journal lockyard can read")
    from .postgres import PgJournal

    return PgJournal(spec)
