"""Run the demo session: a generated repo, one lock store, one monitor, N agents over MCP.

Everything is real except the agents' brains: the lock store on a real lock directory, the
deadlock monitor, and each agent's own lock tools, reached through the MCP protocol: the JSON
lines an agent CLI exchanges with `lockyard serve`, over pipes, answered by the same code
(`transports/stdio/mcp_client.py`). Nothing here needs a network, an API key, or the mcp
package (which only `lockyard[sdk]` installs).
"""

from __future__ import annotations

import functools
import logging
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
from rich.console import Console
from rich.live import Live

from ...core.events import LockEvent
from ...infra.agent_runtime import LockCoordinator
from ...infra.lockstore import (
    JournalQuery,
    JournalRecord,
    default_lock_dir,
    open_journal,
    replay_lines,
    store_call,
)
from ...infra.tools.lock_tools import LockTools
from ...infra.transports.stdio.mcp_client import McpLineClient, connected
from ...infra.transports.stdio.server import StdioToolSession
from .._errors import CliError, ExitCode
from .act_report import act_report
from .agent import Cue, Pacing, Rendezvous, ScriptedAgent
from .backend import NOTIFY_FLOOR, demo_backend, measure_notify
from .live import LiveView
from .person import PersonLock
from .recorder import SessionRecorder
from .scenario import (
    PERSON_WAITS,
    READERS,
    WRITER_WAITS,
    AgentScript,
    Scenario,
    TestsAct,
    build_scenario,
    file_header,
)
from .summary import DemoReport, build_report, with_server_order

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # the page's server loads only for `demo --web`
    from .web import DemoPage

LIVE_REFRESH_SECONDS = 0.1
LOOP_PROBE_SECONDS = 0.005
FLOOR_ROUNDS = 30


@dataclass(frozen=True)
class DemoOptions:
    agents: int = 8
    files: int = 12
    seed: int = 7
    keep: Path | None = None
    pacing: Pacing = field(default_factory=Pacing)
    backend: str | None = None
    """None or `file`: the workspace's lock directory; `postgres` or `postgresql://...`."""


@dataclass(frozen=True)
class Workspace:
    root: Path
    repo: Path
    lock_dir: Path


@contextmanager
def open_workspace(keep: Path | None) -> Iterator[Workspace]:
    """A fresh repo and lock directory: in a temporary directory, or in `keep` (kept)."""
    if keep is None:
        parent = _beside_the_default_lock_dir()
        with tempfile.TemporaryDirectory(prefix="lockyard-demo-", dir=parent) as temporary:
            yield _layout(Path(temporary))
        return
    if keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
        raise CliError(
            f"--keep {keep} exists and is not an empty directory",
            ExitCode.USAGE,
            "pass a new or empty directory, so the demo never overwrites anything",
        )
    keep.mkdir(parents=True, exist_ok=True)
    yield _layout(keep.resolve())


def _beside_the_default_lock_dir() -> str | None:
    """Where the default lock directory lives (tmpfs where the machine has one), so the demo
    measures the file system lockyard really uses; None (the system temp dir) otherwise."""
    parent = default_lock_dir().parent
    usable = parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)
    return str(parent) if usable else None


def _layout(root: Path) -> Workspace:
    repo = root / "repo"
    lock_dir = root / "locks"
    repo.mkdir()
    lock_dir.mkdir(mode=0o700)
    return Workspace(root=root, repo=repo.resolve(), lock_dir=lock_dir)


def write_repo(scenario: Scenario, repo: Path) -> None:
    for name in scenario.files:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(file_header(name), encoding="utf-8")


class DemoSession:
    """One run of a scenario in a workspace; `run()` returns the report."""

    def __init__(
        self,
        scenario: Scenario,
        workspace: Workspace,
        pacing: Pacing,
        backend: str | None = None,
    ) -> None:
        self.scenario = scenario
        self.workspace = workspace
        self.pacing = pacing
        self.recorder = SessionRecorder()
        # The orchestrator's own wiring: one store and one monitor that re-checks every cycle
        # against the store (its holds) before anyone is asked to give way.
        coordinator = LockCoordinator(
            workspace.repo,
            workspace.lock_dir if backend is None else None,
            backend=backend,
            on_deadlock=self.recorder.on_deadlock,
        )
        self.store = coordinator.store
        self.monitor = coordinator.monitor
        self.backend = backend
        self.lock_keys: frozenset[str] = frozenset()
        self.person: PersonLock | None = None

    async def emit(self, event: LockEvent) -> None:
        """Every agent's tool server reports here: the recorder sees it, then the monitor."""
        self.recorder.on_event(event)
        await self.monitor.handle_event(event)

    async def run(self, live: Live | None = None) -> DemoReport:
        """Connect every agent to its own tool server, run them all, then judge the result."""
        write_repo(self.scenario, self.workspace.repo)
        act = self.scenario.act
        paths = self.scenario.files + (() if act is None else (act.directory,))
        lock_keys = {name: self.store.canonicalize(name) for name in paths}
        self.lock_keys = frozenset(lock_keys.values())
        patience = self.pacing.rendezvous_patience
        rendezvous = {
            group.name: Rendezvous(len(group.members), patience)
            for group in self.scenario.deadlock_groups
        }
        cues: dict[str, Cue] = {}
        if act is not None:
            rendezvous[READERS] = Rendezvous(len(act.readers), patience)
            self.person = PersonLock(
                act, self.workspace.repo, self.workspace.lock_dir, self.recorder,
                functools.partial(store_call, self.store, self._in_line, act), self.backend,
            )  # fmt: skip
            cues[PERSON_WAITS] = self.person.in_line
            cues[WRITER_WAITS] = functools.partial(
                self.recorder.until_waiting, act.writer, lock_keys[act.directory]
            )
        started = time.perf_counter()
        self.started_at = time.time()
        async with AsyncExitStack() as stack:
            agents = [
                ScriptedAgent(
                    script,
                    await self._connect(script, stack),
                    repo=self.workspace.repo,
                    lock_keys=lock_keys,
                    holder_of=functools.partial(store_call, self.store, self.store.holder),
                    recorder=self.recorder,
                    rendezvous=rendezvous,
                    pacing=self.pacing,
                    rng=random.Random(f"{self.scenario.seed}:{script.agent_id}"),
                    cues=cues,
                )
                for script in self.scenario.agents
            ]
            async with anyio.create_task_group() as screen:
                if live is not None:
                    screen.start_soon(_redraw, live)
                screen.start_soon(_probe_loop_turns, self.recorder)
                async with anyio.create_task_group() as group:
                    if self.person is not None:  # first: its process takes longest to start
                        group.start_soon(self.person.run)
                    for agent in agents:
                        group.start_soon(agent.run)
                screen.cancel_scope.cancel()
        if live is not None:
            live.refresh()
        return self._report(seconds=time.perf_counter() - started)

    def _in_line(self, act: TestsAct) -> set[str]:
        """Who stands in line for the act's person file now (a file under a held directory
        queues in the directory's line)."""
        keys = (self.store.canonicalize(act.person_file), self.store.canonicalize(act.directory))
        return {waiter.agent_id for key in keys for waiter in self.store.waiters(key)}

    async def _connect(self, script: AgentScript, stack: AsyncExitStack) -> McpLineClient:
        """Register the agent and open an MCP session to its own lock tools."""
        self.recorder.add_agent(script.agent_id, sum(task.edits for task in script.tasks))
        self.monitor.register_agent(script.agent_id)
        tools = LockTools(
            self.store, script.agent_id, emit_lock_event=self.emit, victim_notices=self.monitor
        )
        return await stack.enter_async_context(connected(StdioToolSession(tools)))

    def _report(self, seconds: float) -> DemoReport:
        if self.backend is None:
            self.recorder.floor_name = "a raw mkdir+rmdir on this disk"
            self.recorder.floor_cycles = measure_mkdir_rmdir(self.workspace.root)
        else:
            self.recorder.floor_name = NOTIFY_FLOOR
            self.recorder.floor_cycles = measure_notify(self.backend, FLOOR_ROUNDS)
        for script in self.scenario.agents:
            self.monitor.unregister_agent(script.agent_id)
        repo = self.workspace.repo
        report = build_report(
            self.scenario,
            self.recorder,
            {name: (repo / name).read_text(encoding="utf-8") for name in self.scenario.files},
            seconds=seconds,
            leftover_locks=[info.lock_path for info in self.store.list_locks()],
            base=repo,
            header_of={name: file_header(name) for name in self.scenario.files},
        )
        return self._with_journal(report)

    def _with_journal(self, report: DemoReport) -> DemoReport:
        """The journal's figures of this run (its own lock directory or schema: nothing
        else is in it), read before the store is closed; on PostgreSQL also the server's
        own order of each line, replayed from the journal its transactions wrote."""
        try:
            with open_journal(self.store) as journal:
                run = JournalQuery.of(since=self.started_at - 1)
                report = replace(
                    report, journal_stats=journal.stats(run), journal_location=journal.location
                )
                ours = [record for record in journal.records(run) if record.file in self.lock_keys]
                report = self._with_act(report, ours)
                if self.backend is None:
                    return report
                return with_server_order(report, replay_lines(ours), self.workspace.repo)
        except Exception:  # the figures are extra: a demo never fails on them
            logger.exception("could not read the demo's journal")
            return report

    def _with_act(self, report: DemoReport, records: list[JournalRecord]) -> DemoReport:
        """The act on `tests/` as the journal recorded it; each part missing is a problem."""
        act = self.scenario.act
        if act is None or self.person is None:
            return report
        keys = {name: self.store.canonicalize(name) for name in (act.directory, act.person_file)}
        seen = act_report(act, records, keys, self.person.run_record, os.getpid())
        return replace(report, act=seen, problems=report.problems + tuple(seen.problems()))


def measure_mkdir_rmdir(where: Path, rounds: int = FLOOR_ROUNDS) -> list[float]:
    """The other baseline: a raw mkdir + rmdir beside the lock directory, the floor of any
    lock handoff on this disk (taking a lock is a directory creation, giving it back a
    removal)."""
    probe = where / "fs-probe"
    cycles = []
    for _ in range(rounds):
        started = time.perf_counter()
        probe.mkdir()
        probe.rmdir()
        cycles.append(time.perf_counter() - started)
    return cycles


async def _probe_loop_turns(recorder: SessionRecorder) -> None:
    """The baseline for handoff latencies: how late the busy event loop runs a task whose
    timer is due. A waiter woken by a release waits at least that long before it can take
    the lock (the loop first finishes the work already queued)."""
    while True:
        started = time.perf_counter()
        await anyio.sleep(LOOP_PROBE_SECONDS)
        recorder.loop_turns.append(max(0.0, time.perf_counter() - started - LOOP_PROBE_SECONDS))


async def _redraw(live: Live) -> None:
    """Redraw from the event loop itself (the recorder is not thread-safe: no auto refresh)."""
    while True:
        live.refresh()
        await anyio.sleep(LIVE_REFRESH_SECONDS)


def run_demo(
    options: DemoOptions,
    console: Console | None,
    page: DemoPage | None = None,
    after_run: Callable[[DemoReport, Workspace], None] = lambda _report, _workspace: None,
) -> tuple[DemoReport, Workspace]:
    """Build the scenario, run it (with a live view on `console` if given), return the report.

    With a `page` (`demo --web`), the page is served from before the first agent starts;
    after the run `after_run` gets the report, and the page stays up until Ctrl-C."""
    try:
        scenario = build_scenario(options.agents, options.files, options.seed)
    except ValueError as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    with open_workspace(options.keep) as workspace, demo_backend(options.backend) as backend:
        session = DemoSession(scenario, workspace, options.pacing, backend)
        try:
            if page is not None:
                page.start(workspace.lock_dir, backend)
            with _live_view(session, scenario, console) as live:
                report = anyio.run(session.run, live)
            if page is not None:
                after_run(report, workspace)
                page.linger()  # the run's page and its timeline, until Ctrl-C
            return report, workspace
        finally:
            if page is not None:
                page.stop()
            session.store.close()


def _live_view(session: DemoSession, scenario: Scenario, console: Console | None) -> Any:
    """A rich Live on `console` (redrawn by the session itself), or no view at all."""
    if console is None:
        return nullcontext()
    return Live(
        LiveView(session.recorder, session.workspace.repo, _title(scenario)),
        console=console,
        auto_refresh=False,
        transient=False,
    )


def _title(scenario: Scenario) -> str:
    return (
        f"lockyard demo: {len(scenario.agents)} agents, {len(scenario.files)} files, "
        f"seed {scenario.seed}"
    )
