"""PostToolUse / PostToolUseFailure hook: lock tool results -> ACQUIRED / RELEASED events.

The tools already tell the monitor every change as it happens; this hook re-reports what the
model was told, so a monitor wired only to hooks (or one that missed an event) still converges.
Duplicates are harmless by design. The hook never raises and always returns a dict: a broken
hook must not block the agent, and the CLI treats `None` as a failure.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ...core.events import LockEvent, LockEventType
from ...core.ports import EmitLockEvent, deliver
from ..tools.naming import DEFAULT_SERVER_KEY, acquire_tool_name, release_tool_name

if TYPE_CHECKING:
    from claude_agent_sdk import HookContext
    from claude_agent_sdk.types import SyncHookJSONOutput

logger = logging.getLogger(__name__)


def make_lock_event_hook(
    emit_lock_event: EmitLockEvent,
    server_key: str = DEFAULT_SERVER_KEY,
    *,
    agent_id: str,
    canonicalize: Callable[[str], str] | None = None,
) -> Callable[[Any, str | None, HookContext], Any]:
    """A hook for PostToolUse and PostToolUseFailure on `mcp__<server_key>__lock_*`.

    PostToolUse: every `acquired` file of a lock_acquire result -> ACQUIRED; every file a
    lock_release (or a deadlock victim's lock_acquire) released -> RELEASED.
    PostToolUseFailure of lock_acquire (the CLI's tool timeout, or an error): WAIT_ENDED for
    each requested file, as a backstop to the handler's own cancellation cleanup. That needs
    `canonicalize` (the store's) to name the files by their lock keys; without it the failure
    is ignored. Error results never fire PostToolUse (the CLI sends PostToolUseFailure).
    """
    acquire_name = acquire_tool_name(server_key)
    release_name = release_tool_name(server_key)

    async def emit(event_type: LockEventType, lock_path: str) -> None:
        try:
            event = LockEvent(event_type=event_type, agent_id=agent_id, lock_path=lock_path)
            await deliver(emit_lock_event, event)
        except Exception:
            logger.exception("lock event hook could not emit %s %r", event_type, lock_path)

    async def hook(
        input_data: Any, tool_use_id: str | None, context: HookContext
    ) -> SyncHookJSONOutput:
        if not isinstance(input_data, dict):
            return {}
        tool_name = input_data.get("tool_name")
        if tool_name not in (acquire_name, release_name):
            return {}
        event_name = input_data.get("hook_event_name")
        if event_name == "PostToolUse":
            payload = tool_result_payload(input_data.get("tool_response"))
            if payload is None:
                logger.warning(
                    "lock event hook: unreadable %s response %r",
                    tool_name,
                    input_data.get("tool_response"),
                )
                return {}
            for event_type, lock_path in events_from_result(payload):
                await emit(event_type, lock_path)
        elif event_name == "PostToolUseFailure" and tool_name == acquire_name:
            for lock_path in _requested_keys(input_data.get("tool_input"), canonicalize):
                await emit(LockEventType.WAIT_ENDED, lock_path)
        return {}

    return hook


def tool_result_payload(response: object) -> dict[str, Any] | None:
    """The JSON object a lock tool returned, from any shape the CLI hands a hook.

    Seen or possible: a list of content blocks `[{"type": "text", "text": "{...}"}]` (SDK
    servers), a JSON string (external servers with structured content), a dict with
    `content`, a `{"result": "..."}` wrapper, or the object itself. Errors and anything else
    give None.
    """
    if isinstance(response, str):
        try:
            response = json.loads(response)
        except ValueError:
            return None
    if isinstance(response, dict):
        if response.get("is_error") or response.get("isError"):
            return None
        if "content" in response:
            return tool_result_payload(response["content"])
        if "results" in response or "released" in response:
            return response
        if isinstance(response.get("result"), str):
            return tool_result_payload(response["result"])
        return None
    if isinstance(response, list):
        for block in response:
            if isinstance(block, dict) and block.get("type") == "text":
                payload = tool_result_payload(block.get("text"))
                if payload is not None:
                    return payload
    return None


def events_from_result(payload: dict[str, Any]) -> Iterator[tuple[LockEventType, str]]:
    """The holds and releases a lock_acquire / lock_release result reports."""
    results = payload.get("results")
    if isinstance(results, list):
        for item in results:
            if (
                isinstance(item, dict)
                and item.get("acquired") is True
                and _is_key(item.get("filepath"))
            ):
                yield LockEventType.ACQUIRED, item["filepath"]
    released = payload.get("released")
    deadlock = payload.get("deadlock")
    if isinstance(deadlock, dict):
        released = deadlock.get("released")
    if isinstance(released, list):
        for lock_path in released:
            if _is_key(lock_path):
                yield LockEventType.RELEASED, lock_path


def _requested_keys(tool_input: object, canonicalize: Callable[[str], str] | None) -> Iterator[str]:
    if canonicalize is None or not isinstance(tool_input, dict):
        return
    paths = tool_input.get("filepaths")
    if not isinstance(paths, list):
        return
    seen: set[str] = set()
    for path in paths:
        if not isinstance(path, str):
            continue
        try:
            key = canonicalize(path)
        except Exception:  # a bad path was never waited on
            continue
        if key not in seen:
            seen.add(key)
            yield key


def _is_key(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())
