"""The lock tools' MCP `tools/list` and `tools/call` results as plain JSON objects.

`lockyard serve` speaks MCP over stdio without the mcp package (its import costs more CPU
than the rest of the server's start, and a slow first answer times out agent CLIs' connect
probes), so the listing and the results are built here from `TOOL_SPECS` and `ToolOutcome`.
The in-process server (`mcp_server`) validates these same objects into mcp's types, so both
transports publish identical tools and results.
"""

from __future__ import annotations

from typing import Any

from .lock_tools import TOOL_SPECS, ToolOutcome

SERVER_VERSION = "0.1.0"


def tool_listing() -> list[dict[str, Any]]:
    """The published tools, as `tools/list` carries them."""
    return [
        {"name": spec.name, "description": spec.description, "inputSchema": dict(spec.input_schema)}
        for spec in TOOL_SPECS
    ]


def call_result(outcome: ToolOutcome) -> dict[str, Any]:
    """One text block; `isError` set for rejected or failed calls (never a protocol error)."""
    return {"content": [{"type": "text", "text": outcome.text}], "isError": outcome.is_error}
