"""`lockyard stats`: hot files, who held and who waited, and what deadlocks cost, from the
journal (so they survive every restart)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..infra.lockstore import JournalQuery, Stats
from ._errors import EXIT_CODES_HELP, reports_errors
from ._format import format_duration, print_json, quiet_library_logs, table_console
from ._journal import (
    JournalNotCreatedError,
    SinceOption,
    UntilOption,
    build_query,
    clock,
    open_command_journal,
    shown,
)
from ._lockdir import LOCK_DIR_HELP, store_errors
from ._options import backend_option, flag, lock_dir_option

if TYPE_CHECKING:  # rich loads in ~0.1 s: imported when there is something to render
    from rich.console import Console
    from rich.table import Table

HELP = """Show where the agents' time went, from the journal (docs/observability.md): per
file, how often it was held, the waits for it (total, longest) and how contended it is (the
share of its grants that had to wait); per agent, the time it held locks and the time it
waited; every deadlock, and what it cost (the waiting of every agent of its cycle).

--since/--until pick a time window; --agent and --file pick the rows shown.
"""


LEGEND = "  cont.: the share of its grants that had to wait; t/o: waits that timed out"


def register(app: typer.Typer) -> None:
    app.command("stats", help=HELP, epilog=EXIT_CODES_HELP)(stats)


@reports_errors
def stats(
    since: SinceOption = None,
    until: UntilOption = None,
    agent: Annotated[
        list[str] | None,
        typer.Option("--agent", metavar="ID", help="Only these agents' rows (repeatable)."),
    ] = None,
    file: Annotated[
        list[str] | None,
        typer.Option("--file", metavar="GLOB", help="Only matching files' rows (repeatable)."),
    ] = None,
    top: Annotated[
        int, typer.Option("--top", metavar="N", min=1, help="Rows per table (hottest first).")
    ] = 10,
    json_output: Annotated[
        bool, flag("--json", help="Print one JSON document (every row, not only the top).")
    ] = False,
    lock_dir: Annotated[Path | None, lock_dir_option(LOCK_DIR_HELP)] = None,
    backend: Annotated[str | None, backend_option()] = None,
) -> None:
    quiet_library_logs()
    window = build_query(since=since, until=until)
    rows = build_query(agents=agent, files=file)  # checked like the window, applied to rows
    try:
        journal = open_command_journal(lock_dir, backend)
    except JournalNotCreatedError as missing:
        figures, location = Stats(), str(missing.where)
    else:
        try:
            with store_errors():
                figures = journal.stats(window)
            location = journal.location
        finally:
            journal.close()
    figures = rows_of(figures, rows)
    if json_output:
        print_json(stats_payload(figures, location, window))
        return
    render_stats(table_console(), figures, location, top)


def rows_of(figures: Stats, rows: JournalQuery) -> Stats:
    """Only the files and agents `rows` names (all when it names none); deadlocks that
    involve them."""
    if not rows.narrows_records:
        return figures
    kept = Stats(
        records=figures.records, first=figures.first, last=figures.last, kinds=figures.kinds
    )
    probe = rows.files
    kept.files = {
        name: f for name, f in figures.files.items() if not probe or rows.file_matches(name)
    }
    kept.agents = {
        name: a for name, a in figures.agents.items() if not rows.agents or name in rows.agents
    }
    kept.deadlocks = [
        record
        for record in figures.deadlocks
        if (not rows.agents or record.agents() & rows.agents)
        and (not probe or any(rows.file_matches(name) for name in record.files()))
    ]
    if rows.agents and not probe:
        kept.files = {}  # per-file figures are of every agent: not shown for one agent alone
    if probe and not rows.agents:
        kept.agents = {}
    return kept


def stats_payload(figures: Stats, location: str, window: JournalQuery) -> dict[str, Any]:
    payload = figures.to_dict()
    for name, row in payload["files"].items():
        row["contention"] = figures.files[name].contention
    payload["deadlock_cost"] = figures.deadlock_cost
    payload["journal"] = location
    payload["since"] = window.since
    payload["until"] = window.until
    return payload


def render_stats(console: Console, figures: Stats, location: str, top: int) -> None:
    """The journal's figures for a person: lines and tables that fit the console's width
    (80 columns included) without a sentence broken across lines."""
    if figures.records == 0:
        console.print(f"No records in the journal {location} for this window.")
        return
    assert figures.first is not None
    assert figures.last is not None
    console.print(f"Journal {location}", overflow="fold", highlight=False)
    console.print(
        f"  {figures.records:,} records, {clock(figures.first, with_date=True)[:-4]} to "
        f"{clock(figures.last)[:-4]} ({format_duration(figures.last - figures.first)})",
        highlight=False,
    )
    tables: list[Table] = []
    notes: list[list[str]] = []
    # Files only a deadlock names (no hold, wait or denial) are in the deadlock lines.
    files = {n: f for n, f in figures.files.items() if f.holds or f.waits or f.denied}
    if files:
        hot = sorted(files.items(), key=lambda kv: (-kv[1].waited, -kv[1].holds, kv[0]))
        table = _table("Hot files (most waited for first)")
        names = [shown(name) for name, _row in hot[:top]]
        table.add_column("file", overflow="fold", min_width=min(28, max(map(len, names))))
        for column in ("holds", "waits", "waited", "longest", "cont.", "t/o", "denied"):
            table.add_column(column, justify="right", no_wrap=True)
        for name, row in zip(names, (row for _name, row in hot[:top]), strict=True):
            table.add_row(
                name, str(row.holds), str(row.waits), format_duration(row.waited),
                format_duration(row.longest_wait), f"{row.contention:.0%}", str(row.timeouts),
                str(row.denied),
            )  # fmt: skip
        tables.append(table)
        notes.append(
            ["  cont.: the share of its grants that had to wait; t/o: waits that timed out"]
        )
        notes[-1] += _more(len(hot), top, "files")
    if figures.agents:
        busy = sorted(figures.agents.items(), key=lambda kv: (-kv[1].waited, -kv[1].held, kv[0]))
        table = _table("Agents (most waiting first)")
        table.add_column("agent", overflow="fold")
        for column in ("holds", "held", "waits", "waited", "longest", "denied", "victim"):
            table.add_column(column, justify="right", no_wrap=True)
        for name, agent_row in busy[:top]:
            table.add_row(
                shown(name), str(agent_row.holds), format_duration(agent_row.held),
                str(agent_row.waits), format_duration(agent_row.waited),
                format_duration(agent_row.longest_wait), str(agent_row.denied),
                str(agent_row.victim),
            )  # fmt: skip
        tables.append(table)
        notes.append(_more(len(busy), top, "agents"))
    _one_width(console, tables)
    for table, lines in zip(tables, notes, strict=True):
        console.print()
        console.print(table)
        for line in lines:
            console.print(line, style="dim" if line == LEGEND else None)
    console.print()
    _render_deadlocks(console, figures, top)


def _table(title: str) -> Table:
    """A table that fits 80 columns: a rule under the header, no borders between cells."""
    from rich import box
    from rich.table import Table

    return Table(
        title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD,
        padding=(0, 1), show_edge=False,
    )  # fmt: skip


def _one_width(console: Console, tables: list[Table]) -> None:
    """Draw `tables` one width, the widest one's (within the console's): one under the
    other, they read as one report."""
    from rich.measure import Measurement

    if not tables:
        return
    widest = max(Measurement.get(console, console.options, table).maximum for table in tables)
    for table in tables:
        table.width = min(widest, console.width)


def _render_deadlocks(console: Console, figures: Stats, top: int) -> None:
    if not figures.deadlocks:
        console.print("Deadlocks: none.")
        return
    from rich.table import Table

    console.print(
        f"Deadlocks: {len(figures.deadlocks)}, costing {format_duration(figures.deadlock_cost)}"
        " of waiting (each cycle's agents, until it broke)",
        highlight=False,
    )
    # One deadlock a row: its time, then its cycle and cost, wrapped under themselves.
    rows = Table.grid(padding=(0, 1))
    rows.add_column(no_wrap=True)
    rows.add_column(overflow="fold")
    for record in sorted(figures.deadlocks, key=lambda r: r.time)[-top:]:
        agents = [shown(step.agent) for step in record.cycle]
        cycle = " -> ".join([*agents, agents[0]] if agents else ["?"])
        costs = ", ".join(
            f"{shown(agent)} {format_duration(seconds)}" for agent, seconds in record.costs.items()
        )
        released = ", ".join(shown(name) for name in record.released) or "nothing"
        rows.add_row(
            f" {clock(record.time)[:-4]}",
            f"{cycle}; victim {shown(record.victim or record.agent)}\nreleased {released};"
            f" cost {format_duration(sum(record.costs.values()))} ({costs})",
        )
    console.print(rows, highlight=False)


def _more(count: int, top: int, what: str) -> list[str]:
    if count > top:
        return [f"  ... and {count - top} more {what} (--top N, or --json for all)"]
    return []
