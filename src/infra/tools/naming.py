"""The names the model and the hooks see for our tools: `mcp__<server key>__<tool>`.

The CLI names an MCP tool after the key under which the server sits in
`ClaudeAgentOptions.mcp_servers` (not the server's own name) and rewrites other characters,
so we only accept keys made of `[A-Za-z0-9_-]`: then the name we compute is the name it uses.
"""

from __future__ import annotations

import re
from typing import Final

from .tool_inputs import ACQUIRE_TOOL, RELEASE_TOOL, STATUS_TOOL

DEFAULT_SERVER_KEY: Final = "lockyard"
_SERVER_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_server_key(server_key: str) -> str:
    """Return `server_key` if the CLI will use it unchanged, else raise ValueError."""
    if not isinstance(server_key, str) or not _SERVER_KEY.fullmatch(server_key):
        raise ValueError(
            f"server key {server_key!r} must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-' "
            "(the CLI rewrites other characters in tool names)"
        )
    return server_key


def mcp_tool_name(server_key: str, tool: str) -> str:
    """The full tool name, e.g. `mcp__lockyard__lock_acquire`."""
    return f"mcp__{check_server_key(server_key)}__{tool}"


def acquire_tool_name(server_key: str = DEFAULT_SERVER_KEY) -> str:
    return mcp_tool_name(server_key, ACQUIRE_TOOL)


def release_tool_name(server_key: str = DEFAULT_SERVER_KEY) -> str:
    return mcp_tool_name(server_key, RELEASE_TOOL)


def status_tool_name(server_key: str = DEFAULT_SERVER_KEY) -> str:
    return mcp_tool_name(server_key, STATUS_TOOL)
