"""The PostToolUse / PostToolUseFailure lock-event hook, fed the exact dicts the CLI sends."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from lockyard.core.events import LockEvent, LockEventType
from lockyard.infra.hooks.lock_events import (
    events_from_result,
    make_lock_event_hook,
    tool_result_payload,
)

ACQUIRE = "mcp__lockyard__lock_acquire"
RELEASE = "mcp__lockyard__lock_release"

ACQUIRE_RESULT = {
    "results": [
        {"filepath": "/repo/a.py", "acquired": True, "holder": "a1"},
        {"filepath": "/repo/b.py", "acquired": False, "holder": "a2"},
    ],
    "all_acquired": False,
}


def _post(tool_name: str, response: Any, tool_input: Any = None) -> dict[str, Any]:
    """A PostToolUse input as the CLI sends it (sdk-facts §2)."""
    return {
        "session_id": "s1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/repo",
        "permission_mode": "default",
        "prompt_id": "p1",
        "hook_event_name": "PostToolUse",
        "tool_name": tool_name,
        "tool_input": tool_input if tool_input is not None else {"filepaths": ["a.py"]},
        "tool_response": response,
        "tool_use_id": "toolu_1",
        "mcp_server": {"name": "lockyard", "source": "sdk"},
        "duration_ms": 3,
    }


def _failure(tool_name: str, tool_input: Any) -> dict[str, Any]:
    return {
        "session_id": "s1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/repo",
        "permission_mode": "default",
        "prompt_id": "p1",
        "hook_event_name": "PostToolUseFailure",
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": "toolu_2",
        "error": 'MCP server "lockyard" tool "lock_acquire" timed out after 1s',
        "is_interrupt": False,
        "duration_ms": 1000,
    }


def _blocks(payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": json.dumps(payload)}]


class Recorder:
    def __init__(self) -> None:
        self.events: list[LockEvent] = []

    async def __call__(self, event: LockEvent) -> None:
        self.events.append(event)

    @property
    def pairs(self) -> list[tuple[LockEventType, str]]:
        return [(event.event_type, event.lock_path) for event in self.events]


def _canonical(path: str) -> str:
    if path.startswith("/etc"):
        raise ValueError("outside the repo")
    return path if path.startswith("/") else f"/repo/{path}"


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.mark.anyio
@pytest.mark.parametrize(
    "shape",
    [
        pytest.param(_blocks(ACQUIRE_RESULT), id="content-blocks"),
        pytest.param(json.dumps(ACQUIRE_RESULT), id="json-string"),
        pytest.param({"content": _blocks(ACQUIRE_RESULT)}, id="dict-with-content"),
        pytest.param({"result": json.dumps(ACQUIRE_RESULT)}, id="structured-result-wrapper"),
        pytest.param(ACQUIRE_RESULT, id="bare-object"),
        pytest.param(
            [{"type": "image", "data": "", "mimeType": "x"}, *_blocks(ACQUIRE_RESULT)],
            id="text-after-other-block",
        ),
    ],
)
async def test_acquired_files_become_acquired_events_from_every_shape(
    recorder: Recorder, shape: Any
) -> None:
    hook = make_lock_event_hook(recorder, agent_id="a1")
    assert await hook(_post(ACQUIRE, shape), "toolu_1", {"signal": None}) == {}
    assert recorder.pairs == [(LockEventType.ACQUIRED, "/repo/a.py")]
    assert {event.agent_id for event in recorder.events} == {"a1"}


@pytest.mark.anyio
async def test_release_results_become_released_events(recorder: Recorder) -> None:
    hook = make_lock_event_hook(recorder, agent_id="a1")
    response = _blocks({"released": ["/repo/a.py", "/repo/c.py"], "count": 2})
    await hook(_post(RELEASE, response, {"all": True}), "toolu_1", {"signal": None})
    assert recorder.pairs == [
        (LockEventType.RELEASED, "/repo/a.py"),
        (LockEventType.RELEASED, "/repo/c.py"),
    ]


@pytest.mark.anyio
async def test_a_victims_result_reports_its_released_locks(recorder: Recorder) -> None:
    hook = make_lock_event_hook(recorder, agent_id="a1")
    victim = {
        "results": [{"filepath": "/repo/b.py", "acquired": False, "holder": "a2"}],
        "all_acquired": False,
        "deadlock": {"victim": "a1", "released": ["/repo/a.py"], "instruction": "..."},
    }
    await hook(_post(ACQUIRE, _blocks(victim)), "toolu_1", {"signal": None})
    assert recorder.pairs == [(LockEventType.RELEASED, "/repo/a.py")]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "response",
    [
        None,
        42,
        "not json",
        "[1, 2]",
        [],
        [{"type": "text", "text": "lock_acquire rejected its arguments: ..."}],
        [{"type": "text", "text": json.dumps(ACQUIRE_RESULT)}, "junk"][1:],
        {"content": _blocks(ACQUIRE_RESULT), "is_error": True},
        {"isError": True, **ACQUIRE_RESULT},
        {"unrelated": 1},
        {"results": "nope", "released": {"a": 1}},
        {"results": [None, {"filepath": 3, "acquired": True}, {"filepath": " ", "acquired": True}]},
        {"results": [{"filepath": "/repo/a.py", "acquired": "yes"}]},
    ],
)
async def test_garbage_and_errors_emit_nothing(
    recorder: Recorder, response: Any, caplog: pytest.LogCaptureFixture
) -> None:
    hook = make_lock_event_hook(recorder, agent_id="a1")
    with caplog.at_level(logging.WARNING):
        assert await hook(_post(ACQUIRE, response), "t", {"signal": None}) == {}
    assert recorder.events == []


@pytest.mark.anyio
async def test_unreadable_responses_are_logged(
    recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    hook = make_lock_event_hook(recorder, agent_id="a1")
    with caplog.at_level(logging.WARNING, logger="lockyard.infra.hooks.lock_events"):
        await hook(_post(ACQUIRE, "garbage"), "t", {"signal": None})
    assert "unreadable" in caplog.text


@pytest.mark.anyio
@pytest.mark.parametrize(
    "tool_name",
    [
        "Write",
        "mcp__other__lock_acquire",
        "mcp__lockyard__lock_acquire_v2",
        "lock_acquire",
        "mcp__lockyard__",
    ],
)
async def test_unrelated_tools_are_ignored(recorder: Recorder, tool_name: str) -> None:
    hook = make_lock_event_hook(recorder, agent_id="a1")
    await hook(_post(tool_name, _blocks(ACQUIRE_RESULT)), "t", {"signal": None})
    assert recorder.events == []


@pytest.mark.anyio
async def test_a_custom_server_key_names_the_tools(recorder: Recorder) -> None:
    hook = make_lock_event_hook(recorder, "locks-2", agent_id="a1")
    await hook(_post(ACQUIRE, _blocks(ACQUIRE_RESULT)), "t", {"signal": None})
    assert recorder.events == []
    await hook(_post("mcp__locks-2__lock_acquire", _blocks(ACQUIRE_RESULT)), "t", {"signal": None})
    assert recorder.pairs == [(LockEventType.ACQUIRED, "/repo/a.py")]


def test_a_server_key_the_cli_would_rewrite_is_refused(recorder: Recorder) -> None:
    with pytest.raises(ValueError, match="server key"):
        make_lock_event_hook(recorder, "my.locks", agent_id="a1")


@pytest.mark.anyio
async def test_a_failed_acquire_ends_the_waits_of_the_requested_files(recorder: Recorder) -> None:
    hook = make_lock_event_hook(recorder, agent_id="a1", canonicalize=_canonical)
    tool_input = {"filepaths": ["b.py", "/repo/b.py", "/etc/passwd", 7, "a.py"]}
    assert await hook(_failure(ACQUIRE, tool_input), "toolu_2", {"signal": None}) == {}
    assert recorder.pairs == [
        (LockEventType.WAIT_ENDED, "/repo/b.py"),
        (LockEventType.WAIT_ENDED, "/repo/a.py"),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool_name", "tool_input", "canonicalize"),
    [
        (ACQUIRE, {"filepaths": ["a.py"]}, None),  # cannot name the lock keys
        (ACQUIRE, {"filepaths": "a.py"}, _canonical),
        (ACQUIRE, None, _canonical),
        (RELEASE, {"filepaths": ["a.py"]}, _canonical),  # a failed release held nothing new
    ],
)
async def test_failures_that_carry_nothing_to_undo_emit_nothing(
    recorder: Recorder, tool_name: str, tool_input: Any, canonicalize: Any
) -> None:
    hook = make_lock_event_hook(recorder, agent_id="a1", canonicalize=canonicalize)
    assert await hook(_failure(tool_name, tool_input), "t", {"signal": None}) == {}
    assert recorder.events == []


@pytest.mark.anyio
async def test_other_hook_events_and_non_dicts_are_ignored(recorder: Recorder) -> None:
    hook = make_lock_event_hook(recorder, agent_id="a1")
    pre = {**_post(ACQUIRE, None), "hook_event_name": "PreToolUse"}
    assert await hook(pre, "t", {"signal": None}) == {}
    assert await hook("not a dict", None, {"signal": None}) == {}
    assert recorder.events == []


@pytest.mark.anyio
async def test_a_failing_emitter_never_breaks_the_hook(caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: LockEvent) -> None:
        raise RuntimeError("monitor down")

    hook = make_lock_event_hook(broken, agent_id="a1")
    with caplog.at_level(logging.ERROR):
        result = await hook(_post(ACQUIRE, _blocks(ACQUIRE_RESULT)), "t", {"signal": None})
    assert result == {}
    assert "could not emit" in caplog.text


@pytest.mark.anyio
async def test_a_sync_emitter_works(recorder: Recorder) -> None:
    seen: list[LockEvent] = []
    hook = make_lock_event_hook(seen.append, agent_id="a1")
    await hook(_post(ACQUIRE, _blocks(ACQUIRE_RESULT)), "t", {"signal": None})
    assert [event.lock_path for event in seen] == ["/repo/a.py"]


def test_payload_parsing_of_nested_shapes() -> None:
    assert tool_result_payload({"content": json.dumps(ACQUIRE_RESULT)}) == ACQUIRE_RESULT
    assert tool_result_payload([{"type": "text", "text": 5}]) is None
    assert list(events_from_result({"released": ["/r/a", ""]})) == [
        (LockEventType.RELEASED, "/r/a")
    ]
