"""The server's one reader of the store, shared by every open page.

One `BoardFeed` reads the store by push, whatever the number of pages open; each page's
event stream sends the latest board it has not sent yet. A page that reads slowly skips
boards (it gets the newest one next), so no page holds up another, and none holds up the
feed: the agents never wait for a viewer.
"""

from __future__ import annotations

import json
from typing import Any

import anyio

from ..views.board import Board
from ..views.feed import BoardFeed
from ..views.journal_feed import follow_records
from .timeline import item_of


class BoardHub:
    """The latest board (as the JSON a page receives) and its version."""

    def __init__(self) -> None:
        self.version = 0
        self.board_json = ""
        self.board: Board | None = None
        self._changed = anyio.Event()

    def publish(self, board: Board) -> None:
        self.board = board
        self.board_json = json.dumps(board.to_dict(), separators=(",", ":"))
        self.version += 1
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def after(self, version: int, max_wait: float) -> int:
        """Wait (at most `max_wait` s) until the version is past `version`; the version."""
        if self.version == version:
            with anyio.move_on_after(max_wait):
                await self._changed.wait()
        return self.version

    async def run(self, feed: BoardFeed) -> None:
        async for board in feed.boards():
            self.publish(board)


class JournalFanout:
    """The timeline items of the records written since the server started, numbered, for
    every page's event stream (the last KEEP; a page that falls further behind skips)."""

    KEEP = 5000
    CATCH_UP = 200
    """Items a newly opened stream starts with: what its timeline request may have missed."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.first = 0
        self.problem = ""
        self._changed = anyio.Event()

    @property
    def end(self) -> int:
        return self.first + len(self.items)

    def add(self, item: dict[str, Any]) -> None:
        self.items.append(item)
        if len(self.items) > 2 * self.KEEP:
            dropped = len(self.items) - self.KEEP
            del self.items[:dropped]
            self.first += dropped
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def since(self, position: int) -> tuple[list[dict[str, Any]], int]:
        start = max(position, self.first)
        return self.items[start - self.first :], self.end

    async def after(self, position: int, max_wait: float) -> None:
        if self.end == position:
            with anyio.move_on_after(max_wait):
                await self._changed.wait()

    async def run(self, feed: BoardFeed) -> None:
        def say(problem: str) -> None:
            self.problem = problem

        async for record in follow_records(feed, backlog=0, on_problem=say):
            self.problem = ""
            item = item_of(record)
            if item is not None:
                self.add(item)
