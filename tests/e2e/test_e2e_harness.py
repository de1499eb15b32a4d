"""The harness itself, proven with a trivial SDK tool: two real CLI agents, scripted at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from claude_agent_sdk import ClaudeAgentOptions, create_sdk_mcp_server, tool
from cli_agents import AgentRun, offline_options, run_agent
from fake_messages_api import FakeMessagesApi, Reply, Step, ToolUse, Turn, call, say

pytestmark = pytest.mark.anyio


def board_server(board: dict[str, str]) -> Any:
    """An SDK MCP server over a shared dict: the smallest tool two agents can coordinate with."""

    @tool("put", "Store value under key", {"key": str, "value": str})
    async def put(args: dict[str, Any]) -> dict[str, Any]:
        board[args["key"]] = args["value"]
        return {"content": [{"type": "text", "text": json.dumps({"stored": args["key"]})}]}

    @tool("get", "Read the value under key", {"key": str})
    async def get(args: dict[str, Any]) -> dict[str, Any]:
        value = board.get(args["key"])
        return {"content": [{"type": "text", "text": json.dumps({"value": value})}]}

    return create_sdk_mcp_server("board", tools=[put, get])


def board_options(board: dict[str, str]) -> ClaudeAgentOptions:
    return ClaudeAgentOptions(
        tools=[],
        mcp_servers={"board": board_server(board)},
        allowed_tools=["mcp__board__put", "mcp__board__get"],
    )


async def test_two_agents_follow_their_own_scripts_with_gates_and_repeats(
    fake_api: FakeMessagesApi, tmp_path: Path
) -> None:
    board: dict[str, str] = {}

    def echo_what_b_wrote(turn: Turn) -> ToolUse:
        assert turn.last is not None
        return ToolUse("mcp__board__put", {"key": "echo", "value": turn.last.json["value"]})

    fake_api.script(
        "alpha",
        [
            call("mcp__board__put", {"key": "x", "value": "from alpha"}),
            # polls until beta has written y: a step that depends on its own earlier result
            call("mcp__board__get", {"key": "y"}, until=lambda out: out.json["value"] is not None),
            Step(echo_what_b_wrote),
            say("alpha finished"),
        ],
    )
    fake_api.script(
        "beta",
        [
            # waits for an external condition before the model "decides"
            call("mcp__board__put", {"key": "y", "value": "from beta"}, gate=lambda: "x" in board),
            say("beta finished"),
        ],
    )
    runs = {name: AgentRun(name) for name in ("alpha", "beta")}

    async with anyio.create_task_group() as tg:
        for name, run in runs.items():
            options = offline_options(fake_api, name, tmp_path / name, board_options(board), run)
            tg.start_soon(run_agent, options, f"you are {name}", run)

    assert board == {"x": "from alpha", "y": "from beta", "echo": "from beta"}
    for name, run in runs.items():
        assert run.result is not None, run.stderr
        assert run.result.is_error is False
        assert run.final_text == f"{name} finished"
        assert not any(block.is_error for block in run.tool_results)
    alpha_seen = fake_api.outcomes("alpha")
    assert alpha_seen[0].name == "mcp__board__put"
    assert alpha_seen[-1].json == {"stored": "echo"}
    assert all(o.json == {"value": None} for o in alpha_seen[1:-2]), "polled before beta wrote"
    assert alpha_seen[-2].json == {"value": "from beta"}
    assert [o.json for o in fake_api.outcomes("beta")] == [{"stored": "y"}]
    assert fake_api.answers("beta")[-1] == Reply("beta finished")


async def test_every_request_is_recorded_with_its_agent(
    fake_api: FakeMessagesApi, tmp_path: Path
) -> None:
    fake_api.script("solo", [say("hello")])
    run = AgentRun("solo")
    await run_agent(offline_options(fake_api, "solo", tmp_path, run=run), "hi", run)

    assert run.result is not None
    assert run.result.result == "hello"
    turns = [x for x in fake_api.exchanges if x.answer is not None]
    assert [x.agent for x in turns] == ["solo"]
    assert turns[0].path.startswith("/v1/messages")
    assert turns[0].body["messages"][0]["role"] == "user"


async def test_a_gate_that_never_opens_fails_the_run_instead_of_hanging(tmp_path: Path) -> None:
    with FakeMessagesApi(gate_timeout=0.3) as api:
        api.script("stuck", [call("mcp__board__get", {"key": "k"}, gate=lambda: False)])
        run = AgentRun("stuck")
        board: dict[str, str] = {}
        await run_agent(
            offline_options(api, "stuck", tmp_path, board_options(board), run), "go", run
        )

    assert run.result is not None
    assert "gate timed out" in str(run.result.result)
    assert len(api.errors) == 1
    assert "did not open" in api.errors[0]
