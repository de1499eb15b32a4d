"""The journal, as the views read it: the records of a window, and new ones by push.

The journal is opened on the store the board feed opened (so both read one backend), read
in a worker thread (a window of a big journal takes a while), and followed with the
reader's own push (inotify on the lock directory, NOTIFY on PostgreSQL). A journal that
cannot be read costs the view its timeline and latest events, never its board.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

import anyio
import anyio.to_thread

from ...infra.lockstore import JournalQuery, JournalReader, JournalRecord, open_journal
from .feed import BoardFeed

log = logging.getLogger(__name__)

RETRY_SECONDS = 5.0


async def journal_of(feed: BoardFeed) -> JournalReader:
    """The journal of the store `feed` reads, once the feed has opened it."""
    store = await feed.opened()
    return await anyio.to_thread.run_sync(lambda: open_journal(store))


async def follow_records(
    feed: BoardFeed, backlog: int, on_problem: Callable[[str], None] | None = None
) -> AsyncIterator[JournalRecord]:
    """The last `backlog` records, then each new one, until cancelled; a journal that
    fails is opened again after RETRY_SECONDS (`on_problem` hears why)."""
    while True:
        try:
            journal = await journal_of(feed)
            try:
                async for record in journal.follow_async(JournalQuery.of(), backlog=backlog):
                    yield record
            finally:
                journal.close()
        except Exception as error:  # a view outlives a journal it cannot read
            log.warning("cannot follow the journal: %s", error)
            if on_problem is not None:
                on_problem(f"the journal cannot be read: {error}")
        backlog = 0  # what was shown stays shown
        await anyio.sleep(RETRY_SECONDS)
