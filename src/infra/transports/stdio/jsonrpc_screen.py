"""Lines from an MCP client over stdio, checked before the server dispatches them.

A client must never wait for an answer that never comes: JSON-RPC 2.0 asks for an error
response to a line that is not a message (id null when it cannot be read), and the lock tools
promise an `is_error` tool result for bad arguments. A string holding an escaped lone
surrogate (`"\\ud800"`) parses as JSON but is not UTF-8 text, so it could not be a path or
be written back; it is refused here too. The lines answered here never reach the dispatcher.

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

from ...tools.lock_tools import ToolOutcome
from ...tools.mcp_wire import call_result

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
    """What to do with one line: dispatch `message`, or send `reply` (or neither)."""

    message: dict[str, Any] | None = None
    reply: dict[str, Any] | None = None


def screen(raw: bytes) -> Screened:
    """Check one line from the client (without its newline)."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        return Screened(
            reply=error_reply(
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
        return Screened(reply=error_reply(request_id, INVALID_PARAMS, message))
    if not is_jsonrpc_message(data):
        return Screened(
            reply=error_reply(
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
    return Screened(message=data)


def is_jsonrpc_message(data: Any) -> bool:
    """A JSON-RPC 2.0 request, notification or response (batches are not MCP since 2025-06)."""
    if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
        return False
    if "method" in data:
        if not isinstance(data["method"], str):
            return False
        if "id" in data and _request_id(data) is None:
            return False
        return data.get("params") is None or isinstance(data["params"], dict)
    has_one_outcome = ("result" in data) != ("error" in data)
    return "id" in data and has_one_outcome


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


def error_reply(request_id: str | int | None, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error response."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _tool_error(request_id: str | int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": call_result(ToolOutcome.error(text))}
