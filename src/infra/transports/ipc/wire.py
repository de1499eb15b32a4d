"""The IPC wire format, version 1: request and response files, their JSON schemas, and a strict
parser for requests that treats every byte as untrusted.

A request is one JSON object in `requests/<id>.json`; its answer is one JSON object in
`responses/<id>.json`, written by the host. The id is the file name, so two requests in flight
can never be confused (no timestamp matching). The schemas below are the published contract for
clients written in any language (docs/sandboxes.md prints them); `parse_request` enforces them
without a schema library, with an error text that says what to send instead.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

WIRE_VERSION: Final = 1

MAX_REQUEST_BYTES: Final = 64 * 1024
"""A lock call with 256 paths of realistic length fits easily; a bigger file is refused unread."""
MAX_TOOL_NAME_CHARS: Final = 64

REQUEST_ID_PATTERN: Final = r"[A-Za-z0-9_-]{8,64}"
_REQUEST_ID: Final = re.compile(REQUEST_ID_PATTERN)
REQUEST_SUFFIX: Final = ".json"
TEMP_PREFIX: Final = "."
"""Files being written (temp names) start with a dot; readers skip them."""

Kind = Literal["call", "list_tools", "cancel", "check", "denied"]
KINDS: Final[tuple[str, ...]] = ("call", "list_tools", "cancel", "check", "denied")
MAX_CHECK_PATHS: Final = 256
"""Files one `check` asks about (a write guard asks about the few files one tool call writes)."""
MAX_CHECK_PATH_CHARS: Final = 4096
DENYING_GUARDS: Final[tuple[str, ...]] = ("write", "shell", "commit")
"""The guards whose refusals a sandbox reports (`denied`), for the host's journal."""
MAX_DENIAL_REASON_CHARS: Final = 4000

# Error codes of a refused request (`"ok": false`). Stable: clients may branch on them.
BAD_REQUEST: Final = "bad_request"
UNSUPPORTED_VERSION: Final = "unsupported_version"
TOO_LARGE: Final = "too_large"
NOT_A_FILE: Final = "not_a_regular_file"
RATE_LIMITED: Final = "rate_limited"
TOO_MANY_IN_FLIGHT: Final = "too_many_in_flight"
RECLAIMED: Final = "reclaimed"
SHUTTING_DOWN: Final = "shutting_down"
UNREADABLE: Final = "unreadable"
ERROR_CODES: Final[tuple[str, ...]] = (
    BAD_REQUEST,
    UNSUPPORTED_VERSION,
    TOO_LARGE,
    NOT_A_FILE,
    RATE_LIMITED,
    TOO_MANY_IN_FLIGHT,
    RECLAIMED,
    SHUTTING_DOWN,
    UNREADABLE,
)

REQUEST_SCHEMA: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://lockyard.dev/schemas/ipc-request-v1.json",
    "title": "lockyard IPC request, version 1 (file requests/<id>.json)",
    "type": "object",
    "properties": {
        "version": {"const": WIRE_VERSION},
        "id": {
            "type": "string",
            "pattern": f"^{REQUEST_ID_PATTERN}$",
            "description": "Equal to the file name without .json; unique per request.",
        },
        "kind": {"enum": list(KINDS)},
        "tool": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_TOOL_NAME_CHARS,
            "description": "The tool to call (kind 'call' only).",
        },
        "arguments": {
            "type": "object",
            "description": (
                "kind 'call': the tool's arguments, as its input_schema describes. kind "
                "'check': {\"filepaths\": [...]}, the files the sandbox's write guard asks "
                'about. kind \'denied\': {"guard": "write"|"shell"|"commit", '
                '"filepaths": [...], "reason": "..."}, a write the sandbox\'s guard '
                "refused, for the host's journal (answered with an empty result)."
            ),
        },
        "target": {
            "type": "string",
            "pattern": f"^{REQUEST_ID_PATTERN}$",
            "description": (
                "kind 'cancel': the id of this sandbox's call to abandon (the host gives back "
                "what it took). A cancel is never answered."
            ),
        },
    },
    "required": ["version", "id", "kind"],
    "additionalProperties": False,
}

_RESULT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "The tool result text, as MCP carries it."},
        "is_error": {"type": "boolean"},
    },
    "required": ["text", "is_error"],
    "additionalProperties": False,
}

RESPONSE_SCHEMA: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://lockyard.dev/schemas/ipc-response-v1.json",
    "title": "lockyard IPC response, version 1 (file responses/<id>.json)",
    "type": "object",
    "properties": {
        "version": {"const": WIRE_VERSION},
        "id": {"type": "string", "pattern": f"^{REQUEST_ID_PATTERN}$"},
        "ok": {"type": "boolean", "description": "false: the request was refused unrun."},
        "result": {**_RESULT_SCHEMA, "description": "kind 'call' and ok: the tool's result."},
        "tools": {
            "type": "array",
            "description": "kind 'list_tools' and ok: the tools this sandbox may call.",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "input_schema": {"type": "object"},
                },
                "required": ["name", "description", "input_schema"],
            },
        },
        "check": {
            "type": "object",
            "description": (
                "kind 'check' and ok: this sandbox's agent id (its folder's name) and, per "
                "file asked about, its lock key and holder, why this agent's own grant is no "
                "longer valid (`lost`), the agents holding the file shared (`readers`), "
                "for this agent's own directory or glob lock another agent still holding "
                "something below it (`below`: the lock still waits), the glob locks that "
                "cover it (`globs`, each answered too: its `path` is its key), or why the "
                "host refused the path (`error`)."
            ),
            "properties": {
                "agent": {"type": "string"},
                "locks": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string"},
                            "filepath": {"type": "string"},
                            "holder": {"type": ["string", "null"]},
                            "unreadable": {"type": "boolean"},
                            "lost": {"type": ["string", "null"]},
                            "readers": {"type": "array", "items": {"type": "string"}},
                            "below": {"type": ["string", "null"]},
                            "globs": {"type": "array", "items": {"type": "string"}},
                            "error": {"type": "string"},
                        },
                        "required": ["path"],
                    },
                },
            },
            "required": ["agent", "locks"],
        },
        "error": {
            "type": "object",
            "description": "not ok: why the request was refused, and what to do instead.",
            "properties": {
                "code": {"enum": list(ERROR_CODES)},
                "message": {"type": "string"},
                "retry_after": {"type": "number", "minimum": 0},
            },
            "required": ["code", "message"],
            "additionalProperties": False,
        },
    },
    "required": ["version", "id", "ok"],
    "additionalProperties": False,
}

HEARTBEAT_SCHEMA_NOTE: Final = (
    "heartbeat: any content (the client writes a counter); the host only notes that it changed."
)


class WireError(ValueError):
    """A request the host refuses unrun; `code` is one of ERROR_CODES, `str()` the message."""

    def __init__(self, code: str, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class Request:
    id: str
    kind: Kind
    tool: str | None = None
    arguments: Mapping[str, Any] | None = None
    target: str | None = None


def new_request_id() -> str:
    """128 random bits, URL-safe: unique without any clock."""
    return secrets.token_urlsafe(16)


def request_file_name(request_id: str) -> str:
    return request_id + REQUEST_SUFFIX


def request_id_of(file_name: str) -> str | None:
    """The request id a file name carries, or None if the name is not a request's."""
    if not file_name.endswith(REQUEST_SUFFIX):
        return None
    stem = file_name[: -len(REQUEST_SUFFIX)]
    return stem if _REQUEST_ID.fullmatch(stem) else None


def encode_request(request: Request) -> bytes:
    body: dict[str, Any] = {"version": WIRE_VERSION, "id": request.id, "kind": request.kind}
    if request.kind == "call":
        body["tool"] = request.tool
        body["arguments"] = dict(request.arguments or {})
    elif request.kind == "cancel":
        body["target"] = request.target
    elif request.kind in ("check", "denied"):
        body["arguments"] = dict(request.arguments or {})
    return json.dumps(body, separators=(",", ":")).encode()


def parse_request(raw: bytes, file_id: str) -> Request:
    """The request in `raw` (read from `requests/<file_id>.json`), or WireError."""
    if len(raw) > MAX_REQUEST_BYTES:
        raise WireError(TOO_LARGE, f"the request is over {MAX_REQUEST_BYTES} bytes; send less")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireError(
            BAD_REQUEST, f"the request is not UTF-8 ({exc.reason}); send UTF-8 JSON"
        ) from None
    try:
        body = json.loads(text)
    except RecursionError:
        raise WireError(
            BAD_REQUEST, "the request is nested too deeply; send a flat object"
        ) from None
    except ValueError as exc:
        raise WireError(
            BAD_REQUEST, f"the request is not JSON ({exc}); send one JSON object"
        ) from None
    if not isinstance(body, dict):
        raise WireError(BAD_REQUEST, "the request must be one JSON object")
    unknown = sorted(set(body) - set(REQUEST_SCHEMA["properties"]))
    if unknown:
        raise WireError(BAD_REQUEST, _unknown_fields_text(unknown))
    version = body.get("version")
    if version != WIRE_VERSION or isinstance(version, bool):
        raise WireError(
            UNSUPPORTED_VERSION,
            f'"version" is {version!r}; this host speaks version {WIRE_VERSION}',
        )
    if body.get("id") != file_id:
        raise WireError(BAD_REQUEST, f'"id" must equal the file name ({file_id!r})')
    kind = body.get("kind")
    if kind in ("list_tools", "cancel") and ("tool" in body or "arguments" in body):
        raise WireError(BAD_REQUEST, f'a "{kind}" request takes no "tool" or "arguments"')
    if kind == "check":
        return _parse_check(body, file_id)
    if kind == "denied":
        return _parse_denied(body, file_id)
    if kind == "list_tools":
        if "target" in body:
            raise WireError(BAD_REQUEST, 'only a "cancel" request takes a "target"')
        return Request(file_id, "list_tools")
    if kind == "cancel":
        target = body.get("target")
        if not isinstance(target, str) or not _REQUEST_ID.fullmatch(target):
            raise WireError(BAD_REQUEST, '"target" must be the id of the call to cancel')
        return Request(file_id, "cancel", target=target)
    if "target" in body:
        raise WireError(BAD_REQUEST, 'only a "cancel" request takes a "target"')
    if kind != "call":
        raise WireError(BAD_REQUEST, f'"kind" must be one of {list(KINDS)}, got {kind!r}')
    tool = body.get("tool")
    if not isinstance(tool, str) or not 0 < len(tool) <= MAX_TOOL_NAME_CHARS:
        raise WireError(BAD_REQUEST, '"tool" must name the tool to call (a short string)')
    arguments = body.get("arguments", {})
    if not isinstance(arguments, dict):
        raise WireError(BAD_REQUEST, '"arguments" must be a JSON object')
    return Request(file_id, "call", tool, arguments)


def _parse_check(body: Mapping[str, Any], file_id: str) -> Request:
    if "tool" in body or "target" in body:
        raise WireError(BAD_REQUEST, 'a "check" request takes no "tool" or "target"')
    arguments = body.get("arguments")
    paths = arguments.get("filepaths") if isinstance(arguments, dict) else None
    if (
        not isinstance(arguments, dict)
        or set(arguments) != {"filepaths"}
        or not isinstance(paths, list)
        or len(paths) > MAX_CHECK_PATHS
        or not all(isinstance(p, str) and 0 < len(p) <= MAX_CHECK_PATH_CHARS for p in paths)
    ):
        raise WireError(
            BAD_REQUEST,
            f'a "check" request takes "arguments": {{"filepaths": [...]}}: at most '
            f"{MAX_CHECK_PATHS} paths, each a non-empty string",
        )
    return Request(file_id, "check", arguments={"filepaths": list(paths)})


def _parse_denied(body: Mapping[str, Any], file_id: str) -> Request:
    if "tool" in body or "target" in body:
        raise WireError(BAD_REQUEST, 'a "denied" request takes no "tool" or "target"')
    arguments = body.get("arguments")
    if isinstance(arguments, dict) and set(arguments) == {"guard", "filepaths", "reason"}:
        guard, paths, reason = arguments["guard"], arguments["filepaths"], arguments["reason"]
        if (
            guard in DENYING_GUARDS
            and isinstance(paths, list)
            and len(paths) <= MAX_CHECK_PATHS
            and all(isinstance(p, str) and 0 < len(p) <= MAX_CHECK_PATH_CHARS for p in paths)
            and isinstance(reason, str)
            and 0 < len(reason) <= MAX_DENIAL_REASON_CHARS
        ):
            fields = {"guard": guard, "filepaths": list(paths), "reason": reason}
            return Request(file_id, "denied", arguments=fields)
    raise WireError(
        BAD_REQUEST,
        f'a "denied" request takes "arguments": {{"guard": one of {list(DENYING_GUARDS)}, '
        f'"filepaths": at most {MAX_CHECK_PATHS} non-empty strings, "reason": 1 to '
        f"{MAX_DENIAL_REASON_CHARS} characters}}",
    )


def _unknown_fields_text(unknown: Sequence[str]) -> str:
    listed = ", ".join(f'"{name}"' for name in unknown)
    return (
        f"unknown field(s) {listed}: a request carries only version, id, kind, tool, "
        "arguments and target. Who sent it is the folder it was written to, never a field"
    )


def encode_result(request_id: str, text: str, is_error: bool) -> bytes:
    return _dump(
        {
            "version": WIRE_VERSION,
            "id": request_id,
            "ok": True,
            "result": {"text": text, "is_error": is_error},
        }
    )


def encode_tools(request_id: str, tools: Sequence[Mapping[str, Any]]) -> bytes:
    return _dump({"version": WIRE_VERSION, "id": request_id, "ok": True, "tools": list(tools)})


def encode_check(request_id: str, agent: str, locks: Sequence[Mapping[str, Any]]) -> bytes:
    body = {"agent": agent, "locks": [dict(lock) for lock in locks]}
    return _dump({"version": WIRE_VERSION, "id": request_id, "ok": True, "check": body})


def encode_refusal(request_id: str, error: WireError) -> bytes:
    detail: dict[str, Any] = {"code": error.code, "message": str(error)}
    if error.retry_after is not None:
        detail["retry_after"] = round(error.retry_after, 3)
    return _dump({"version": WIRE_VERSION, "id": request_id, "ok": False, "error": detail})


def _dump(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()
