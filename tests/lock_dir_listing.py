"""What a lock directory holds besides its journal: the tests' view for "no debris left"."""

from __future__ import annotations

import os

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.backend import LockBackend
from lockyard.infra.lockstore.journal.files import JOURNAL_DIR
from lockyard.infra.lockstore.postgres.store import PgLockStore


def lock_dir_entries(lock_dir: str | os.PathLike[str]) -> list[str]:
    """The lock directory's entries (locks, queues, holder cards, staging, the marks of
    directory and glob locks and the glob index) without the journal."""
    return [name for name in os.listdir(lock_dir) if name != JOURNAL_DIR]


def leftovers(store: LockBackend) -> list[str]:
    """What a store keeps after every lock was given back: entries of the lock directory (its
    holder cards aside), or PostgreSQL's listed locks and glob index entries."""
    if isinstance(store, LockStore):
        return [entry for entry in lock_dir_entries(store.lock_dir) if not entry.endswith(".card")]
    assert isinstance(store, PgLockStore)
    index = store.session.run(
        lambda conn, me: conn.execute(f'SELECT key FROM "{store.schema}".globs').fetchall()
    )
    return [info.lock_path for info in store.list_locks()] + [f"index: {k}" for (k,) in index]
