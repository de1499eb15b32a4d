"""One MCP connection over stdio, spoken without the mcp package.

`lockyard serve` is started by every agent CLI session, and importing mcp cost more CPU than
the rest of its start (1.4-2.1 s under load): long enough for Copilot CLI's discovery probe
and Qwen Code's fixed 10 s connect limit to give up. A tools-only server needs a small part
of the protocol, so it is answered here, one JSON-RPC 2.0 message per line:

| message | answer |
| --- | --- |
| `initialize` | the client's protocol version when it is one of ours, else our latest |
| `ping` | an empty result |
| `tools/list` | the tools (`ToolServer.list_tools`) |
| `tools/call` | run in a task of its own, so pings and cancellations are read meanwhile |
| `notifications/cancelled` | cancels that call; its answer is never sent (as MCP asks) |
| any other request | -32601, method not found |
| other notifications, responses | nothing (this server sends no requests) |

`server/discover` (the 2026-07-28 revision's probe) is "method not found" too, so a client
that probes first falls back to `initialize` on the same connection, and one that times the
probe out and sends `initialize` anyway gets its handshake: both orders work.

Malformed lines are answered by `jsonrpc_screen` before they reach this dispatcher.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any, Final, Protocol

import anyio
from anyio.abc import TaskGroup

from .jsonrpc_screen import INVALID_PARAMS, error_reply, screen

log = logging.getLogger("lockyard.serve")

PROTOCOL_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The MCP revisions with the `initialize` handshake that this server speaks, oldest first."""

METHOD_NOT_FOUND: Final = -32601
INTERNAL_ERROR: Final = -32603
SERVER_NAME: Final = "lockyard"

Progress = Callable[[float, str], Awaitable[None]]
"""Sends one progress notification: the seconds waited so far and a message."""


class ToolServer(Protocol):
    """What the connection serves: the tool listing and the calls, as MCP JSON objects."""

    async def list_tools(self) -> list[dict[str, Any]]: ...

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, progress: Progress | None
    ) -> dict[str, Any]: ...


class StdoutLines:
    """Messages out as JSON lines on a file descriptor, one writer at a time.

    The event loop waits until the pipe takes data, so a client that is slow to read holds
    up only the writer, not the signal handlers or the calls in progress. The descriptor may
    be non-blocking (the in-process pipes of `mcp_client.connected`).
    """

    def __init__(self, fd: int = 1) -> None:
        self._fd = fd
        self._lock = anyio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        pending = memoryview((text + "\n").encode("utf-8", errors="backslashreplace"))
        async with self._lock:
            try:
                while pending:
                    await self._wait_writable()
                    try:
                        pending = pending[os.write(self._fd, pending) :]
                    except BlockingIOError:  # a non-blocking pipe filled up meanwhile
                        continue
            except BrokenPipeError:  # the client is gone; stdin's end will end the session
                log.debug("the client closed its end of stdout")

    async def _wait_writable(self) -> None:
        try:
            await anyio.wait_writable(self._fd)
        except (OSError, ValueError):  # a regular file cannot be polled: it is always ready
            await anyio.lowlevel.checkpoint()


class McpConnection:
    """Dispatches the client's messages to a `ToolServer` and writes the answers."""

    def __init__(self, server: ToolServer, output: StdoutLines, version: str) -> None:
        self._server = server
        self._output = output
        self._version = version
        self._calls: dict[str | int, anyio.CancelScope] = {}

    async def serve(self, lines: AsyncIterable[bytes]) -> None:
        """Answer every line until the input ends; calls still running are then cancelled."""
        async with anyio.create_task_group() as calls:
            async for raw in lines:
                screened = screen(raw)
                if screened.reply is not None:
                    log.info("answered a malformed message: %s", json.dumps(screened.reply)[:200])
                    await self._output.send(screened.reply)
                if screened.message is not None:
                    await self._dispatch(screened.message, calls)
            calls.cancel_scope.cancel()

    async def _dispatch(self, message: dict[str, Any], calls: TaskGroup) -> None:
        method = message.get("method")
        params: dict[str, Any] = message.get("params") or {}
        if method is None:
            return  # a response: this server sends no requests, so it waits for none
        if "id" not in message:
            if method == "notifications/cancelled":
                self._cancel(params.get("requestId"))
            return
        request_id: str | int = message["id"]
        if method == "initialize":
            await self._reply(request_id, self._initialize_result(params))
        elif method == "ping":
            await self._reply(request_id, {})
        elif method == "tools/list":
            calls.start_soon(self._answer, request_id, self._list_tools)
        elif method == "tools/call":
            await self._start_call(request_id, params, calls)
        else:
            text = f"Method not found: {method} (this server offers the lock tools only)"
            await self._output.send(error_reply(request_id, METHOD_NOT_FOUND, text))

    def _initialize_result(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        return {
            "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": SERVER_NAME, "version": self._version},
        }

    async def _list_tools(self) -> dict[str, Any]:
        return {"tools": await self._server.list_tools()}

    async def _start_call(
        self, request_id: str | int, params: dict[str, Any], calls: TaskGroup
    ) -> None:
        name = params.get("name")
        if not isinstance(name, str):
            text = 'Invalid params: tools/call needs "name", the tool to call, as a string.'
            await self._output.send(error_reply(request_id, INVALID_PARAMS, text))
            return
        progress = self._progress_sender(params.get("_meta"))

        async def call() -> dict[str, Any]:
            return await self._server.call_tool(name, params.get("arguments"), progress)

        calls.start_soon(self._answer, request_id, call)

    def _progress_sender(self, meta: Any) -> Progress | None:
        """Progress notifications for the call, when the client asked for them with a token."""
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if isinstance(token, bool) or not isinstance(token, str | int):
            return None

        async def send(progress: float, message: str) -> None:
            params = {"progressToken": token, "progress": progress, "message": message}
            await self._output.send(
                {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
            )

        return send

    async def _answer(
        self, request_id: str | int, produce: Callable[[], Awaitable[dict[str, Any]]]
    ) -> None:
        """Run one request; send its result unless the client cancelled it meanwhile."""
        result: dict[str, Any] | None = None
        with anyio.CancelScope() as scope:
            self._calls[request_id] = scope
            try:
                result = await produce()
            except Exception as exc:
                log.exception("request %r failed", request_id)
                text = f"Internal error: {exc}. Tell the user; retrying may not help."
                await self._output.send(error_reply(request_id, INTERNAL_ERROR, text))
                return
            finally:
                if self._calls.get(request_id) is scope:
                    del self._calls[request_id]
        if result is not None:
            await self._reply(request_id, result)

    def _cancel(self, request_id: Any) -> None:
        scope = self._calls.get(request_id) if isinstance(request_id, str | int) else None
        if scope is not None:
            log.info("request %r cancelled by the client", request_id)
            scope.cancel()

    async def _reply(self, request_id: str | int, result: dict[str, Any]) -> None:
        await self._output.send({"jsonrpc": "2.0", "id": request_id, "result": result})
