"""The bundled Claude CLI drives `lockyard serve` as an external stdio MCP server.

The same scripted session runs once through `lockyard serve` (a real subprocess the CLI starts)
and once through the in-process SDK server; the model must see the same tools and the same
results from both. Then two CLI agents, each with its own `serve` process, deadlock, and a
`lockyard monitor` process finds and resolves the cycle from the lock directory alone.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from claude_agent_sdk import ClaudeAgentOptions
from claude_agent_sdk.types import McpStdioServerConfig
from cli_agents import AgentRun, offline_options, run_agent
from fake_messages_api import FakeMessagesApi, Step, ToolOutcome, call, say

from lockyard.infra.lockstore import LockStore
from lockyard.infra.tools.lock_tools import TOOL_SPECS
from lockyard.infra.transports.sdk.server import create_locking_mcp_server
from polling_support import wait_until_async

pytestmark = pytest.mark.anyio

LOCKYARD = Path(sys.executable).parent / "lockyard"
ACQUIRE = "mcp__lockyard__lock_acquire"
RELEASE = "mcp__lockyard__lock_release"
TOOLS = [ACQUIRE, RELEASE]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("a.py", "b.py", "held.py", "kept.py"):
        (root / name).write_text(f"# {name}\n")
    return root


@pytest.fixture
def store(repo: Path, tmp_path: Path) -> Iterator[LockStore]:
    with LockStore(repo, tmp_path / "locks") as opened:
        yield opened


def serve_options(agent: str, repo: Path, lock_dir: Path) -> ClaudeAgentOptions:
    """`lockyard serve` as the CLI's external stdio server; the lock dir passed explicitly."""
    server: McpStdioServerConfig = {
        "type": "stdio",
        "command": str(LOCKYARD),
        "args": ["serve", "--agent-id", agent, "--repo", str(repo)],
        "env": {"LOCKYARD_LOCK_DIR": str(lock_dir)},
    }
    return ClaudeAgentOptions(
        tools=[], mcp_servers={"lockyard": server}, allowed_tools=TOOLS, strict_mcp_config=True
    )


def in_process_options(agent: str, store: LockStore) -> ClaudeAgentOptions:
    server = create_locking_mcp_server(agent, store.namespace, store=store)
    return ClaudeAgentOptions(tools=[], mcp_servers={"lockyard": server}, allowed_tools=TOOLS)


def session_script(agent: str, store: LockStore) -> list[Step]:
    """Lock, meet a file held by someone else, make two invalid calls, release everything."""

    def holds_a_and_b() -> bool:  # checked in the lock directory, from this process
        return store.holder("a.py") == agent and store.holder("b.py") == agent

    return [
        call(ACQUIRE, {"filepaths": ["b.py", "a.py", "./a.py"], "timeout_seconds": 0}),
        call(ACQUIRE, {"filepaths": ["held.py"], "timeout_seconds": 0}, gate=holds_a_and_b),
        call(ACQUIRE, {"filepaths": []}),
        call(RELEASE, {"filepaths": ["a.py"], "all": True}),
        call(RELEASE, {"all": True}),
        say("finished"),
    ]


async def run_session(
    fake_api: FakeMessagesApi,
    agent: str,
    store: LockStore,
    home: Path,
    options: ClaudeAgentOptions,
) -> tuple[AgentRun, tuple[ToolOutcome, ...]]:
    fake_api.script(agent, session_script(agent, store))
    run = AgentRun(agent)
    await run_agent(offline_options(fake_api, agent, home, options, run), "lock files", run)
    assert run.result is not None, run.stderr
    assert run.result.result == "finished", run.stderr
    return run, fake_api.outcomes(agent)


def normalized(outcome: ToolOutcome, agent: str) -> tuple[str, bool, Any]:
    """A result with the agent id blanked, so two agents' results compare equal."""
    text = outcome.text.replace(agent, "<agent>")
    return outcome.name, outcome.is_error, text


def tools_the_model_saw(fake_api: FakeMessagesApi, agent: str) -> dict[str, Any]:
    first_turn = next(x for x in fake_api.exchanges if x.agent == agent and x.answer is not None)
    return {tool["name"]: tool for tool in first_turn.body["tools"]}


async def test_cli_drives_lockyard_serve_and_sees_what_the_in_process_server_shows(
    fake_api: FakeMessagesApi, repo: Path, store: LockStore, tmp_path: Path
) -> None:
    store.try_lock("held.py", "other-agent")

    stdio_run, over_stdio = await run_session(
        fake_api,
        "ext-a",
        store,
        tmp_path / "home-stdio",
        serve_options("ext-a", repo, store.lock_dir),
    )
    _, in_process = await run_session(
        fake_api, "sdk-a", store, tmp_path / "home-sdk", in_process_options("sdk-a", store)
    )

    # The CLI connected to the external server and offered its tools under our names.
    statuses = {s["name"]: s["status"] for s in stdio_run.init["mcp_servers"]}
    assert statuses == {"lockyard": "connected"}
    assert set(TOOLS) <= set(stdio_run.init["tools"])

    # What the stdio server answered, as the model saw it.
    first, held, empty, both, released = over_stdio
    key_a, key_b = store.canonicalize("a.py"), store.canonicalize("b.py")
    assert first.json == {
        "results": [
            {"filepath": key_a, "acquired": True, "holder": "ext-a"},
            {"filepath": key_b, "acquired": True, "holder": "ext-a"},
        ],
        "all_acquired": True,
    }
    assert held.json == {
        "results": [
            {"filepath": store.canonicalize("held.py"), "acquired": False, "holder": "other-agent"}
        ],
        "all_acquired": False,
    }
    assert empty.is_error
    assert "filepaths" in empty.text
    assert both.is_error
    assert "not both" in both.text
    assert not released.is_error
    assert released.json == {"released": [key_a, key_b], "count": 2}

    # The in-process server gives the same tools and the same results, call by call.
    assert [normalized(o, "ext-a") for o in over_stdio] == [
        normalized(o, "sdk-a") for o in in_process
    ]
    assert tools_the_model_saw(fake_api, "ext-a") == tools_the_model_saw(fake_api, "sdk-a")
    # ... and those are our specs, unchanged: the CLI forwards the schemas whole to the model.
    seen = tools_the_model_saw(fake_api, "ext-a")
    for spec in TOOL_SPECS:
        tool = seen[f"mcp__lockyard__{spec.name}"]
        assert tool["description"] == spec.description
        assert tool["input_schema"] == spec.input_schema

    assert store.holder("held.py") == "other-agent"
    assert store.holder("a.py") is None
    assert store.holder("b.py") is None


async def test_serve_gives_back_its_locks_when_the_cli_session_ends(
    fake_api: FakeMessagesApi, repo: Path, store: LockStore, tmp_path: Path
) -> None:
    agent = "ext-keeper"
    fake_api.script(
        agent,
        [
            call(ACQUIRE, {"filepaths": ["kept.py"], "timeout_seconds": 0}),
            say("leaving without releasing", gate=lambda: store.holder("kept.py") == agent),
        ],
    )
    run = AgentRun(agent)
    options = offline_options(
        fake_api, agent, tmp_path / "home", serve_options(agent, repo, store.lock_dir), run
    )
    await run_agent(options, "lock and leave", run)

    assert run.result is not None, run.stderr
    assert fake_api.outcomes(agent)[0].json["all_acquired"] is True
    await wait_until_async(
        lambda: store.holder("kept.py") is None,
        lambda: f"kept.py given back (locks: {store.list_locks()})",
        within=10,
    )


async def test_a_deadlock_between_two_serve_processes_is_resolved_with_no_monitor_running(
    fake_api: FakeMessagesApi, repo: Path, store: LockStore, tmp_path: Path
) -> None:
    a, b = "ext-alice", "ext-bob"

    def waits_on(agent: str, name: str) -> bool:
        return (agent, store.canonicalize(name)) in store.snapshot().waits

    scripts = {
        a: [
            call(ACQUIRE, {"filepaths": ["a.py"], "timeout_seconds": 0}),
            call(
                ACQUIRE,
                {"filepaths": ["b.py"], "timeout_seconds": 20},
                gate=lambda: store.holder("b.py") == b,
            ),
            call(RELEASE, {"all": True}),
            say(f"{a} done"),
        ],
        b: [
            call(
                ACQUIRE,
                {"filepaths": ["b.py"], "timeout_seconds": 0},
                gate=lambda: store.holder("a.py") == a,
            ),
            call(
                ACQUIRE,
                {"filepaths": ["a.py"], "timeout_seconds": 20},
                gate=lambda: waits_on(a, "b.py"),
            ),
            call(RELEASE, {"all": True}),
            say(f"{b} done"),
        ],
    }
    runs = {agent: AgentRun(agent) for agent in scripts}
    # No `lockyard monitor`: the two servers elect the one that resolves deadlocks.
    async with anyio.create_task_group() as group:
        for agent, steps in scripts.items():
            fake_api.script(agent, steps)
            options = offline_options(
                fake_api,
                agent,
                tmp_path / agent,
                serve_options(agent, repo, store.lock_dir),
                runs[agent],
            )
            group.start_soon(run_agent, options, "lock and edit", runs[agent])

    told = {agent: fake_api.outcomes(agent)[1].json for agent in scripts}
    victims = [agent for agent, result in told.items() if "deadlock" in result]
    assert len(victims) == 1, told
    victim = victims[0]
    survivor = b if victim == a else a
    deadlock = told[victim]["deadlock"]
    assert deadlock["victim"] == victim
    assert {step["agent"] for step in deadlock["cycle"]} == {a, b}
    assert told[victim]["all_acquired"] is False
    assert told[survivor]["all_acquired"] is True
    for agent, run in runs.items():
        assert run.final_text == f"{agent} done", run.stderr
    assert "lockyard's deadlock detection" in deadlock["instruction"]  # says who and why
    await wait_until_async(
        lambda: store.list_locks() == [],
        lambda: f"every lock given back (locks: {store.list_locks()})",
        within=10,
    )


async def test_a_misconfigured_serve_fails_closed_the_agent_gets_no_lock_tools(
    fake_api: FakeMessagesApi, tmp_path: Path
) -> None:
    agent = "ext-misconfigured"
    fake_api.script(agent, [call(ACQUIRE, {"filepaths": ["a.py"]}), say("finished")])
    run = AgentRun(agent)
    options = serve_options(agent, tmp_path / "no-such-repo", tmp_path / "locks")
    await run_agent(offline_options(fake_api, agent, tmp_path / "home", options, run), "go", run)

    statuses = {s["name"]: s["status"] for s in run.init["mcp_servers"]}
    assert statuses["lockyard"] == "failed"  # serve exited with its error before speaking MCP
    assert not set(TOOLS) & set(run.init["tools"])
    (refused,) = fake_api.outcomes(agent)
    assert refused.is_error
    assert "No such tool available" in refused.text
    assert (
        not (tmp_path / "locks").exists()
        or LockStore(tmp_path, tmp_path / "locks").list_locks() == []
    )
