"""The live view of a demo run: who holds what, who waits on whom, and how far along it is.

`LiveView` is a rich renderable that rebuilds itself from the recorder on every refresh, so
the agents never talk to the screen and the screen never slows the agents.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from .._format import display_key
from .recorder import AgentProgress, Phase, SessionRecorder

PHASE_STYLES = {
    Phase.STARTING: "dim",
    Phase.LOCKING: "cyan",
    Phase.WAITING: "yellow",
    Phase.EDITING: "green",
    Phase.READING: "green",
    Phase.HOLDING: "cyan",
    Phase.IDLE: "dim",
    Phase.BACKING_OFF: "magenta",
    Phase.DONE: "bold green",
    Phase.FAILED: "bold red",
}


class LiveView:
    def __init__(self, recorder: SessionRecorder, repo: Path, title: str) -> None:
        self._recorder = recorder
        self._repo = repo
        self._title = title

    def __rich__(self) -> RenderableType:
        return Panel(
            Group(self._agents_table(), self._progress(), *self._deadlock_lines()),
            title=self._title,
            border_style="blue",
        )

    def _agents_table(self) -> Table:
        recorder = self._recorder
        holds: dict[str, list[str]] = defaultdict(list)
        for key, holders in recorder.holds.items():
            for agent in holders:
                shared = " (shared)" if len(holders) > 1 else ""
                holds[agent].append(self._name(key) + shared)
        waits: dict[str, list[str]] = defaultdict(list)
        for agent, key, holder in recorder.waits_for():
            waits[agent].append(f"{self._name(key)} ({holder or 'free'})")

        table = Table(expand=True, show_edge=False, pad_edge=False)
        table.add_column("agent", no_wrap=True)
        table.add_column("state", no_wrap=True)
        table.add_column("holds")
        table.add_column("waits for (held by)")
        table.add_column("edits", justify="right", no_wrap=True)
        for agent_id, progress in recorder.agents.items():
            table.add_row(
                agent_id,
                Text(progress.phase.value, style=PHASE_STYLES[progress.phase]),
                ", ".join(sorted(holds[agent_id])) or "-",
                Text(", ".join(waits[agent_id]) or _said_wait(progress) or "-", style="yellow"),
                f"{progress.edits_done}/{progress.edits_total}",
            )
        return table

    def _progress(self) -> Table:
        recorder = self._recorder
        row = Table.grid(padding=(0, 1), expand=True)
        row.add_column(ratio=1)
        row.add_column(no_wrap=True)
        row.add_row(
            ProgressBar(total=max(recorder.edits_total, 1), completed=recorder.edits_done),
            f"{recorder.edits_done}/{recorder.edits_total} edits · {recorder.wait_events} waits"
            f" · {len(recorder.handoffs)} handoffs · {len(recorder.deadlocks)} deadlocks",
        )
        return row

    def _deadlock_lines(self) -> list[Text]:
        lines = []
        for info in self._recorder.deadlocks[-3:]:
            cycle = " → ".join(
                f"{step.agent_id} waits {self._name(step.lock_path)}" for step in info.cycle
            )
            line = Text("deadlock: ", style="bold red")
            line.append(cycle)
            line.append(f"; victim {info.victim}", style="magenta")
            lines.append(line)
        return lines

    def _name(self, key: str) -> str:
        return display_key(key, self._repo)


def _said_wait(progress: AgentProgress) -> str:
    """What an agent outside this process (the person's `lockyard lock`) said it waits for:
    its waits reach the store, not this recorder."""
    return progress.note if progress.phase is Phase.WAITING else ""
