"""What a lock directory holds besides its journal: the tests' view for "no debris left"."""

from __future__ import annotations

import os

from lockyard.infra.lockstore.journal.files import JOURNAL_DIR


def lock_dir_entries(lock_dir: str | os.PathLike[str]) -> list[str]:
    """The lock directory's entries (locks, queues, holder cards, staging, the marks of
    directory and glob locks and the glob index) without the journal."""
    return [name for name in os.listdir(lock_dir) if name != JOURNAL_DIR]
