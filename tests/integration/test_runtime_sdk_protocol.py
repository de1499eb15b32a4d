"""The built options through the SDK's real control protocol, with a scripted stand-in for the CLI.

`ClaudeSDKClient(options, transport=FakeCLI())` runs the SDK exactly as in production (hook
registration in `initialize`, `hook_callback` and `mcp_message` control requests); only the
CLI side is played by the test, following the CLI's matcher rules (sdk-facts §0.7).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from claude_agent_sdk import ClaudeSDKClient, Transport

from lockyard.core.events import LockEventType
from lockyard.infra.agent_runtime import LockCoordinator
from lockyard.infra.seen.stale import seen_state

ACQUIRE = "mcp__lockyard__lock_acquire"


def cli_matches(matcher: str | None, tool_name: str) -> bool:
    """The CLI's rule: empty or * = all; [A-Za-z0-9_|, -]+ = exact names; else a regex."""
    if matcher in (None, "", "*"):
        return True
    assert matcher is not None
    if re.fullmatch(r"[A-Za-z0-9_|, -]+", matcher):
        return tool_name in {name.strip() for name in re.split(r"[|,]", matcher)}
    return re.search(matcher, tool_name) is not None


class FakeCLI(Transport):
    """Plays the CLI end of the stream-json control protocol."""

    def __init__(self) -> None:
        self._out: MemoryObjectSendStream[dict[str, Any]]
        self._in: MemoryObjectReceiveStream[dict[str, Any]]
        self._out, self._in = anyio.create_memory_object_stream[dict[str, Any]](100)
        self.hooks: dict[str, list[tuple[str | None, list[str]]]] = {}
        self._answers: dict[str, dict[str, Any]] = {}
        self._arrived: dict[str, anyio.Event] = {}
        self._next = 0
        self._mcp_open = False

    async def connect(self) -> None:
        return None

    def is_ready(self) -> bool:
        return True

    async def end_input(self) -> None:
        return None

    async def close(self) -> None:
        self._out.close()

    def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        return self._in

    async def write(self, data: str) -> None:
        message = json.loads(data)
        if message["type"] == "control_request" and message["request"]["subtype"] == "initialize":
            for event, matchers in (message["request"].get("hooks") or {}).items():
                self.hooks[event] = [(m.get("matcher"), m["hookCallbackIds"]) for m in matchers]
            await self._out.send(
                {
                    "type": "control_response",
                    "response": {
                        "subtype": "success",
                        "request_id": message["request_id"],
                        "response": {"commands": []},
                    },
                }
            )
        elif message["type"] == "control_response":
            request_id = message["response"]["request_id"]
            self._answers[request_id] = message["response"]
            self._arrived[request_id].set()

    async def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        request_id = f"cli_{self._next}"
        self._arrived[request_id] = anyio.Event()
        await self._out.send(
            {"type": "control_request", "request_id": request_id, "request": request}
        )
        await self._arrived[request_id].wait()
        answer = self._answers.pop(request_id)
        assert answer["subtype"] == "success", answer
        return answer["response"]  # type: ignore[no-any-return]

    async def mcp(self, message: dict[str, Any]) -> dict[str, Any]:
        response = await self.ask(
            {"subtype": "mcp_message", "server_name": "lockyard", "message": message}
        )
        return response["mcp_response"]  # type: ignore[no-any-return]

    async def open_mcp(self) -> None:
        """The CLI's handshake with an SDK server: initialize, then initialized."""
        self._mcp_open = True
        initialized = await self.mcp(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "claude-code", "version": "2.1.330"},
                },
            }
        )
        assert initialized["result"]["serverInfo"]["name"] == "lockyard"
        await self.mcp({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if not self._mcp_open:
            await self.open_mcp()
        self._next += 1
        message = {
            "jsonrpc": "2.0",
            "id": self._next,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        return (await self.mcp(message))["result"]  # type: ignore[no-any-return]

    async def fire(self, event: str, tool_name: str, **fields: Any) -> list[dict[str, Any]]:
        """Run every hook the CLI would run for `event` on `tool_name`; their outputs."""
        outputs = []
        for matcher, callback_ids in self.hooks.get(event, []):
            if not cli_matches(matcher, tool_name):
                continue
            for callback_id in callback_ids:
                hook_input = {
                    "session_id": "s1",
                    "transcript_path": "/tmp/t.jsonl",
                    "cwd": fields.pop("cwd", None) or "/",
                    "permission_mode": "default",
                    "hook_event_name": event,
                    "tool_name": tool_name,
                    "tool_use_id": "toolu_1",
                    **fields,
                }
                outputs.append(
                    await self.ask(
                        {
                            "subtype": "hook_callback",
                            "callback_id": callback_id,
                            "tool_use_id": "toolu_1",
                            "input": hook_input,
                        }
                    )
                )
        return outputs


def denied(outputs: list[dict[str, Any]]) -> list[str]:
    return [
        output["hookSpecificOutput"]["permissionDecisionReason"]
        for output in outputs
        if output.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"
    ]


@pytest.mark.anyio
async def test_the_hooks_and_tools_work_through_the_sdk_control_protocol(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    target = repo / "a.py"
    target.write_text("")
    coordinator = LockCoordinator(repo, tmp_path / "locks")
    runtime = coordinator.runtime("alice")
    key = coordinator.store.canonicalize("a.py")
    fake = FakeCLI()
    write = {"tool_input": {"file_path": str(target), "content": "x"}, "cwd": str(repo)}

    with anyio.fail_after(20):
        async with runtime, ClaudeSDKClient(runtime.options, transport=fake):
            # The hooks were registered with matchers the CLI reads as we mean them.
            assert set(fake.hooks) == {"PreToolUse", "PostToolUse", "PostToolUseFailure"}
            assert cli_matches(fake.hooks["PostToolUse"][0][0], ACQUIRE)
            assert not cli_matches(fake.hooks["PostToolUse"][0][0], "mcp__lockyard__other")

            # Writing before locking is denied, with the exact call to make.
            reasons = denied(await fake.fire("PreToolUse", "Write", **write))
            assert len(reasons) == 1
            assert f'{ACQUIRE} with {{"filepaths": ["{key}"]}}' in reasons[0]
            # A read is allowed (only the read note answers it), and noted: the guards will
            # refuse alice's writes to a.py if someone else changes it before she writes.
            read = {"tool_input": {"file_path": str(target)}}
            assert await fake.fire("PreToolUse", "Read", **read) == [{}]
            assert seen_state(str(repo), "alice", key) == (False, None)

            # The tool over mcp_message: the monitor sees the hold immediately.
            result = await fake.call_tool("lock_acquire", {"filepaths": ["a.py"]})
            payload = json.loads(result["content"][0]["text"])
            assert payload["all_acquired"] is True
            assert coordinator.monitor.snapshot().holds == {key: "alice"}

            # Now the write passes, and PostToolUse re-reports the hold harmlessly.
            assert denied(await fake.fire("PreToolUse", "Write", **write)) == []
            post = await fake.fire(
                "PostToolUse",
                ACQUIRE,
                tool_input={"filepaths": ["a.py"]},
                tool_response=result["content"],
            )
            assert post == [{}]
            assert coordinator.monitor.snapshot().holds == {key: "alice"}

            # A timed-out acquire: the failure hook ends any wait edge (a backstop).
            await fake.fire(
                "PostToolUseFailure",
                ACQUIRE,
                tool_input={"filepaths": ["a.py"]},
                error='MCP server "lockyard" tool "lock_acquire" timed out after 1s',
            )
            assert coordinator.monitor.snapshot().waits == ()

            # A bad call is an error result with our text, through the SDK too.
            bad = await fake.call_tool("lock_acquire", {"filepaths": []})
            assert bad["isError"] is True
            assert '"filepaths" is empty' in bad["content"][0]["text"]

            # Bash commits are guarded too (here: not a git repo, so nothing to judge).
            bash = {"tool_input": {"command": "git commit -am x"}, "cwd": str(repo)}
            assert denied(await fake.fire("PreToolUse", "Bash", **bash)) == []

    # The agent ended: its lock is released and the monitor was told.
    assert coordinator.store.holder("a.py") is None
    assert coordinator.monitor.snapshot().holds == {}
    assert coordinator.monitor.snapshot().agents == ()


@pytest.mark.anyio
async def test_a_release_reported_by_the_hook_reaches_the_monitor(tmp_path: Path) -> None:
    """A monitor that missed the tool's own event converges from the PostToolUse hook."""
    repo = tmp_path / "repo"
    repo.mkdir()
    coordinator = LockCoordinator(repo, tmp_path / "locks")
    runtime = coordinator.runtime("alice")
    fake = FakeCLI()
    seen: list[tuple[LockEventType, str]] = []
    original = coordinator.monitor.handle_event

    async def spy(event: Any) -> Any:
        seen.append((event.event_type, event.lock_path))
        return await original(event)

    coordinator.monitor.handle_event = spy  # type: ignore[method-assign]
    with anyio.fail_after(20):
        async with runtime, ClaudeSDKClient(runtime.options, transport=fake):
            response = [{"type": "text", "text": json.dumps({"released": ["__x__"], "count": 1})}]
            await fake.fire(
                "PostToolUse",
                "mcp__lockyard__lock_release",
                tool_input={"all": True},
                tool_response=response,
            )
    assert (LockEventType.RELEASED, "__x__") in seen
