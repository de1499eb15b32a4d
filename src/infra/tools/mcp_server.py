"""The lock tools as an MCP server (mcp 2.x low-level `Server`), for any transport.

We build the server ourselves instead of using `claude_agent_sdk.create_sdk_mcp_server`:
that helper validates arguments with jsonschema before our handler runs, so the model would
get "Input validation error: [] should be non-empty" instead of our texts, and a stdio server
would answer differently from the in-process one. Here validation, results and error texts
all come from `LockTools`, whichever transport carries them.
"""

from __future__ import annotations

from typing import Any

import mcp.types as types
from mcp.server import Server

from .lock_tools import LockTools, ToolOutcome
from .mcp_wire import SERVER_VERSION, call_result, tool_listing


def list_tools_result() -> types.ListToolsResult:
    """The published tools: names, descriptions and input schemas from TOOL_SPECS."""
    return types.ListToolsResult.model_validate({"tools": tool_listing()}, by_name=False)


def to_call_tool_result(outcome: ToolOutcome) -> types.CallToolResult:
    """One text block; `is_error` set for rejected or failed calls (never a protocol error)."""
    return types.CallToolResult.model_validate(call_result(outcome), by_name=False)


def build_lock_tools_server(tools: LockTools, name: str = "lockyard") -> Server[Any]:
    """An MCP server publishing the lock tools (`TOOL_SPECS`) for `tools.agent_id`."""

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return list_tools_result()

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return to_call_tool_result(await tools.call(params.name, params.arguments))

    server: Server[Any] = Server(
        name,
        version=SERVER_VERSION,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
    return server
