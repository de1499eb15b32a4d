"""A write a guard refused, in the journal: the one way the hooks' guards and a sandbox
host's guard check both record it. Standard library only (the hook process imports it)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Protocol

from .record import DENIED, JournalRecord

logger = logging.getLogger(__name__)


class DenialJournal(Protocol):
    """What journalling a denial needs of a store: its namespace, its lock keys, its journal."""

    @property
    def namespace(self) -> str: ...
    def canonicalize(self, filepath: str) -> str: ...
    def journal_write(self, record: JournalRecord) -> None: ...


def journal_denied_writes(
    store: DenialJournal, agent: str, guard: str, files: Iterable[str], reason: str
) -> None:
    """Journal that `guard` (write, shell, commit) refused `agent` a write: one record per
    file, keyed as the store keys it (a path the store refuses: as it was given), or one with
    no file when the guard could name none. Never raises: the refusal has reached the agent
    already, and does not wait on its record; a record that cannot be written is logged."""
    now = time.time()
    for name in list(files) or [""]:
        try:
            key = store.canonicalize(name) if name else ""
        except Exception:  # outside the repository, not a path: still worth seeing
            key = name
        record = JournalRecord(
            now, DENIED, store.namespace, agent, key, "", 0, "", guard=guard, reason=reason
        )
        try:
            store.journal_write(record)
        except Exception:
            logger.warning("a denied write of %s was not journalled", agent, exc_info=True)
            return
