"""What `lockyard top` draws from a board: pure functions from a board to rich renderables.

Ages are computed at draw time from the board's timestamps, so the view re-draws them each
second from the same board without reading the store again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from ...infra.lockstore import JournalRecord
from .._format import format_duration
from ..views.board import Board, CycleView, LockRow, WaitEdge

CYCLE_STYLE = "bold red"
WAIT_STYLE = "yellow"
DEAD_STYLE = "red"
SHARED_STYLE = "cyan"


@dataclass(frozen=True)
class Filters:
    """What the person asked to see: a text to match, and contended locks only."""

    text: str = ""
    contended_only: bool = False

    def keep(self, row: LockRow) -> bool:
        if self.contended_only and not row.queue:
            return False
        return not self.text or row.matches(self.text)

    def describe(self) -> str:
        parts = []
        if self.text:
            parts.append(f"filter {self.text!r}")
        if self.contended_only:
            parts.append("waited-on only")
        return ", ".join(parts)


def headline(board: Board, pushing: bool, filters: Filters) -> Text:
    """Two lines: how many hold, wait and deadlock, then where (cut short, never wrapped)."""
    counts = board.counts()
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{counts['held']} held", style="bold")
    text.append(f" · {counts['waiting']} waiting", style=WAIT_STYLE if counts["waiting"] else "")
    text.append(f" · {counts['agents']} agents")
    if counts["deadlocks"]:
        text.append(f" · {counts['deadlocks']} DEADLOCK", style=CYCLE_STYLE)
    text.append(" · push" if pushing else " · polling", style="dim")
    if filters.describe():
        text.append(f" · {filters.describe()}", style="cyan")
    text.append("\n")
    text.append(board.location, style="dim")
    return text


def locks_table(board: Board, filters: Filters, now: float) -> _LocksTable | Text:
    """Holders (age, fence) and each queue in arrival order; rows of a cycle in red."""
    rows = [row for row in board.locks if filters.keep(row)]
    if not rows:
        if board.note:
            return Text(board.note, style="dim")
        if board.locks:
            return Text(
                f"No lock to show ({filters.describe()}; {len(board.locks)} in all).", style="dim"
            )
        return Text("Nothing is held or awaited.", style="dim")
    cycle_agents, cycle_locks = board.in_cycle()
    victims = {cycle.victim for cycle in board.cycles}
    cells = [
        (
            Text(row.name, style=CYCLE_STYLE if row.name in cycle_locks else ""),
            _holder(row, cycle_agents),
            # With readers, the holder is the next writer: it holds nothing yet, and waits.
            "-" if row.readers or row.held_since is None else format_duration(now - row.held_since),
            "-" if row.fence is None else str(row.fence),
            _queue(row, now, cycle_agents, victims),
        )
        for row in rows
    ]
    return _LocksTable(cells)


class _LocksTable:
    """The locks' table, its columns sized when drawn: the width left beside held and fence
    goes to file, holder and queue, each up to what its longest text needs, shared out
    evenly among those that need more (so a long path does not squeeze a list of readers)."""

    def __init__(self, cells: list[tuple[Text, Text, str, str, Text]]) -> None:
        self._cells = cells

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        needs = [
            max(len(title), *(len(cell[column]) for cell in self._cells))
            for column, title in ((0, "file"), (1, "holder"), (4, "queue, in order"))
        ]
        free = options.max_width - 6 - 5 - 4 * 2  # held, fence, and the gaps between columns
        widths = _share(free, needs)
        table = Table(box=None, pad_edge=False, header_style="bold")
        table.add_column("file", width=widths[0], overflow="ellipsis", no_wrap=True)
        table.add_column("holder", width=widths[1], overflow="ellipsis", no_wrap=True)
        table.add_column("held", justify="right", no_wrap=True, width=6)
        table.add_column("fence", justify="right", no_wrap=True, width=5)
        table.add_column("queue, in order", width=widths[2], overflow="ellipsis", no_wrap=True)
        for cell in self._cells:
            table.add_row(*cell)
        yield table


def _share(free: int, needs: list[int]) -> list[int]:
    """`free` columns shared among texts needing `needs`: none gets more than it needs, what
    one does not need goes evenly to the others (at least 4 each), and what is left over to
    the last (the queue, which grows)."""
    widths = [0] * len(needs)
    left = sorted(range(len(needs)), key=lambda index: needs[index])
    for count in range(len(left), 0, -1):
        index = left.pop(0)
        widths[index] = min(needs[index], max(free // count, 4))
        free -= widths[index]
    widths[-1] += max(free, 0)
    return widths


def _holder(row: LockRow, cycle_agents: set[str]) -> Text:
    if row.readers:  # they hold it together, for reading
        text = Text("shared: ", style=SHARED_STYLE)
        for position, reader in enumerate(row.readers):
            if position:
                text.append(", ")
            text.append(reader, style=CYCLE_STYLE if reader in cycle_agents else "")
        return text
    if row.holder is None:
        return Text("unreadable" if row.problem else "free", style="dim")
    if row.liveness == "dead":
        return Text(f"{row.holder} (dead)", style=DEAD_STYLE)
    return Text(row.holder, style=CYCLE_STYLE if row.holder in cycle_agents else "")


def _queue(row: LockRow, now: float, cycle_agents: set[str], victims: set[str]) -> Text:
    text = Text()
    writer = row.holder if row.readers else None
    if writer is not None:  # first, holding the lock while the readers leave
        text.append(writer, style=CYCLE_STYLE if writer in cycle_agents else WAIT_STYLE)
        if writer in victims and writer in cycle_agents:
            text.append(" victim", style="reverse red")
        text.append(" next", style="bold")
        if row.held_since is not None:
            text.append(f" {format_duration(now - row.held_since)}", style="dim")
    for position, entry in enumerate(row.queue):
        if position or writer is not None:
            text.append(", ")
        style = CYCLE_STYLE if entry.agent_id in cycle_agents else WAIT_STYLE
        text.append(entry.agent_id, style="dim" if entry.dead else style)
        if entry.agent_id in victims and entry.agent_id in cycle_agents:
            text.append(" victim", style="reverse red")
        text.append(f" {format_duration(now - entry.since)}", style="dim")
    return text if row.queue or writer is not None else Text("-", style="dim")


def waits_panel(board: Board, filters: Filters, now: float, lines: int) -> Text:
    """The wait-for graph as lines: every cycle first (with its victim), then the other
    edges, longest wait first; at most `lines` lines."""
    text = Text()
    shown = 0
    for cycle in board.cycles:
        if shown >= lines:
            break
        if shown:
            text.append("\n")
        text.append_text(_cycle_line(cycle))
        shown += 1
    in_cycle = {(step.agent, step.lock) for cycle in board.cycles for step in cycle.steps}
    kept = {row.name for row in board.locks if filters.keep(row)}
    # A writer waiting for several readers is one wait: one line naming them all.
    waits: dict[tuple[str, str], list[WaitEdge]] = {}
    for edge in sorted(board.edges, key=lambda edge: edge.since):
        if (edge.agent, edge.lock) not in in_cycle and edge.lock in kept:
            waits.setdefault((edge.agent, edge.lock), []).append(edge)
    readers = {row.name: row.readers for row in board.locks if row.readers}
    for position, edges in enumerate(waits.values()):
        if shown >= lines:
            break
        if shown:
            text.append("\n")
        left = len(waits) - position
        if shown == lines - 1 and left > 1:
            text.append(f"… and {left} more waits", style="dim")
            break
        text.append_text(_wait_line(edges, readers.get(edges[0].lock, ()), now))
        shown += 1
    if not shown:
        text.append("no one waits", style="dim")
    return text


def _cycle_line(cycle: CycleView) -> Text:
    text = Text("DEADLOCK ", style="reverse bold red")
    for step in cycle.steps:
        text.append(f" {step.agent}", style=CYCLE_STYLE)
        text.append(f" → {step.lock} →", style="red")
    text.append(f" {cycle.steps[0].agent}", style=CYCLE_STYLE)
    text.append("; victim ")
    text.append(cycle.victim, style="reverse red")
    return text


def _wait_line(edges: list[WaitEdge], readers: tuple[str, ...], now: float) -> Text:
    """One agent's wait for one lock: held by its holder, or read by its readers."""
    first = edges[0]
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(first.agent, style=WAIT_STYLE)
    text.append(f" waits {format_duration(now - first.since)} for ")
    text.append(first.lock)
    text.append(", read by " if all(e.holder in readers for e in edges) else ", held by ")
    for position, edge in enumerate(edges):
        if position:
            text.append(", ")
        text.append(edge.holder, style="bold")
    return text


def events_panel(records: Sequence[JournalRecord], lines: int, problem: str = "") -> Text:
    """The latest journal records, newest last, one line each."""
    if problem:
        return Text(problem, style="yellow", no_wrap=True, overflow="ellipsis")
    if not records:
        return Text("no event in the journal yet", style="dim")
    text = Text(no_wrap=True, overflow="ellipsis")
    for position, record in enumerate(records[-lines:]):
        if position:
            text.append("\n")
        text.append(time.strftime("%H:%M:%S ", time.localtime(record.time)), style="dim")
        text.append(f"{record.kind:<16}", style=EVENT_STYLES.get(record.kind, ""))
        text.append(_event_words(record))
    return text


EVENT_STYLES = {"deadlock": CYCLE_STYLE, "denied": "magenta", "wait-begin": WAIT_STYLE}


def _event_words(record: JournalRecord) -> str:
    if record.kind == "deadlock":
        cycle = " → ".join(f"{step.agent} → {step.waits_on}" for step in record.cycle)
        return f"{cycle}; victim {record.victim or record.agent}"
    words = f"{record.agent} {record.file}"
    if record.kind == "hand-over" and record.other:
        words = f"{record.other} → {record.agent} {record.file}"
    if record.fence is not None:
        words += f" (fence {record.fence})"
    if record.waited is not None:
        words += f" after {format_duration(record.waited)}"
    if record.held is not None:
        words += f", held {format_duration(record.held)}"
    if record.outcome and record.outcome != "granted":
        words += f", {record.outcome}"
    if record.kind == "denied" and record.reason:
        words += f": {record.reason}"
    return words
