"""`lockyard top`: the Textual application.

The boards come by push (`BoardFeed`); the clock only re-draws ages from the last board.
Textual writes only the cells that changed, so nothing flickers, over ssh as well.
"""

from __future__ import annotations

import time
from collections import deque
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Input, Static

from ...infra.lockstore import JournalRecord
from ..views.board import Board, empty_board
from ..views.feed import BoardFeed
from ..views.journal_feed import follow_records
from .render import Filters, events_panel, headline, locks_table, waits_panel

WAIT_LINES = 4
EVENT_LINES = 3


class TopApp(App[None]):
    """Holders, queues, the wait-for edges and any cycle, live."""

    TITLE = "lockyard top"
    CSS = """
    Screen { layout: vertical; }
    #head { height: 2; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    #locks { height: 1fr; padding: 0 1; border-top: solid $primary; }
    #waits { height: auto; max-height: 5; padding: 0 1; border-top: solid $warning; }
    #events { height: auto; max-height: 4; padding: 0 1; border-top: solid $secondary; }
    #filter { display: none; height: 1; border: none; padding: 0 1; }
    #filter.shown { display: block; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("slash", "filter", "filter"),
        Binding("c", "contended", "waited-on only"),
        Binding("escape", "clear", "clear filter", show=False),
    ]

    def __init__(self, feed: BoardFeed, filters: Filters | None = None) -> None:
        super().__init__()
        self.feed = feed
        self.board: Board = empty_board("", "reading the lock store…")
        self.filters = filters or Filters()
        self.events: deque[JournalRecord] = deque(maxlen=EVENT_LINES)
        self.journal_problem = ""

    def compose(self) -> ComposeResult:
        yield Static(id="head")
        with VerticalScroll(id="locks"):
            yield Static(id="table")
        yield Static(id="waits")
        yield Static(id="events")
        yield Input(placeholder="show locks whose file or agent contains… (Enter)", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#locks").border_title = "holders and queues"
        self.query_one("#waits").border_title = "wait-for"
        self.query_one("#events").border_title = "latest events"
        self.redraw()
        self.run_worker(self._follow(), name="boards")
        self.run_worker(self._follow_journal(), name="journal")
        self.set_interval(1.0, self.redraw)  # ages only: the data comes by push

    async def _follow(self) -> None:
        async for board in self.feed.boards():
            self.board = board
            self.redraw()

    async def _follow_journal(self) -> None:
        def say(problem: str) -> None:
            self.journal_problem = problem
            self.redraw()

        async for record in follow_records(self.feed, EVENT_LINES, on_problem=say):
            self.journal_problem = ""
            self.events.append(record)
            self.redraw()

    def redraw(self) -> None:
        now = time.time()
        self.query_one("#head", Static).update(
            headline(self.board, self.feed.pushing, self.filters)
        )
        self.query_one("#table", Static).update(locks_table(self.board, self.filters, now))
        self.query_one("#waits", Static).update(
            waits_panel(self.board, self.filters, now, WAIT_LINES)
        )
        self.query_one("#events", Static).update(
            events_panel(list(self.events), EVENT_LINES, self.journal_problem)
        )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While the filter box has the focus, letters are typed into it, not keys."""
        return not (action in ("quit", "contended", "filter") and self._typing())

    def _typing(self) -> bool:
        return self.query_one("#filter", Input).has_class("shown")

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.value = self.filters.text
        box.focus()

    def action_contended(self) -> None:
        self.filters = Filters(self.filters.text, not self.filters.contended_only)
        self.redraw()

    def action_clear(self) -> None:
        box = self.query_one("#filter", Input)
        box.remove_class("shown")
        box.value = ""
        self.filters = Filters("", self.filters.contended_only)
        self.set_focus(None)
        self.redraw()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filters = Filters(event.value.strip(), self.filters.contended_only)
        self.redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.input.remove_class("shown")
        self.set_focus(None)
