"""The scripted agent's unhappy paths, on a real store, monitor and MCP connection (the demo's
own: `lockyard serve`'s protocol over pipes): every one of them must end up in the report,
never pass silently."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from lockyard.cli.demo.agent import (
    Pacing,
    Rendezvous,
    ScriptedAgent,
    ToolCallError,
    call_tool,
)
from lockyard.cli.demo.recorder import Phase, SessionRecorder
from lockyard.cli.demo.scenario import AgentScript, Task, edit_line
from lockyard.domain.monitor import DeadlockMonitor
from lockyard.infra.lockstore import LockStore
from lockyard.infra.tools.lock_tools import LockTools
from lockyard.infra.transports.stdio.mcp_client import connected
from lockyard.infra.transports.stdio.server import StdioToolSession

FAST = Pacing(
    edit=(0.0, 0.001),
    think=(0.0, 0.0),
    back_off=(0.0, 0.001),
    wait_timeout=0.2,
    rendezvous_patience=0.05,
    max_attempts=2,
)


class Bench:
    def __init__(self, tmp_path: Path) -> None:
        self.repo = (tmp_path / "repo").resolve()
        self.repo.mkdir()
        for name in ("a.py", "b.py"):
            (self.repo / name).write_text("")
        self.store = LockStore(self.repo, tmp_path / "locks")
        self.recorder = SessionRecorder()
        self.monitor = DeadlockMonitor()
        self.keys = {name: self.store.canonicalize(name) for name in ("a.py", "b.py")}

    async def emit(self, event: Any) -> None:
        self.recorder.on_event(event)
        await self.monitor.handle_event(event)

    @asynccontextmanager
    async def session(self, agent_id: str) -> AsyncIterator[Any]:
        tools = LockTools(self.store, agent_id, self.emit, victim_notices=self.monitor)
        async with connected(StdioToolSession(tools)) as client:
            yield client

    async def holder(self, key: str) -> str | None:
        return self.store.holder(key)

    def agent(self, script: AgentScript, session: Any, **overrides: Any) -> ScriptedAgent:
        self.recorder.add_agent(script.agent_id, sum(len(t.files) for t in script.tasks))
        settings: dict[str, Any] = {
            "repo": self.repo,
            "lock_keys": self.keys,
            "holder_of": self.holder,
            "recorder": self.recorder,
            "rendezvous": {"g": Rendezvous(2, FAST.rendezvous_patience)},
            "pacing": FAST,
            "rng": random.Random(1),
        }
        settings.update(overrides)
        return ScriptedAgent(script, session, **settings)


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    return Bench(tmp_path)


@pytest.mark.anyio
async def test_bad_input_to_a_tool_is_an_error_not_a_silent_result(bench: Bench) -> None:
    async with bench.session("agent-1") as session:
        with pytest.raises(ToolCallError, match="lock_acquire failed"):
            await call_tool(session, "lock_acquire", {"filepaths": []})


@pytest.mark.anyio
async def test_an_agent_that_never_gets_its_file_gives_up_and_is_reported(bench: Bench) -> None:
    assert bench.store.try_lock("b.py", "squatter")
    script = AgentScript("agent-1", (Task(1, ("a.py", "b.py"), incremental=True, rendezvous="g"),))
    async with bench.session("agent-1") as session:
        await bench.agent(script, session).run()
    progress = bench.recorder.agents["agent-1"]
    assert progress.phase is Phase.FAILED
    assert "gave up task 1 after 2 attempts" in progress.note
    assert bench.recorder.anomalies == ["agent-1 failed: gave up task 1 after 2 attempts"]
    assert bench.store.holder("a.py") is None  # it gave back what it held
    assert bench.store.holder("b.py") == "squatter"
    assert (bench.repo / "a.py").read_text() == ""  # and edited nothing


@pytest.mark.anyio
async def test_an_agent_whose_first_file_is_blocked_still_meets_the_others(bench: Bench) -> None:
    assert bench.store.try_lock("a.py", "squatter")
    script = AgentScript("agent-1", (Task(1, ("a.py", "b.py"), incremental=True, rendezvous="g"),))
    async with bench.session("agent-1") as session:
        await bench.agent(script, session).run()
    assert bench.recorder.agents["agent-1"].phase is Phase.FAILED
    assert bench.store.holder("b.py") is None


@pytest.mark.anyio
async def test_editing_a_file_held_by_someone_else_is_an_anomaly(bench: Bench) -> None:
    script = AgentScript("agent-1", (Task(1, ("a.py",)),))
    async with bench.session("agent-1") as session:

        async def intruder(key: str) -> str:
            return "intruder"

        agent = bench.agent(script, session, holder_of=intruder)
        await agent.run()
    assert bench.recorder.anomalies == ["agent-1 was about to edit a.py held by intruder"]
    assert (bench.repo / "a.py").read_text() == edit_line("agent-1", 1) + "\n"


@pytest.mark.anyio
async def test_locks_still_held_at_the_end_are_reported_and_released(bench: Bench) -> None:
    assert bench.store.try_lock("b.py", "agent-1")  # taken outside its script
    script = AgentScript("agent-1", (Task(1, ("a.py",)),))
    async with bench.session("agent-1") as session:
        await bench.agent(script, session).run()
    assert bench.recorder.agents["agent-1"].phase is Phase.DONE
    assert bench.recorder.anomalies == [f"agent-1 still held at the end: {bench.keys['b.py']}"]
    assert bench.store.holder("b.py") is None


@pytest.mark.anyio
async def test_a_lost_session_is_reported(bench: Bench) -> None:
    script = AgentScript("agent-1", (Task(1, ("a.py",)),))
    async with bench.session("agent-1") as session:
        pass
    await bench.agent(script, session).run()
    assert bench.recorder.agents["agent-1"].phase is Phase.FAILED
    assert bench.recorder.anomalies[0].startswith("agent-1 failed:")
    assert bench.recorder.anomalies[1].startswith("agent-1 could not release:")
