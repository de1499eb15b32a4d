"""The lock tools, hooks and runtime wiring, driven by real Claude CLI agents.

Every agent is a `ClaudeSDKClient` on options built by the project's `AgentRuntimeBuilder`
(through `LockCoordinator.builder`, which shares one lock store and one monitor), so the real
server key, allowed_tools, hooks and teardown are what is tested. Only the model is scripted.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from claude_agent_sdk import ClaudeAgentOptions
from cli_agents import AgentRun, offline_options, run_agent
from fake_messages_api import FakeMessagesApi, Step, ToolUse, Turn, call, say

from lockyard.core.deadlock_info import DeadlockInfo
from lockyard.core.events import LockEvent, LockEventType
from lockyard.domain.monitor import DeadlockMonitor
from lockyard.infra.agent_runtime import AgentRuntime, LockCoordinator
from lockyard.infra.lockstore import LockStore
from lockyard.infra.seen.stale import seen_state
from lockyard.infra.transports.sdk.servers import get_mcp_servers

pytestmark = pytest.mark.anyio

ACQUIRE = "mcp__lockyard__lock_acquire"
RELEASE = "mcp__lockyard__lock_release"
RELEASE_ALL = call(RELEASE, {"all": True})

ACQUIRED, WAITING, WAIT_ENDED, RELEASED = (
    LockEventType.ACQUIRED,
    LockEventType.WAITING,
    LockEventType.WAIT_ENDED,
    LockEventType.RELEASED,
)


class Lockyard:
    """One repository, lock directory and monitor, with every event and deadlock recorded."""

    def __init__(self, root: Path) -> None:
        self.repo = root / "repo"
        self.repo.mkdir()
        self.store = LockStore(self.repo, root / "locks")
        self.deadlocks: list[DeadlockInfo] = []
        self.events: list[LockEvent] = []
        self.coordinator = LockCoordinator(
            self.repo, store=self.store, on_deadlock=self.deadlocks.append
        )
        self.homes = root / "homes"

    @property
    def monitor(self) -> DeadlockMonitor:
        return self.coordinator.monitor

    def key(self, name: str) -> str:
        return self.store.canonicalize(name)

    def runtime(self, agent: str, **settings: Any) -> AgentRuntime:
        settings.setdefault("base_options", ClaudeAgentOptions(tools=[]))
        return self.coordinator.runtime(agent, emit_lock_event=self.events.append, **settings)

    def count(self, event_type: LockEventType, agent: str, name: str) -> int:
        """How many times the monitor was told `event_type` for (`agent`, `name`)."""
        wanted = (event_type, agent, self.key(name))
        return sum((e.event_type, e.agent_id, e.lock_path) == wanted for e in self.events)

    def waits_on(self, agent: str, name: str) -> bool:
        """Whether `agent` is queued for `name` in the lock directory (not just the monitor)."""
        return (agent, self.key(name)) in self.store.snapshot().waits

    def assert_lock_dir_empty(self) -> None:
        snapshot = self.store.snapshot()
        assert snapshot.holds == {}
        assert snapshot.waits == ()
        assert self.store.list_locks() == []


@pytest.fixture
async def yard(tmp_path: Path) -> AsyncIterator[Lockyard]:
    yard = Lockyard(tmp_path)
    async with yard.coordinator:  # runs on_deadlock in its own task group
        yield yard
    yard.store.close()


async def run_runtime(
    fake_api: FakeMessagesApi,
    yard: Lockyard,
    runtime: AgentRuntime,
    steps: Sequence[Step],
    *,
    limit_seconds: float = 45.0,
) -> AgentRun:
    """Script `runtime`'s agent, run its session, and check the session itself succeeded."""
    agent = runtime.agent_id
    fake_api.script(agent, steps)
    run = AgentRun(agent)
    options = offline_options(fake_api, agent, yard.homes / agent, runtime.options, run)
    await run_agent(options, f"You are {agent}. Edit your files.", run, limit_seconds=limit_seconds)
    assert run.result is not None, run.stderr
    assert run.result.is_error is False, (run.result, run.stderr)
    return run


def acquire(*names: str, timeout: float = 0, gate: Any = None) -> Step:
    return call(ACQUIRE, {"filepaths": list(names), "timeout_seconds": timeout}, gate=gate)


async def test_two_agents_deadlock_the_victim_is_told_and_the_other_finishes(
    fake_api: FakeMessagesApi, yard: Lockyard
) -> None:
    a, b = "agent-a", "agent-b"
    # A locks f1, B locks f2, A blocks on f2, then B blocks on f1: a real cycle, in this order.
    scripts = {
        a: [
            acquire("f1.py"),
            acquire("f2.py", timeout=20, gate=lambda: yard.store.holder("f2.py") == b),
            RELEASE_ALL,
            say(f"{a} done"),
        ],
        b: [
            acquire("f2.py", gate=lambda: yard.store.holder("f1.py") == a),
            acquire("f1.py", timeout=20, gate=lambda: yard.waits_on(a, "f2.py")),
            RELEASE_ALL,
            say(f"{b} done"),
        ],
    }
    runtimes = {agent: yard.runtime(agent) for agent in scripts}
    runs: dict[str, AgentRun] = {}

    async def agent_session(agent: str) -> None:
        async with runtimes[agent] as runtime:
            runs[agent] = await run_runtime(fake_api, yard, runtime, scripts[agent])

    async with anyio.create_task_group() as group:
        for agent in scripts:
            group.start_soon(agent_session, agent)

    # The monitor found exactly one deadlock: the cycle of both agents over both files.
    assert len(yard.deadlocks) == 1
    deadlock = yard.deadlocks[0]
    assert set(deadlock.agents) == {a, b}
    assert set(deadlock.lock_paths) == {yard.key("f1.py"), yard.key("f2.py")}
    victim = deadlock.victim
    survivor = b if victim == a else a
    victim_file, survivor_file = ("f1.py", "f2.py") if victim == a else ("f2.py", "f1.py")

    # The victim's blocking lock_acquire returned the deadlock result (what its model saw).
    _, victim_wait, victim_release = fake_api.outcomes(victim)
    assert not victim_wait.is_error
    assert victim_wait.json["all_acquired"] is False
    assert victim_wait.json["results"] == [
        {"filepath": yard.key(survivor_file), "acquired": False, "holder": survivor}
    ]
    told = victim_wait.json["deadlock"]
    assert told["victim"] == victim
    assert {step["agent"] for step in told["cycle"]} == {a, b}
    assert {step["waits_for"] for step in told["cycle"]} == {yard.key("f1.py"), yard.key("f2.py")}
    assert told["released"] == [yard.key(victim_file)]
    assert "release" in told["instruction"]
    assert victim_release.json == {"released": [], "count": 0}

    # The survivor's wait was granted once the victim's lock was released for it.
    _, survivor_wait, survivor_release = fake_api.outcomes(survivor)
    assert survivor_wait.json == {
        "results": [{"filepath": yard.key(victim_file), "acquired": True, "holder": survivor}],
        "all_acquired": True,
    }
    assert "deadlock" not in survivor_wait.json
    assert sorted(survivor_release.json["released"]) == sorted(
        [yard.key("f1.py"), yard.key("f2.py")]
    )
    assert runs[survivor].final_text == f"{survivor} done"
    assert runs[victim].final_text == f"{victim} done"

    # Both waits were reported, and every edge and hold is gone afterwards.
    assert yard.count(WAITING, a, "f2.py") == 1
    assert yard.count(WAITING, b, "f1.py") == 1
    assert yard.count(WAIT_ENDED, victim, survivor_file) >= 1
    snapshot = yard.monitor.snapshot()
    assert dict(snapshot.holds) == {}
    assert snapshot.waits == ()
    assert dict(snapshot.victims) == {}
    yard.assert_lock_dir_empty()


async def test_a_three_agent_cycle_has_one_victim_and_everyone_else_finishes(
    fake_api: FakeMessagesApi, yard: Lockyard
) -> None:
    agents = ["agent-1", "agent-2", "agent-3"]
    files = ["g1.py", "g2.py", "g3.py"]  # agent i holds files[i] and then wants files[i + 1]

    def script(i: int) -> list[Step]:
        wanted = files[(i + 1) % 3]
        previous = agents[i - 1]
        ready_to_wait = (  # the cycle closes in order: 1 waits, then 2, then 3
            (lambda: all(yard.store.holder(f) is not None for f in files))
            if i == 0
            else (lambda: yard.waits_on(previous, files[i]))
        )
        return [
            acquire(files[i]),
            acquire(wanted, timeout=20, gate=ready_to_wait),
            RELEASE_ALL,
            say("done"),
        ]

    async def agent_session(i: int) -> None:
        async with yard.runtime(agents[i]) as runtime:
            await run_runtime(fake_api, yard, runtime, script(i))

    async with anyio.create_task_group() as group:
        for i in range(3):
            group.start_soon(agent_session, i)

    assert len(yard.deadlocks) == 1
    deadlock = yard.deadlocks[0]
    assert sorted(deadlock.agents) == agents
    assert sorted(deadlock.lock_paths) == sorted(yard.key(f) for f in files)
    waits = {agent: fake_api.outcomes(agent)[1].json for agent in agents}
    assert [a for a, result in waits.items() if "deadlock" in result] == [deadlock.victim]
    assert all(waits[a]["all_acquired"] for a in agents if a != deadlock.victim)
    assert len(waits[deadlock.victim]["deadlock"]["cycle"]) == 3
    yard.assert_lock_dir_empty()


async def test_a_partial_result_is_completed_by_a_blocking_retry_when_the_holder_releases(
    fake_api: FakeMessagesApi, yard: Lockyard
) -> None:
    """The implementer prompt's procedure: lock everything with timeout 0, then wait only for
    what is missing; the holder's release hands the file over to the waiting call."""
    a, b = "agent-patient", "agent-holder"

    def retry_missing(turn: Turn) -> ToolUse:
        assert turn.last is not None
        missing = [r["filepath"] for r in turn.last.json["results"] if not r["acquired"]]
        return ToolUse(ACQUIRE, {"filepaths": missing, "timeout_seconds": 20})

    scripts = {
        a: [
            acquire("x.py", "y.py", gate=lambda: yard.store.holder("y.py") == b),
            Step(retry_missing, until=lambda out: out.json["all_acquired"], label="retry"),
            RELEASE_ALL,
            say("done"),
        ],
        b: [
            acquire("y.py"),
            call(RELEASE, {"filepaths": ["y.py"]}, gate=lambda: yard.waits_on(a, "y.py")),
            say("done"),
        ],
    }

    async def agent_session(agent: str) -> None:
        async with yard.runtime(agent) as runtime:
            await run_runtime(fake_api, yard, runtime, scripts[agent])

    async with anyio.create_task_group() as group:
        for agent in scripts:
            group.start_soon(agent_session, agent)

    partial, waited, released = fake_api.outcomes(a)
    assert partial.json == {
        "results": [
            {"filepath": yard.key("x.py"), "acquired": True, "holder": a},
            {"filepath": yard.key("y.py"), "acquired": False, "holder": b},
        ],
        "all_acquired": False,
    }
    assert dict(waited.input) == {"filepaths": [yard.key("y.py")], "timeout_seconds": 20}
    assert waited.json == {
        "results": [{"filepath": yard.key("y.py"), "acquired": True, "holder": a}],
        "all_acquired": True,
    }
    assert released.json["count"] == 2
    assert yard.deadlocks == []
    yard.assert_lock_dir_empty()


async def test_post_tool_use_hook_reports_holds_and_releases_to_the_monitor(
    fake_api: FakeMessagesApi, yard: Lockyard
) -> None:
    agent = "agent-hooked"
    inside_the_session: dict[str, Any] = {}

    def snapshot_holds() -> bool:
        inside_the_session["holds"] = dict(yard.monitor.snapshot().holds)
        return True

    async with yard.runtime(agent) as runtime:
        await run_runtime(
            fake_api,
            yard,
            runtime,
            [
                acquire("one.py", "two.py"),
                call(RELEASE, {"filepaths": ["one.py"]}, gate=snapshot_holds),
                say("done"),
            ],
        )
        # Still inside the runtime: two.py is held, and the monitor knows it.
        assert yard.store.holder("two.py") == agent
        assert dict(yard.monitor.snapshot().holds) == {yard.key("two.py"): agent}

    assert inside_the_session["holds"] == {yard.key("one.py"): agent, yard.key("two.py"): agent}
    # Each hold reached the monitor twice: from the tool as it was taken, and from the
    # PostToolUse hook that read the result the model got. The release likewise.
    assert yard.count(ACQUIRED, agent, "one.py") == 2
    assert yard.count(ACQUIRED, agent, "two.py") == 2
    assert yard.count(RELEASED, agent, "one.py") == 2
    # Teardown released two.py (the agent ended holding it) and told the monitor once.
    assert yard.count(RELEASED, agent, "two.py") == 1
    assert dict(yard.monitor.snapshot().holds) == {}
    yard.assert_lock_dir_empty()


async def test_write_to_an_unlocked_file_is_denied_and_allowed_after_lock_acquire(
    fake_api: FakeMessagesApi, yard: Lockyard
) -> None:
    agent = "agent-writer"
    mine, theirs = yard.repo / "new_module.py", yard.repo / "taken.py"
    yard.store.try_lock("taken.py", "agent-other")
    write_tools = ClaudeAgentOptions(tools=["Write"], allowed_tools=["Write"])

    async with yard.runtime(agent, base_options=write_tools) as runtime:
        await run_runtime(
            fake_api,
            yard,
            runtime,
            [
                call("Write", {"file_path": str(mine), "content": "first = 1\n"}),
                call("Write", {"file_path": str(theirs), "content": "stolen = 1\n"}),
                acquire("new_module.py"),
                call("Write", {"file_path": str(mine), "content": "second = 2\n"}),
                RELEASE_ALL,
                say("done"),
            ],
        )

    denied_unlocked, denied_taken, locked, written, _ = fake_api.outcomes(agent)
    assert denied_unlocked.is_error
    assert f"{yard.key('new_module.py')} is not locked by you" in denied_unlocked.text
    assert ACQUIRE in denied_unlocked.text
    assert denied_taken.is_error
    assert "locked by agent agent-other" in denied_taken.text
    assert locked.json["all_acquired"] is True
    assert not written.is_error, written.text
    assert mine.read_text() == "second = 2\n"
    assert not theirs.exists()
    assert yard.store.holder("taken.py") == "agent-other"


async def test_edit_of_an_unlocked_file_is_denied_and_allowed_after_lock_acquire(
    fake_api: FakeMessagesApi, yard: Lockyard
) -> None:
    agent = "agent-editor"
    target = yard.repo / "module.py"
    target.write_text("answer = 41\n")
    edit = {"file_path": str(target), "old_string": "41", "new_string": "42"}
    tools = ClaudeAgentOptions(tools=["Read", "Edit"], allowed_tools=["Read", "Edit"])

    async with yard.runtime(agent, base_options=tools) as runtime:
        await run_runtime(
            fake_api,
            yard,
            runtime,
            [
                call("Read", {"file_path": str(target)}),  # the CLI's Edit needs a Read first
                call("Edit", edit),
                acquire("module.py"),
                call("Edit", edit),
                RELEASE_ALL,
                say("done"),
            ],
        )

    read, denied, _, edited, _ = fake_api.outcomes(agent)
    assert not read.is_error
    assert denied.is_error
    assert f"{yard.key('module.py')} is not locked by you" in denied.text
    assert not edited.is_error, edited.text
    assert target.read_text() == "answer = 42\n"


async def test_git_commit_of_unlocked_files_is_denied(
    fake_api: FakeMessagesApi, yard: Lockyard
) -> None:
    agent = "agent-committer"
    git = ["git", "-C", str(yard.repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    await anyio.run_process([*git, "init", "-q"])
    (yard.repo / "tracked.py").write_text("v = 1\n")
    await anyio.run_process([*git, "add", "tracked.py"])
    await anyio.run_process([*git, "commit", "-q", "-m", "start"])
    (yard.repo / "tracked.py").write_text("v = 2\n")
    commit = "git -c user.name=t -c user.email=t@example.com commit -q -am 'edit'"
    bash = ClaudeAgentOptions(tools=["Bash"], allowed_tools=["Bash"])

    async with yard.runtime(agent, base_options=bash) as runtime:
        await run_runtime(
            fake_api,
            yard,
            runtime,
            [
                call("Bash", {"command": commit, "description": "commit"}),
                acquire("tracked.py"),
                call("Bash", {"command": commit, "description": "commit"}),
                RELEASE_ALL,
                say("done"),
            ],
        )

    denied, _, committed, _ = fake_api.outcomes(agent)
    assert denied.is_error
    assert "would include files you have not locked" in denied.text
    assert yard.key("tracked.py") in denied.text
    assert not committed.is_error, committed.text
    log = await anyio.run_process([*git, "log", "--format=%s"])
    assert log.stdout.decode().split() == ["edit", "start"]


async def test_a_tool_timeout_leaves_no_wait_edge_and_no_lock(
    fake_api: FakeMessagesApi, yard: Lockyard
) -> None:
    agent = "agent-impatient"
    yard.store.try_lock("busy.py", "agent-blocker")

    def cleaned_up() -> bool:  # the handler's cancellation cleanup, seen in the lock directory
        return yard.store.holder("free.py") is None and not yard.waits_on(agent, "busy.py")

    async with yard.runtime(agent, tool_timeout_seconds=1.0) as runtime:
        await run_runtime(
            fake_api,
            yard,
            runtime,
            [
                # asks to wait 30 s; the CLI abandons the call after 1 s and cancels the handler
                acquire("free.py", "busy.py", timeout=30),
                say("gave up", gate=cleaned_up),
            ],
        )
        # Still inside the runtime (its teardown would hide leftovers): nothing is left.
        snapshot = yard.monitor.snapshot()
        assert snapshot.waits == ()
        assert agent not in dict(snapshot.holds).values()

    (timed_out,) = fake_api.outcomes(agent)
    assert timed_out.is_error
    assert "timed out" in timed_out.text
    # The call took free.py and queued for busy.py; the cancellation undid both, and said so.
    assert yard.count(ACQUIRED, agent, "free.py") == 1
    assert yard.count(RELEASED, agent, "free.py") == 1
    assert yard.count(WAITING, agent, "busy.py") == 1
    # WAIT_ENDED from the cancelled handler, and again from the PostToolUseFailure hook, which
    # ends a wait on every file the failed call asked for (free.py was never waited on).
    assert yard.count(WAIT_ENDED, agent, "busy.py") == 2
    assert yard.count(WAIT_ENDED, agent, "free.py") == 1
    assert yard.store.holder("busy.py") == "agent-blocker"
    assert yard.store.waiters("busy.py") == []
    assert yard.store.holder("free.py") is None


async def test_get_mcp_servers_alone_is_enough_for_an_agent_to_lock(
    fake_api: FakeMessagesApi, yard: Lockyard
) -> None:
    """`get_mcp_servers`, wired by hand as an orchestrator does without the builder."""
    agent = "agent-bare"
    events: list[LockEvent] = []
    servers = get_mcp_servers(yard.repo, agent, events.append, store=yard.store)
    options = ClaudeAgentOptions(tools=[], mcp_servers=servers, allowed_tools=[ACQUIRE, RELEASE])
    fake_api.script(agent, [acquire("bare.py"), RELEASE_ALL, say("done")])
    run = AgentRun(agent)
    await run_agent(offline_options(fake_api, agent, yard.homes / agent, options, run), "go", run)

    locked, released = fake_api.outcomes(agent)
    assert locked.json["all_acquired"] is True
    assert released.json == {"released": [yard.key("bare.py")], "count": 1}
    key = yard.key("bare.py")
    assert [(e.event_type, e.lock_path) for e in events] == [(ACQUIRED, key), (RELEASED, key)]
    yard.assert_lock_dir_empty()


async def test_runtime_teardown_releases_what_the_agent_still_holds(
    fake_api: FakeMessagesApi, yard: Lockyard
) -> None:
    agent = "agent-forgetful"
    async with yard.runtime(agent) as runtime:
        await run_runtime(fake_api, yard, runtime, [acquire("kept.py"), say("bye")])
        assert yard.store.holder("kept.py") == agent

    assert yard.store.holder("kept.py") is None
    assert yard.count(RELEASED, agent, "kept.py") == 1
    # The rendered implementer prompt reached the model, with this agent's id and lock dir.
    system = json.dumps(fake_api.exchanges[0].body["system"])
    assert json.dumps(runtime.prompt)[1:-1] in system
    assert agent in runtime.prompt
    assert str(yard.store.lock_dir) in runtime.prompt
    assert dict(yard.monitor.snapshot().holds) == {}
    yard.assert_lock_dir_empty()


async def test_a_shell_write_from_a_stale_read_is_refused_naming_the_writer_until_a_reread(
    fake_api: FakeMessagesApi, yard: Lockyard
) -> None:
    # Claude Code refuses its own Write of a file changed since its Read before any hook
    # runs; a shell write it lets through, and that is where the guard must refuse.
    a, b = "agent-a", "agent-b"
    source = yard.repo / "app.py"
    source.write_text("a = 1\n")
    tools = ClaudeAgentOptions(
        tools=["Read", "Write", "Bash"], allowed_tools=["Read", "Write", "Bash"]
    )

    def b_wrote() -> bool:
        return source.read_text() == "b = 2\n" and yard.store.holder("app.py") is None

    def a_read() -> bool:
        return seen_state(yard.store.root, a, yard.key("app.py"))[0] is not None

    def shell_write(content: str) -> Step:
        command = f"printf '{content}' > {source}"
        return call("Bash", {"command": command, "description": "write app.py"})

    scripts = {
        a: [
            call("Read", {"file_path": str(source)}),
            acquire("app.py", timeout=30, gate=b_wrote),
            shell_write("a = 3\\n"),
            call("Read", {"file_path": str(source)}),
            shell_write("a = 3\\nb = 2\\n"),
            RELEASE_ALL,
            say(f"{a} done"),
        ],
        b: [
            # Lock, then read, then write: Claude Code's Write refuses a file never read.
            acquire("app.py", gate=a_read),
            call("Read", {"file_path": str(source)}),
            call("Write", {"file_path": str(source), "content": "b = 2\n"}),
            RELEASE_ALL,
            say(f"{b} done"),
        ],
    }

    async def agent_session(agent: str) -> None:
        async with yard.runtime(agent, base_options=tools) as runtime:
            # A's session spans B's whole session (start-up included): twice the hang limit.
            await run_runtime(fake_api, yard, runtime, scripts[agent], limit_seconds=90)

    async with anyio.create_task_group() as group:
        for agent in scripts:
            group.start_soon(agent_session, agent)

    _, locked, refused, _, written, _ = fake_api.outcomes(a)
    (result,) = locked.json["results"]
    assert result["changed_since_read"] is True
    assert "agent agent-b wrote it at" in result["change"]
    assert refused.is_error
    assert "app.py changed since you read it at" in refused.text
    assert "agent agent-b wrote it at" in refused.text
    assert "Read app.py again" in refused.text
    assert not written.is_error, written.text
    assert source.read_text() == "a = 3\nb = 2\n"
