"""AgentRuntimeBuilder / LockCoordinator: the options they build, and the teardown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from claude_agent_sdk import ClaudeAgentOptions, HookMatcher
from mcp import Client

from lockyard.core.events import LockEvent, LockEventType
from lockyard.domain.monitor import DeadlockMonitor
from lockyard.infra.agent_runtime import AgentRuntimeBuilder, LockCoordinator
from lockyard.infra.lockstore import LockStore

ACQUIRE = "mcp__lockyard__lock_acquire"
RELEASE = "mcp__lockyard__lock_release"
STATUS = "mcp__lockyard__lock_status"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("a.py", "b.py"):
        (root / name).write_text("")
    return root


@pytest.fixture
def coordinator(repo: Path, tmp_path: Path) -> LockCoordinator:
    return LockCoordinator(repo, tmp_path / "locks")


async def noop_hook(input_data: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
    return {}


def test_the_options_carry_server_tools_hooks_prompt_and_cwd(
    coordinator: LockCoordinator,
) -> None:
    runtime = coordinator.runtime("alice")
    options = runtime.options
    assert runtime.agent_id == "alice"
    assert runtime.tool_names == (ACQUIRE, RELEASE)

    server = options.mcp_servers["lockyard"]  # type: ignore[index]
    assert server["type"] == "sdk"
    assert server["name"] == "lockyard"
    assert "timeout" not in server
    assert options.allowed_tools == [ACQUIRE, RELEASE, STATUS]

    hooks = options.hooks or {}
    assert [m.matcher for m in hooks["PreToolUse"]] == [
        "Read",  # the read note: what the agent reads, for the guards' stale-read check
        "Write|Edit|MultiEdit|NotebookEdit",
        "Bash",
    ]
    assert len(hooks["PreToolUse"][2].hooks) == 2  # the shell guard, then the commit guard
    for event in ("PostToolUse", "PostToolUseFailure"):
        assert [m.matcher for m in hooks[event]] == [f"{ACQUIRE}|{RELEASE}"]
    assert set(hooks) == {"PreToolUse", "PostToolUse", "PostToolUseFailure"}  # no Stop hook

    prompt = options.system_prompt
    assert isinstance(prompt, dict)
    assert prompt["type"] == "preset"
    assert prompt["preset"] == "claude_code"
    assert "You are agent `alice`" in prompt["append"]
    assert str(coordinator.store.lock_dir) in prompt["append"]
    assert ACQUIRE in prompt["append"]
    assert runtime.prompt == prompt["append"]
    assert options.cwd == coordinator.store.namespace
    assert coordinator.monitor.snapshot().agents[0].agent_id == "alice"


def test_base_options_are_extended_never_mutated(repo: Path, tmp_path: Path) -> None:
    other = {"type": "stdio", "command": "other-server"}
    base = ClaudeAgentOptions(
        mcp_servers={"other": other},  # type: ignore[dict-item]
        allowed_tools=["Read", ACQUIRE],
        hooks={"PreToolUse": [HookMatcher(matcher="Read", hooks=[noop_hook])]},
        system_prompt="You fix bugs.",
        cwd=str(tmp_path),
        max_turns=7,
    )
    runtime = AgentRuntimeBuilder(
        repo, agent_id="a1", lock_dir=tmp_path / "locks", base_options=base
    ).build()
    options = runtime.options
    assert set(options.mcp_servers) == {"other", "lockyard"}  # type: ignore[arg-type]
    assert options.allowed_tools == ["Read", ACQUIRE, RELEASE, STATUS]
    assert [m.matcher for m in (options.hooks or {})["PreToolUse"]] == [
        "Read",
        "Read",
        "Write|Edit|MultiEdit|NotebookEdit",
        "Bash",
    ]
    assert isinstance(options.system_prompt, str)
    assert options.system_prompt.startswith("You fix bugs.\n\n# File locks")
    assert options.cwd == str(tmp_path)
    assert options.max_turns == 7
    # The base is untouched.
    assert set(base.mcp_servers) == {"other"}  # type: ignore[arg-type]
    assert base.allowed_tools == ["Read", ACQUIRE]
    assert len((base.hooks or {})["PreToolUse"]) == 1


@pytest.mark.parametrize(
    ("system_prompt", "mode", "check"),
    [
        (
            {"type": "preset", "preset": "claude_code", "append": "Be brief."},
            "append",
            lambda p: p["append"].startswith("Be brief.\n\n# File locks"),
        ),
        (
            {"type": "custom", "prompt": "Custom."},
            "append",
            lambda p: p["prompt"].startswith("Custom.\n\n# File locks"),
        ),
        ("Mine.", "replace", lambda p: p.startswith("# File locks")),
        ("Mine.", "none", lambda p: p == "Mine."),
        (None, "none", lambda p: p is None),
    ],
)
def test_prompt_modes(
    repo: Path, tmp_path: Path, system_prompt: Any, mode: Any, check: Any
) -> None:
    runtime = AgentRuntimeBuilder(
        repo,
        agent_id="a1",
        lock_dir=tmp_path / "locks",
        base_options=ClaudeAgentOptions(system_prompt=system_prompt),
        prompt_mode=mode,
    ).build()
    assert check(runtime.options.system_prompt)


def test_guards_can_be_left_out_and_the_tool_timeout_is_forwarded(
    repo: Path, tmp_path: Path
) -> None:
    runtime = AgentRuntimeBuilder(
        repo,
        agent_id="a1",
        lock_dir=tmp_path / "locks",
        guard_writes=False,
        guard_commits=False,
        guard_shell=False,
        tool_timeout_seconds=1.5,
        server_key="locks",
    ).build()
    hooks = runtime.options.hooks or {}
    assert "PreToolUse" not in hooks
    assert hooks["PostToolUse"][0].matcher == "mcp__locks__lock_acquire|mcp__locks__lock_release"
    assert runtime.options.mcp_servers["locks"]["timeout"] == 1500  # type: ignore[index]
    only_commits = AgentRuntimeBuilder(
        repo, agent_id="a2", lock_dir=tmp_path / "locks", guard_writes=False
    ).build()
    assert [m.matcher for m in (only_commits.options.hooks or {})["PreToolUse"]] == [
        "Read",
        "Bash",
    ]
    no_shell = AgentRuntimeBuilder(
        repo, agent_id="a3", lock_dir=tmp_path / "locks", guard_writes=False, guard_shell=False
    ).build()
    assert len((no_shell.options.hooks or {})["PreToolUse"][0].hooks) == 1  # commits only


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"base_options": ClaudeAgentOptions(mcp_servers="servers.json")}, "must be a dict"),
        (
            {"base_options": ClaudeAgentOptions(mcp_servers={"lockyard": {"type": "sdk"}})},  # type: ignore[dict-item]
            "already has a server",
        ),
        ({"tool_timeout_seconds": 0}, "positive"),
        ({"server_key": "lock.yard"}, "server key"),
        (
            {
                "base_options": ClaudeAgentOptions(
                    system_prompt={"type": "file", "path": "p.md"}  # type: ignore[typeddict-unknown-key]
                )
            },
            "prompt_mode",
        ),
    ],
)
def test_bad_settings_are_refused(
    repo: Path, tmp_path: Path, settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        AgentRuntimeBuilder(repo, agent_id="a1", lock_dir=tmp_path / "locks", **settings).build()


def test_store_and_lock_dir_are_exclusive(repo: Path, tmp_path: Path) -> None:
    store = LockStore(repo, tmp_path / "locks")
    with pytest.raises(ValueError, match="not both"):
        AgentRuntimeBuilder(repo, store=store, lock_dir=tmp_path / "locks").build()
    with pytest.raises(ValueError, match="not both"):
        LockCoordinator(repo, tmp_path / "locks", store=store)


def test_an_agent_id_is_made_up_when_missing(coordinator: LockCoordinator) -> None:
    first, second = coordinator.runtime(), coordinator.runtime()
    assert first.agent_id != second.agent_id
    assert first.agent_id.startswith("agent-")


@pytest.mark.anyio
async def test_close_releases_the_agents_locks_and_tells_the_monitor(
    coordinator: LockCoordinator,
) -> None:
    seen: list[LockEvent] = []
    async with coordinator.runtime("alice", emit_lock_event=seen.append) as runtime:
        outcome = await runtime.tools.acquire({"filepaths": ["a.py", "b.py"]})
        assert json.loads(outcome.text)["all_acquired"] is True
        assert len(coordinator.monitor.snapshot().holds) == 2
    assert coordinator.store.holder("a.py") is None
    assert coordinator.store.holder("b.py") is None
    snapshot = coordinator.monitor.snapshot()
    assert snapshot.holds == {}
    assert snapshot.agents == ()
    kinds = [event.event_type for event in seen]
    assert kinds == [LockEventType.ACQUIRED] * 2 + [LockEventType.RELEASED] * 2
    assert runtime.closed
    assert await runtime.close() == []  # idempotent


@pytest.mark.anyio
async def test_close_completes_under_cancellation(coordinator: LockCoordinator) -> None:
    runtime = coordinator.runtime("alice")
    await runtime.tools.acquire({"filepaths": ["a.py"]})
    with anyio.CancelScope() as scope:
        scope.cancel()
        released = await runtime.close()
    assert released == [coordinator.store.canonicalize("a.py")]
    assert coordinator.store.holder("a.py") is None


@pytest.mark.anyio
async def test_a_builder_without_monitor_reports_to_its_callback(
    repo: Path, tmp_path: Path
) -> None:
    seen: list[LockEvent] = []
    runtime = AgentRuntimeBuilder(
        repo, agent_id="solo", lock_dir=tmp_path / "locks", emit_lock_event=seen.append
    ).build()
    config = runtime.options.mcp_servers["lockyard"]  # type: ignore[index]
    async with Client(config["instance"], mode="legacy") as client:
        await client.call_tool("lock_acquire", {"filepaths": ["a.py"]})
    assert [(e.agent_id, e.event_type) for e in seen] == [("solo", LockEventType.ACQUIRED)]
    await runtime.close()
    assert runtime.store.holder("a.py") is None


def test_a_given_monitor_is_used_for_events_and_victim_notices(repo: Path, tmp_path: Path) -> None:
    monitor = DeadlockMonitor()
    runtime = AgentRuntimeBuilder(
        repo, agent_id="a1", lock_dir=tmp_path / "locks", monitor=monitor, issue_id="ISSUE-7"
    ).build()
    assert runtime.tools.victim_notices is monitor
    assert runtime.monitor is monitor
    assert monitor.snapshot().agents[0].issue_id == "ISSUE-7"


@pytest.mark.anyio
async def test_the_coordinator_closes_every_agent_still_open(repo: Path, tmp_path: Path) -> None:
    async with LockCoordinator(repo, tmp_path / "locks") as coordinator:
        alice, bob = coordinator.runtime("alice"), coordinator.runtime("bob")
        await alice.tools.acquire({"filepaths": ["a.py"]})
        await bob.tools.acquire({"filepaths": ["b.py"]})
        await bob.close()  # already closed: not closed twice
    assert alice.closed
    assert coordinator.store.holder("a.py") is None
    assert coordinator.monitor.snapshot().agents == ()
    assert await coordinator.aclose() == {}
