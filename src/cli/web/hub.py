"""The server's one reader of the store, shared by every open page.

One `BoardFeed` reads the store by push, whatever the number of pages open; each page's
event stream sends the latest board it has not sent yet. A page that reads slowly skips
boards (it gets the newest one next), so no page holds up another, and none holds up the
feed: the agents never wait for a viewer.
"""

from __future__ import annotations

import json

import anyio

from ..views.board import Board
from ..views.feed import BoardFeed


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
