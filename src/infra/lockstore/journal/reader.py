"""`JournalReader`: what `lockyard log`, `stats`, `top` and `web` read, on either backend.

Two readers implement it: `FileJournal` (a lock directory's segments) and `PgJournal` (the
PostgreSQL table); `open_journal` (lockyard.infra.lockstore) opens the one of a store or a
backend setting. Every reader is read-only and never takes a lock the lock path waits on:
a slow or stopped reader costs the agents nothing.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from typing import Protocol, runtime_checkable

from .query import EVERYTHING, JournalQuery
from .record import JournalRecord
from .summary import Stats


@runtime_checkable
class JournalReader(Protocol):
    @property
    def location(self) -> str:
        """Where the journal lives, fit to show a user (no password)."""
        ...

    def records(self, query: JournalQuery = EVERYTHING) -> Iterator[JournalRecord]:
        """Every matching record, oldest first (as written: concurrent writers' records
        may be a few microseconds out of time order)."""
        ...

    def latest(self, query: JournalQuery = EVERYTHING, limit: int = 50) -> list[JournalRecord]:
        """The last `limit` matching records, oldest first."""
        ...

    def stats(self, query: JournalQuery = EVERYTHING) -> Stats:
        """The figures of the matching records (fast for a time window alone: sealed
        stretches of the journal are summed from their summaries)."""
        ...

    def follow(
        self,
        query: JournalQuery = EVERYTHING,
        *,
        backlog: int = 0,
        stop: threading.Event | None = None,
    ) -> Iterator[JournalRecord]:
        """The last `backlog` matching records, then each new one as it is written (pushed:
        inotify, or NOTIFY), until `stop` is set (checked at least every second) or the
        iterator is closed. No record written after the backlog is missed."""
        ...

    def follow_async(
        self, query: JournalQuery = EVERYTHING, *, backlog: int = 0
    ) -> AsyncIterator[JournalRecord]:
        """`follow` for an event loop (asyncio or trio through anyio): cancel to stop."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> JournalReader: ...

    def __exit__(self, *exc_info: object) -> None: ...
