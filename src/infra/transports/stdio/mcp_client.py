"""The client end of the MCP connection that `lockyard serve` answers, without the mcp package.

`lockyard demo` drives each scripted agent's lock tools through `connected()`: the tools are
answered by `McpConnection` (the code every `lockyard serve` answers with) in the same event
loop, over two pipes, so an agent sends and reads the very JSON lines an agent CLI exchanges
with `lockyard serve`. The plain install has no mcp package (only `lockyard[sdk]` needs it:
the SDK's in-process server), and the demo runs on it.

The client sends requests and waits for their answers, any number at a time; a request
cancelled while it waits is withdrawn with `notifications/cancelled`, as MCP asks.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

import anyio

from ...tools.mcp_wire import SERVER_VERSION
from .mcp_connection import PROTOCOL_VERSIONS, McpConnection, StdoutLines, ToolServer
from .server import StdinLines

CLIENT_NAME: Final = "lockyard-client"


class McpRequestError(RuntimeError):
    """A request was answered with a JSON-RPC error, or the connection ended before its answer."""


class McpLineClient:
    """Requests as JSON lines through `output`; `read_answers` hands each answer to its request.

    Run `read_answers` in a task of its own for as long as the connection lasts.
    """

    def __init__(self, output: StdoutLines) -> None:
        self._output = output
        self._last_id = 0
        self._waiting: dict[int, anyio.Event] = {}
        self._answers: dict[int, dict[str, Any]] = {}
        self._ended: str | None = None

    async def read_answers(self, lines: AsyncIterable[bytes]) -> None:
        """Until the server's output ends; then every request still waiting fails."""
        try:
            async for raw in lines:
                message = json.loads(raw)
                request_id = message.get("id") if isinstance(message, dict) else None
                if not isinstance(request_id, int) or request_id not in self._waiting:
                    continue  # progress, or the answer to a withdrawn request: nothing to do
                if "result" in message or "error" in message:
                    self._answers[request_id] = message
                    self._waiting[request_id].set()
        finally:
            self._ended = "the server ended the connection"
            for waiting in self._waiting.values():
                waiting.set()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and return its result; McpRequestError for an error answer."""
        if self._ended is not None:
            raise McpRequestError(f"{method}: {self._ended}")
        self._last_id += 1
        request_id = self._last_id
        answered = self._waiting[request_id] = anyio.Event()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self._output.send(message)
            await answered.wait()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                withdrawn = {"requestId": request_id, "reason": "cancelled by the client"}
                await self.notify("notifications/cancelled", withdrawn)
            raise
        finally:
            del self._waiting[request_id]
        answer = self._answers.pop(request_id, None)
        if answer is None:
            raise McpRequestError(f"{method}: {self._ended}")
        if "error" in answer:
            error = answer["error"]
            raise McpRequestError(f"{method}: {error.get('message')} (code {error.get('code')})")
        result: dict[str, Any] = answer["result"]
        return result

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        if self._ended is None:
            await self._output.send(message)

    async def initialize(self) -> dict[str, Any]:
        """MCP's handshake: `initialize`, then `notifications/initialized`."""
        result = await self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSIONS[-1],
                "capabilities": {},
                "clientInfo": {"name": CLIENT_NAME, "version": SERVER_VERSION},
            },
        )
        await self.notify("notifications/initialized")
        return result

    async def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = (await self.request("tools/list"))["tools"]
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The `tools/call` result: `content` (text blocks) and `isError`."""
        return await self.request("tools/call", {"name": name, "arguments": arguments})


@asynccontextmanager
async def connected(server: ToolServer) -> AsyncIterator[McpLineClient]:
    """An initialized client of `server`, which `McpConnection` answers in this event loop.

    Leaving closes the client's end: the server then ends as `lockyard serve` does when its
    stdin closes (calls still running are cancelled), and its output ends after it.
    """
    to_server_read, to_server_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    from_server_read, from_server_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    open_fds = {to_server_read, to_server_write, from_server_read, from_server_write}

    def close(fd: int) -> None:
        if fd in open_fds:
            open_fds.discard(fd)
            os.close(fd)

    async def serve() -> None:
        connection = McpConnection(server, StdoutLines(from_server_write), SERVER_VERSION)
        try:
            await connection.serve(StdinLines(to_server_read))
        finally:
            close(from_server_write)  # the client's reader sees the end

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(serve)
            client = McpLineClient(StdoutLines(to_server_write))
            group.start_soon(client.read_answers, StdinLines(from_server_read))
            try:
                await client.initialize()
                yield client
            finally:
                close(to_server_write)  # the server reads the end of its input
    finally:
        for fd in list(open_fds):  # the read ends, once nothing waits on them
            close(fd)
