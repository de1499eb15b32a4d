"""The harness itself, proven with a trivial SDK tool: two real CLI agents, scripted at once."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest
from claude_agent_sdk import ClaudeAgentOptions, create_sdk_mcp_server, tool
from cli_agents import AgentRun, offline_options, run_agent
from fake_messages_api import (
    FakeMessagesApi,
    Reply,
    ScriptError,
    Step,
    ToolUse,
    Turn,
    call,
    say,
)

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


# --- the fake API's own edge cases, over plain HTTP (no CLI needed) ----------------------------


def post(api: FakeMessagesApi, path: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{api.port}{path}",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["content-type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["content-type"], error.read()


def turn_body(*messages: dict[str, Any], stream: bool = False) -> dict[str, Any]:
    return {"model": "m", "stream": stream, "messages": list(messages), "tools": [{"name": "t"}]}


USER = {"role": "user", "content": "go"}


def tool_round(tool_id: str, result: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": "t"}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": result}],
        },
    ]


def test_a_retried_request_gets_the_same_answer_and_does_not_skip_a_step() -> None:
    with FakeMessagesApi() as api:
        api.script("r", [call("t", {"n": 1}), call("t", {"n": 2}), say("end")])
        first = json.loads(post(api, "/agent/r/v1/messages", turn_body(USER))[2])
        again = json.loads(post(api, "/agent/r/v1/messages", turn_body(USER))[2])
        answered = turn_body(USER, *tool_round("x", "1"))
        second = json.loads(post(api, "/agent/r/v1/messages", answered)[2])

    assert first["content"][0]["input"] == {"n": 1}
    assert again["content"][0]["input"] == {"n": 1}  # the same step, not the next one
    assert second["content"][0]["input"] == {"n": 2}
    assert api.answers("r") == [
        ToolUse("t", {"n": 1}),
        ToolUse("t", {"n": 1}),
        ToolUse("t", {"n": 2}),
    ]
    assert api.errors == []


def test_a_turn_that_lacks_the_next_tool_gets_the_warm_up_which_stays_out_of_the_outcomes() -> None:
    with FakeMessagesApi(warm_up=ToolUse("sh", {"command": "sleep 1"})) as api:
        api.script("w", [call("lock_tool", {"n": 1}), say("end")])
        lacking = {**turn_body(USER), "tools": [{"name": "sh"}]}
        warm = json.loads(post(api, "/agent/w/v1/messages", lacking)[2])["content"][0]
        offered = {**turn_body(USER, *tool_round(warm["id"], "slept")),
                   "tools": [{"name": "sh"}, {"name": "lock_tool"}]}  # fmt: skip
        first = json.loads(post(api, "/agent/w/v1/messages", offered)[2])["content"][0]

    assert (warm["name"], warm["input"]) == ("sh", {"command": "sleep 1"})
    assert (first["name"], first["input"]) == ("lock_tool", {"n": 1})  # the script waited
    assert api.outcomes("w") == ()  # the warm-up's result is not one of the script's
    assert api.errors == []


def test_stream_answers_are_server_sent_events_carrying_the_tool_input() -> None:
    with FakeMessagesApi() as api:
        api.script("s", [call("t", {"path": "a.py"})])
        status, content_type, payload = post(
            api, "/agent/s/v1/messages", turn_body(USER, stream=True)
        )

    assert status == 200
    assert content_type == "text/event-stream"
    events = [
        line.split(": ", 1)[1]
        for line in payload.decode().splitlines()
        if line.startswith("event: ")
    ]
    assert events[0] == "message_start"
    assert events[-1] == "message_stop"
    assert '"partial_json": "{\\"path\\": \\"a.py\\"}"' in payload.decode()


def test_unscripted_agents_raising_steps_and_stray_paths_are_reported() -> None:
    def broken(turn: Turn) -> ToolUse:
        raise RuntimeError("bad step")

    with FakeMessagesApi() as api:
        api.script("b", [Step(broken, label="broken"), call("t", until=lambda out: out.json["k"])])
        stranger = json.loads(post(api, "/agent/nobody/v1/messages", turn_body(USER))[2])
        raised = json.loads(post(api, "/agent/b/v1/messages", turn_body(USER))[2])
        post(api, "/agent/b/v1/messages", turn_body(USER, *tool_round("y", "{}")))
        after_bad_until = json.loads(
            post(
                api,
                "/agent/b/v1/messages",
                turn_body(USER, *tool_round("y", "{}"), *tool_round("z", "no json")),
            )[2]
        )
        tokens = json.loads(post(api, "/agent/b/v1/messages/count_tokens", {})[2])
        stray_status = post(api, "/elsewhere", {})[0]

    assert stranger["content"][0]["text"] == "unscripted agent"
    assert raised["content"][0]["text"].startswith("script error")
    assert after_bad_until["content"][0]["text"] == "done"
    assert tokens == {"input_tokens": 10}
    assert stray_status == 404
    assert [e.split(":")[0] for e in api.errors] == [
        "request from unscripted agent 'nobody'",
        "b",
        "b",
    ]
    with pytest.raises(ScriptError, match="bad step"):
        api.raise_errors()


def test_outcomes_pair_results_with_calls_and_keep_reminders_apart() -> None:
    reminder = "<system-reminder>\nbudget\n</system-reminder>"
    body = turn_body(
        USER,
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "u1", "name": "t", "input": {"a": 1}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "u1",
                    "is_error": True,
                    "content": [{"type": "text", "text": f"denied: no lock\n\n{reminder}"}],
                }
            ],
        },
    )
    with FakeMessagesApi() as api:
        api.script("o", [say("ok")])
        post(api, "/agent/o/v1/messages", body)

    (outcome,) = api.outcomes("o")
    assert (outcome.name, dict(outcome.input), outcome.is_error) == ("t", {"a": 1}, True)
    assert outcome.text == "denied: no lock"
    assert outcome.json is None
    assert outcome.reminders == (reminder,)
    assert api.outcomes("absent") == ()
    assert api.wait_until(lambda: len(api.exchanges) == 1, timeout=1)
    assert not api.wait_until(lambda: False, timeout=0.05)


def test_agent_names_must_be_usable_in_a_url() -> None:
    with FakeMessagesApi() as api, pytest.raises(ValueError, match="agent name"):
        api.script("two words", [])
