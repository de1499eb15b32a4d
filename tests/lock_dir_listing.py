"""What a lock directory holds besides its journal: the tests' view for "no debris left"."""

from __future__ import annotations

import os

from lockyard.infra.lockstore.journal.files import JOURNAL_DIR
from lockyard.infra.lockstore.lockdir.glob_index import GLOBS
from lockyard.infra.lockstore.lockdir.scopes import MARKER


def lock_dir_entries(lock_dir: str | os.PathLike[str]) -> list[str]:
    """The lock directory's entries (locks, queues, holder cards, staging) without the journal
    and the directory and glob locks' marker and index, which the store keeps there on purpose."""
    return [name for name in os.listdir(lock_dir) if name not in (JOURNAL_DIR, MARKER, GLOBS)]
