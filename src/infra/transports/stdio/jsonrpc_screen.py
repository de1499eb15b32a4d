"""Lines from an MCP client over stdio, checked before the mcp server sees them.

The mcp library gives no answer at all to a line that is not a JSON-RPC message (it cannot
tell which request it was), nor to a `tools/call` whose `arguments` is not an object; and its
JSON parser refuses a string holding an escaped lone surrogate (`"\\ud800"`: not UTF-8 text).
A client then waits for an answer that never comes. JSON-RPC 2.0 asks for an error response
instead, and the lock tools promise an `is_error` tool result for bad arguments, so each line
is screened here: the ones answered here never reach the server.

| line | answer |
| --- | --- |
| not UTF-8, not JSON | error -32700 (parse error), id null |
| JSON, but not a JSON-RPC 2.0 message | error -32600 (invalid request), its id or null |
| text with a lone surrogate, in a `tools/call` | an `is_error` tool result |
| text with a lone surrogate, in another request | error -32602 (invalid params) |
| a `tools/call` whose `arguments` is not an object | an `is_error` tool result |

A notification (no id) that is screened out gets no answer (JSON-RPC never answers those).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import mcp.types as types
from pydantic import ValidationError

from ...tools.lock_tools import ToolOutcome
from ...tools.mcp_server import to_call_tool_result

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
INVALID_PARAMS: Final = -32602

NOT_UTF8_TEXT: Final = (
    "the request holds text that is not valid UTF-8 (an escaped lone surrogate such as "
    "\\ud800, usually a file name decoded from bytes that are not UTF-8). Nothing was "
    "locked or released. Send paths and names as UTF-8 text; lockyard cannot lock files "
    "whose names are not UTF-8."
)
ARGUMENTS_NOT_OBJECT: Final = (
    '"arguments" must be a JSON object, e.g. {{"filepaths": ["src/a.py"]}}; got {kind}. '
    "Nothing was locked or released."
)


@dataclass(frozen=True, slots=True)
class Screened:
    """What to do with one line: pass `line` on to the server, or send `reply` (or neither)."""

    line: str | None = None
    reply: types.JSONRPCMessage | None = None


def screen(raw: bytes) -> Screened:
    """Check one line from the client (without its newline)."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        return Screened(
            reply=_error(
                None,
                PARSE_ERROR,
                f"Parse error: {_ascii(error)}. Send one JSON-RPC 2.0 message per line, "
                "as UTF-8 JSON.",
            )
        )
    request_id = _request_id(data)
    method = data.get("method") if isinstance(data, dict) else None
    if not _is_utf8(data):
        if request_id is None or not isinstance(method, str):
            return Screened()
        if method == "tools/call":
            return Screened(reply=_tool_error(request_id, NOT_UTF8_TEXT))
        message = f"Invalid params: {NOT_UTF8_TEXT}"
        return Screened(reply=_error(request_id, INVALID_PARAMS, message))
    try:
        types.jsonrpc_message_adapter.validate_python(data, by_name=False)
    except ValidationError:
        return Screened(
            reply=_error(
                request_id,
                INVALID_REQUEST,
                'Invalid Request: not a JSON-RPC 2.0 message; send {"jsonrpc": "2.0", '
                '"id": 1, "method": "...", "params": {...}}.',
            )
        )
    if method == "tools/call" and request_id is not None:
        params = data.get("params")
        arguments = params.get("arguments") if isinstance(params, dict) else None
        if arguments is not None and not isinstance(arguments, dict):
            kind = f"a JSON {_json_kind(arguments)}"
            return Screened(reply=_tool_error(request_id, ARGUMENTS_NOT_OBJECT.format(kind=kind)))
    return Screened(line=raw.decode("utf-8"))


def _is_utf8(data: Any) -> bool:
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _request_id(data: Any) -> str | int | None:
    if not isinstance(data, dict):
        return None
    request_id = data.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    if isinstance(request_id, str) and not _is_utf8(request_id):
        return None
    return request_id


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "number"


def _ascii(error: BaseException) -> str:
    return str(error).encode("ascii", "backslashreplace").decode("ascii")


def _error(request_id: str | int | None, code: int, message: str) -> types.JSONRPCMessage:
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
    )


def _tool_error(request_id: str | int, text: str) -> types.JSONRPCMessage:
    result = to_call_tool_result(ToolOutcome.error(text))
    return types.JSONRPCResponse(
        jsonrpc="2.0",
        id=request_id,
        result=result.model_dump(by_alias=True, mode="json", exclude_none=True),
    )
