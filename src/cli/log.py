"""`lockyard log`: the journal's records, filtered, newest last; `--follow` for live ones."""

from __future__ import annotations

import json
import sys
from datetime import date, datetime
from pathlib import Path
from typing import Annotated, TextIO

import typer

from ..infra.lockstore import JournalRecord
from ._errors import EXIT_CODES_HELP, reports_errors
from ._format import format_duration, quiet_library_logs
from ._journal import (
    KIND_HELP,
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

HELP = """Show what happened to the locks: every grant, wait, release, hand-over, reclaim,
operator release, denied write and deadlock, from the journal (docs/observability.md).

Shows the last 50 matching records (-n N, or --all); --follow then prints each new one as
it is written. Filters combine: --agent and --file (a glob: `src/*.py`, `*` crosses `/`)
match any record that names them, a deadlock's whole cycle included.
"""

KIND_WIDTH = 16


def register(app: typer.Typer) -> None:
    app.command("log", help=HELP, epilog=EXIT_CODES_HELP)(log)


@reports_errors
def log(
    agent: Annotated[
        list[str] | None,
        typer.Option("--agent", metavar="ID", help="Only records naming this agent (repeatable)."),
    ] = None,
    file: Annotated[
        list[str] | None,
        typer.Option(
            "--file", metavar="GLOB", help="Only records naming a matching file (repeatable)."
        ),
    ] = None,
    kind: Annotated[
        list[str] | None, typer.Option("--kind", metavar="KIND", help=KIND_HELP)
    ] = None,
    namespace: Annotated[
        list[str] | None,
        typer.Option("--namespace", metavar="NS", help="Only this repository namespace."),
    ] = None,
    since: SinceOption = None,
    until: UntilOption = None,
    lines: Annotated[
        int, typer.Option("-n", "--lines", metavar="N", min=0, help="How many of the last.")
    ] = 50,
    all_records: Annotated[bool, flag("--all", help="Every matching record.")] = False,
    follow: Annotated[
        bool, flag("--follow", "-f", help="Then print each new record as it is written.")
    ] = False,
    json_output: Annotated[
        bool, flag("--json", help="One JSON object a line (the journal's own fields).")
    ] = False,
    lock_dir: Annotated[Path | None, lock_dir_option(LOCK_DIR_HELP)] = None,
    backend: Annotated[str | None, backend_option()] = None,
) -> None:
    quiet_library_logs()
    query = build_query(
        agents=agent, files=file, kinds=kind, namespaces=namespace, since=since, until=until
    )
    try:
        journal = open_command_journal(lock_dir, backend)
    except JournalNotCreatedError as missing:
        if follow:
            raise
        if not json_output:
            print(f"No records: {missing}.")
        return
    printer = _Printer(sys.stdout, json_output)
    try:
        with store_errors():
            if follow:
                for record in journal.follow(query, backlog=lines):
                    printer.print(record)
            elif all_records:
                for record in journal.records(query):
                    printer.print(record)
            else:
                for record in journal.latest(query, lines):
                    printer.print(record)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # `lockyard log | head`
        sys.stderr.close()
    finally:
        journal.close()
    if not printer.printed and not json_output:
        print(f"No matching records in {journal.location}.")


class _Printer:
    """One line per record: time, kind, agent, file, and what happened."""

    def __init__(self, out: TextIO, json_output: bool) -> None:
        self.out = out
        self.json_output = json_output
        self.printed = 0
        self.day: date | None = None

    def print(self, record: JournalRecord) -> None:
        self.printed += 1
        if self.json_output:
            self.out.write(json.dumps(record.to_dict(), sort_keys=False) + "\n")
            self.out.flush()
            return
        day = datetime.fromtimestamp(record.time).date()
        if day != self.day:
            self.day = day
            self.out.write(f"-- {day.isoformat()} --\n")
        self.out.write(line_of(record) + "\n")
        self.out.flush()


def line_of(record: JournalRecord) -> str:
    """`14:02:11.532 wait-end         codex-4242 src/models.py: granted after 3m58s`."""
    where = f" {shown(record.file)}" if record.file and record.kind != "deadlock" else ""
    what = detail(record)
    return f"{clock(record.time)} {record.kind:<{KIND_WIDTH}} {shown(record.agent)}{where}" + (
        f": {what}" if what else ""
    )


def detail(record: JournalRecord) -> str:
    kind = record.kind
    if kind in ("grant", "hand-over"):
        # A read (`shared`) or a read made exclusive (`upgrade`); the releaser it came from,
        # where the backend knows it (PostgreSQL's records name it, the lock directory's
        # waiter never learns it); the fencing number, where the backend has them.
        parts = [shown(record.outcome)] if record.outcome else []
        if kind == "hand-over" and record.other:
            parts.append(f"from {shown(record.other)}")
        if record.fence is not None:
            parts.append(f"fence {record.fence}")
        return ", ".join(parts)
    if kind == "wait-begin":
        return "queued"
    if kind == "wait-end":
        return f"{shown(record.outcome or '?')} after {_duration(record.waited)}"
    if kind == "release":
        return f"held {_duration(record.held)}"
    if kind == "reclaim":
        return f"held {_duration(record.held)}; {shown(record.reason or 'its holder is dead')}"
    if kind == "pass-over":
        return shown(record.reason or "passed over")
    if kind == "operator-release":
        return f"held {_duration(record.held)}; by {shown(record.other or 'an operator')}"
    if kind == "denied":
        return f"{shown(record.guard or '?')} guard: {shown(record.reason or '')}"
    if kind == "deadlock":
        return deadlock_text(record)
    return shown(record.reason or "")


def deadlock_text(record: JournalRecord) -> str:
    """`codex-4242 -> src/api.py (claude-17) -> src/models.py (codex-4242); victim ...`."""
    steps = " -> ".join(
        f"{shown(step.agent)} waits for {shown(step.waits_on)}" for step in record.cycle
    )
    released = ", ".join(shown(name) for name in record.released) or "nothing"
    cost = sum(record.costs.values())
    return (
        f"cycle {steps}; victim {shown(record.victim or record.agent)} released {released}; "
        f"cost {_duration(cost)} of waiting"
    )


def _duration(seconds: float | None) -> str:
    return "?" if seconds is None else format_duration(seconds)
