"""lockyard's own MCP client (the demo's) against the connection every `lockyard serve` answers
with, over real pipes in one event loop: calls at once on one connection, a withdrawn call,
error answers, and the end of the connection."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from lockyard.core.events import LockEvent, LockEventType
from lockyard.infra.lockstore import LockStore
from lockyard.infra.tools.lock_tools import LockTools
from lockyard.infra.transports.stdio.mcp_client import McpLineClient, McpRequestError, connected
from lockyard.infra.transports.stdio.server import StdioToolSession

DEADLINE = 30.0
"""Ends a hang; no test asserts on time."""


class Agent:
    """agent-1's lock tools on a real lock directory; b.py is held by `other`."""

    def __init__(self, tmp_path: Path) -> None:
        repo = (tmp_path / "repo").resolve()
        repo.mkdir()
        self.store = LockStore(repo, tmp_path / "locks")
        assert self.store.try_lock("b.py", "other")
        self.waiting = anyio.Event()
        self.wait_ended = anyio.Event()
        self.tools = LockTools(self.store, "agent-1", self.emit)

    async def emit(self, event: LockEvent) -> None:
        if event.event_type is LockEventType.WAITING:
            self.waiting.set()
        elif event.event_type is LockEventType.WAIT_ENDED:
            self.wait_ended.set()

    async def wait_for_b(self, client: McpLineClient, answers: list[dict[str, Any]]) -> None:
        args = {"filepaths": ["b.py"], "timeout_seconds": DEADLINE}
        answers.append(payload(await client.call_tool("lock_acquire", args)))


def payload(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is False, result
    [block] = result["content"]
    loaded: dict[str, Any] = json.loads(block["text"])
    return loaded


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[Agent]:
    with anyio.fail_after(DEADLINE):
        yield Agent(tmp_path)


@pytest.mark.anyio
async def test_a_waiting_call_holds_up_no_other_call_on_the_connection(agent: Agent) -> None:
    answers: list[dict[str, Any]] = []
    async with (
        connected(StdioToolSession(agent.tools)) as client,
        anyio.create_task_group() as group,
    ):
        group.start_soon(agent.wait_for_b, client, answers)
        await agent.waiting.wait()
        now = await client.call_tool("lock_acquire", {"filepaths": ["a.py"], "timeout_seconds": 0})
        assert payload(now)["all_acquired"] is True
        names = [tool["name"] for tool in await client.list_tools()]
        assert names[:2] == ["lock_acquire", "lock_release"]
        assert agent.store.release("b.py", "other")
    assert answers[0]["all_acquired"] is True
    assert agent.store.holder("b.py") == "agent-1"


@pytest.mark.anyio
async def test_a_cancelled_call_is_withdrawn_from_the_server(agent: Agent) -> None:
    async with connected(StdioToolSession(agent.tools)) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(agent.wait_for_b, client, [])
            await agent.waiting.wait()
            group.cancel_scope.cancel()
        await agent.wait_ended.wait()  # the server cancelled the wait, not just the client
        assert agent.store.waiters("b.py") == []
        assert agent.store.release("b.py", "other")
        still = await client.call_tool("lock_acquire", {"filepaths": ["c.py"]})
        assert payload(still)["all_acquired"] is True  # the connection goes on
    assert agent.store.holder("b.py") is None


@pytest.mark.anyio
async def test_an_error_answer_is_raised_with_its_message(agent: Agent) -> None:
    async with connected(StdioToolSession(agent.tools)) as client:
        with pytest.raises(McpRequestError, match=r"resources/list: Method not found.*-32601"):
            await client.request("resources/list")
        bad = await client.call_tool("lock_acquire", {"filepaths": []})
        assert bad["isError"] is True  # a tool's refusal is a result, as over stdio


@pytest.mark.anyio
async def test_leaving_ends_a_waiting_call_and_every_later_one(agent: Agent) -> None:
    failures: list[BaseException] = []

    async def wait_then_fail(client: McpLineClient) -> None:
        try:
            await agent.wait_for_b(client, [])
        except McpRequestError as error:
            failures.append(error)

    async with (
        anyio.create_task_group() as group,
        connected(StdioToolSession(agent.tools)) as client,
    ):
        group.start_soon(wait_then_fail, client)
        await agent.waiting.wait()
    await agent.wait_ended.wait()
    assert [str(error) for error in failures] == ["tools/call: the server ended the connection"]
    assert agent.store.waiters("b.py") == []
    with pytest.raises(McpRequestError, match="ended the connection"):
        await client.call_tool("lock_release", {"all": True})
