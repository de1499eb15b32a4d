"""The demo's verdict: figures of the run and the invariants it must keep.

`build_report` is pure (it takes what the recorder saw and what the files contain), so
every rule here is unit-tested without running agents.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ...core.deadlock_info import DeadlockInfo
from ...infra.lockstore import JournalQuery, LineReplay, Stats
from .._format import display_key, format_ms
from ..stats import render_stats, stats_payload
from .act_report import ActReport
from .recorder import Overlap, SessionRecorder
from .scenario import DeadlockGroup, Scenario


@dataclass(frozen=True)
class FileCheck:
    """How one file's content compares with the edits the run made."""

    file: str
    expected: int
    missing: tuple[str, ...] = ()
    duplicated: tuple[str, ...] = ()
    unexpected: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicated or self.unexpected)


def check_file(name: str, expected: Sequence[str], content: str, header: str) -> FileCheck:
    """Every expected line exactly once after the header, and nothing else."""
    body = content[len(header) :] if content.startswith(header) else content
    seen = Counter(line for line in body.splitlines() if line)
    wanted = Counter(expected)
    return FileCheck(
        file=name,
        expected=len(expected),
        missing=tuple(sorted(line for line in wanted if seen[line] == 0)),
        duplicated=tuple(sorted(line for line, n in seen.items() if n > 1 and line in wanted)),
        unexpected=tuple(sorted(line for line in seen if line not in wanted)),
    )


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile (`fraction` in 0..1); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class DeadlockRecord:
    cycle: str
    steps: tuple[str, ...]
    agents: tuple[str, ...]
    victim: str
    victim_waits_on: str
    why: str
    """Why the monitor chose that victim (its `victim_reason`)."""

    @classmethod
    def from_info(cls, info: DeadlockInfo, base: Path | None) -> DeadlockRecord:
        steps = tuple(
            f"{step.agent_id} waits for {display_key(step.lock_path, base)}"
            f" (held by {step.held_by})"
            for step in info.cycle
        )
        return cls(
            cycle=" -> ".join(steps),
            steps=steps,
            agents=tuple(info.agents),
            victim=info.victim,
            victim_waits_on=display_key(info.victim_waits_on, base),
            why=info.victim_reason or "",
        )


@dataclass(frozen=True)
class DemoReport:
    seed: int
    agents: int
    files: int
    seconds: float
    edits_done: int
    edits_expected: int
    files_edited: int
    waits: int
    handoffs: int
    handoffs_in_order: int
    handoff_median_s: float | None
    handoff_p99_s: float | None
    loop_turn_median_s: float | None
    floor_median_s: float | None
    """The backend's floor of a hand-off, measured in the same run (`floor` names it)."""
    deadlock_results: int
    deadlocks: tuple[DeadlockRecord, ...]
    file_checks: tuple[FileCheck, ...]
    overlaps: tuple[Overlap, ...]
    problems: tuple[str, ...] = field(default=())
    journal_stats: Stats | None = None
    """What the journal recorded of this run (`lockyard stats` over its window)."""
    journal_location: str = ""
    floor: str = ""
    server_grants: int | None = None
    """PostgreSQL: the waits the server granted, replayed from its journal (None elsewhere)."""
    server_grants_to_head: int | None = None
    """How many of them went to the head of the server's own line (FIFO: all of them)."""
    act: ActReport | None = None
    """The directory lock, the shared readers and the person's lock, as the journal shows them."""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def lost_edits(self) -> int:
        return sum(len(check.missing) for check in self.file_checks)

    @property
    def most_times_given_way(self) -> tuple[int, tuple[str, ...]]:
        """The most deadlocks one agent gave way in, and the agents that did (the victim
        policy's fairness: it ages an agent with each time it gave way)."""
        counts = Counter(record.victim for record in self.deadlocks)
        most = max(counts.values(), default=0)
        return most, tuple(sorted(agent for agent, n in counts.items() if n == most))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(replace(self, journal_stats=None))
        del data["journal_stats"], data["journal_location"]
        data["journal"] = (
            None
            if self.journal_stats is None
            else stats_payload(self.journal_stats, self.journal_location, JournalQuery())
        )
        data["ok"] = self.ok
        data["lost_edits"] = self.lost_edits
        most, agents = self.most_times_given_way
        data["most_times_given_way"] = {"times": most, "agents": list(agents)}
        data["file_checks"] = [asdict(check) | {"ok": check.ok} for check in self.file_checks]
        return data


def build_report(
    scenario: Scenario,
    recorder: SessionRecorder,
    contents: Mapping[str, str],
    *,
    seconds: float,
    leftover_locks: Sequence[str],
    base: Path | None,
    header_of: Mapping[str, str],
) -> DemoReport:
    expected = scenario.expected_lines()
    checks = tuple(
        check_file(name, expected[name], contents.get(name, ""), header_of[name])
        for name in scenario.files
    )
    deadlocks = tuple(DeadlockRecord.from_info(info, base) for info in recorder.deadlocks)
    problems = _problems(scenario, recorder, checks, deadlocks, leftover_locks, base)
    return DemoReport(
        seed=scenario.seed,
        agents=len(scenario.agents),
        files=len(scenario.files),
        seconds=seconds,
        edits_done=recorder.edits_done,
        edits_expected=scenario.total_edits,
        files_edited=sum(1 for name in scenario.files if expected[name]),
        waits=recorder.wait_events,
        handoffs=len(recorder.handoffs),
        handoffs_in_order=recorder.handoffs_in_order,
        handoff_median_s=percentile(recorder.handoffs, 0.5),
        handoff_p99_s=percentile(recorder.handoffs, 0.99),
        loop_turn_median_s=percentile(recorder.loop_turns, 0.5),
        floor_median_s=percentile(recorder.floor_cycles, 0.5),
        floor=recorder.floor_name,
        deadlock_results=sum(p.deadlock_results for p in recorder.agents.values()),
        deadlocks=deadlocks,
        file_checks=checks,
        overlaps=tuple(recorder.overlaps),
        problems=tuple(problems),
    )


def with_server_order(report: DemoReport, replay: LineReplay, base: Path | None) -> DemoReport:
    """The server's own order of each line (PostgreSQL's journal, replayed): its figures,
    and a broken invariant for each grant that went past the head of its line."""
    broken = tuple(
        f"{display_key(grant.file, base)}: the server granted it to {grant.agent} ahead of "
        f"{grant.line[0]}, first in its line (FIFO broken, per the server's journal)"
        for grant in replay.out_of_order
    )
    return replace(
        report,
        server_grants=len(replay.grants),
        server_grants_to_head=replay.to_head,
        problems=report.problems + broken,
    )


def _problems(
    scenario: Scenario,
    recorder: SessionRecorder,
    checks: Sequence[FileCheck],
    deadlocks: Sequence[DeadlockRecord],
    leftover_locks: Sequence[str],
    base: Path | None,
) -> list[str]:
    problems: list[str] = []
    for check in checks:
        problems += [f"{check.file}: lost edit {line!r}" for line in check.missing]
        problems += [f"{check.file}: edit {line!r} applied twice" for line in check.duplicated]
        problems += [f"{check.file}: unexpected line {line!r}" for line in check.unexpected]
    problems += [
        f"{display_key(o.lock_key, base)}: {o.agent_id} edited while {o.other_agent_id} did"
        for o in recorder.overlaps
    ]
    problems += [
        f"{p.agent_id} did not finish ({p.edits_done}/{p.edits_total} edits, {p.phase})"
        for p in recorder.agents.values()
        if p.edits_done != p.edits_total
    ]
    problems += [
        f"the scripted deadlock {group.name} ({', '.join(group.members)}) was not detected"
        for group in scenario.deadlock_groups
        if not _detected(group, deadlocks)
    ]
    problems += recorder.anomalies
    problems += [f"lock left behind after the run: {key}" for key in leftover_locks]
    return problems


def _detected(group: DeadlockGroup, deadlocks: Sequence[DeadlockRecord]) -> bool:
    return any(set(record.agents) == set(group.members) for record in deadlocks)


# --- rendering for people


def render_report(report: DemoReport, console: Console) -> None:
    figures = Table.grid(padding=(0, 2))
    figures.add_column(style="bold")
    figures.add_column()
    figures.add_row("agents", f"{report.agents} scripted agents over MCP, seed {report.seed}")
    figures.add_row(
        "edits",
        f"{report.edits_done}/{report.edits_expected} edits in "
        f"{report.files_edited}/{report.files} files, {report.seconds:.2f} s",
    )
    figures.add_row("waits", f"{report.waits} blocked lock requests")
    in_order = "all" if report.handoffs_in_order == report.handoffs else report.handoffs_in_order
    seen = "" if report.server_grants is None else " (as the lock events show it)"
    figures.add_row(
        "handoffs", f"{report.handoffs}, {in_order} to the file's longest-waiting agent{seen}"
    )
    if report.server_grants is not None:
        figures.add_row("", _server_order(report.server_grants, report.server_grants_to_head))
    figures.add_row(
        "handoff latency",
        f"median {format_ms(report.handoff_median_s)}, p99 {format_ms(report.handoff_p99_s)}"
        " (release to grant)",
    )
    baselines = _baselines(report)
    if baselines:
        figures.add_row("", baselines)
    figures.add_row(
        "deadlocks",
        f"{len(report.deadlocks)} detected and resolved softly: each victim's pending "
        f"lock_acquire returned the deadlock ({report.deadlock_results} results), "
        "its locks were released, it retried and finished",
    )
    most, agents = report.most_times_given_way
    if most:
        shown = ", ".join(agents[:3]) + (f" and {len(agents) - 3} more" if len(agents) > 3 else "")
        times = "once" if most == 1 else f"{most} times"
        figures.add_row("", f"the most one agent gave way: {times} ({shown})")
    if report.act is not None:
        _act_rows(figures, report.act)
    parts: list[Any] = [figures]
    for number, record in enumerate(report.deadlocks, start=1):
        line = Text(f" deadlock {number}: ", style="bold")
        line.append(f"victim {record.victim}", style="yellow")
        line.append(f" (gave up waiting for {record.victim_waits_on})")
        for step in record.steps:
            line.append(f"\n   {step}")
        parts.append(line)
    parts.append(_checks(report))
    style = "green" if report.ok else "red"
    title = "lockyard demo: all invariants held" if report.ok else "lockyard demo: INVARIANT BROKEN"
    console.print(Panel(Group(*parts), title=title, border_style=style, expand=False))
    if report.journal_stats is not None:
        console.print(
            "\nWhat the journal recorded of this run (`lockyard stats` shows it any time):",
            highlight=False,
        )
        render_stats(console, report.journal_stats, report.journal_location, top=5)


def _act_rows(figures: Table, act: ActReport) -> None:
    """The act on `tests/`, as its journal shows it (a part it lacks is a problem too)."""
    if act.readers_together_s is not None:
        readers = " and ".join(act.readers)
        figures.add_row(
            "shared",
            f"{readers} read {act.directory} together (mode shared) for "
            f"{_span(act.readers_together_s)}, while {act.writer} waited to write",
        )
    if act.writer_held_s is not None:
        figures.add_row(
            "directory",
            f"{act.writer} locked all of {act.directory} (its {act.files} files) in one "
            f"lock_acquire and edited them; held {_span(act.writer_held_s)}",
        )
    if act.person_held_s is not None:
        waited = (
            "took it at once"
            if act.person_waited_s is None
            else f"waited {_span(act.person_waited_s)} in line behind {act.writer}"
        )
        pid = "" if act.person_pid is None else f" (pid {act.person_pid})"
        figures.add_row(
            "a person",
            f"{act.person_command}{pid}: {waited}, ran it holding the lock, exit {act.person_exit}",
        )
        said = [line for line in act.person_said if line.startswith("waiting for ")]
        if said:
            figures.add_row("", f"it said: {said[0]}")


def _span(seconds: float) -> str:
    """A hold's length: milliseconds below a second, else seconds."""
    return format_ms(seconds) if seconds < 1 else f"{seconds:.2f} s"


def _server_order(grants: int, to_head: int | None) -> str:
    """The server's FIFO figure, from its journal (PostgreSQL)."""
    if grants == 0:
        return "the server's journal shows no granted wait"
    share = f"all {grants}" if to_head == grants else f"{to_head} of {grants}"
    return f"on the server (its journal): {share} granted waits went to the head of the line"


def _baselines(report: DemoReport) -> str:
    """The median handoff against two floors measured in the same run."""
    handoff = report.handoff_median_s
    if handoff is None:
        return ""
    parts = [
        f"{handoff / floor:.1f}x {what} ({format_ms(floor)})"
        for what, floor in (
            (report.floor, report.floor_median_s),
            ("the busy event loop's wake-up delay", report.loop_turn_median_s),
        )
        if floor
    ]
    return ("= " + ", ".join(parts) + ", measured in this run") if parts else ""


def _checks(report: DemoReport) -> Text:
    lines = Text()
    lost_ok = all(check.ok for check in report.file_checks)
    lines.append(_mark(lost_ok))
    lines.append(
        f" no edit lost: every expected line present exactly once in all "
        f"{len(report.file_checks)} files\n"
        if lost_ok
        else f" edits lost or duplicated ({report.lost_edits} lost)\n"
    )
    lines.append(_mark(not report.overlaps))
    lines.append(
        " no two holders overlapped\n"
        if not report.overlaps
        else f" {len(report.overlaps)} overlapping holders\n"
    )
    for problem in report.problems:
        lines.append("  ✗ ", style="red")
        lines.append(problem + "\n")
    lines.rstrip()
    return lines


def _mark(ok: bool) -> Text:
    return Text("✓", style="green") if ok else Text("✗", style="red")
