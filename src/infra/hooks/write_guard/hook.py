"""The write guard as a PreToolUse hook: no edit of a file this agent has not locked.

`make_write_guard_hook` denies Write, Edit, MultiEdit and NotebookEdit on a file inside the
repository unless the lock store says this agent holds its lock (the decision is
`decide.py`'s, shared with the agent CLI hooks). Like the commit and shell guards, it only
reads the store: no hook takes or releases a lock, and none runs at the end of a turn (a Stop
hook that released every lock there would leave the deadlock monitor believing in holds that
are gone, and the agent in the middle of a task without its locks).

A deny reaches the model as an error tool result whose text is our reason, so the reasons say
exactly what to do next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ...lockstore import journal_denied_writes, store_call
from ...tools.naming import DEFAULT_SERVER_KEY, acquire_tool_name
from ..guard_common import GuardStore, HookFn, deny, note_writes
from .decide import judge_write

if TYPE_CHECKING:
    from claude_agent_sdk import HookContext
    from claude_agent_sdk.types import SyncHookJSONOutput

__all__ = [
    "WRITE_TOOLS",
    "WRITE_TOOLS_MATCHER",
    "GuardStore",
    "deny",
    "make_write_guard_hook",
]

WRITE_TOOLS: Final = ("Write", "Edit", "MultiEdit", "NotebookEdit")
WRITE_TOOLS_MATCHER: Final = "|".join(WRITE_TOOLS)
"""A HookMatcher.matcher naming exactly the write tools (an exact-name list for the CLI)."""

_PATH_KEYS: Final = ("file_path", "notebook_path", "path")


def make_write_guard_hook(
    store: GuardStore,
    agent_id: str,
    server_key: str = DEFAULT_SERVER_KEY,
    *,
    allow_outside_repo: bool = True,
) -> HookFn:
    """PreToolUse hook denying writes to repo files whose lock this agent does not hold.

    Files outside the repository are not lockyard's business and are allowed (scratch files
    in /tmp, say) unless `allow_outside_repo=False`. Paths the store rejects as invalid are
    denied.
    """
    acquire = acquire_tool_name(server_key)

    async def hook(
        input_data: Any, tool_use_id: str | None, context: HookContext
    ) -> SyncHookJSONOutput:
        if not isinstance(input_data, dict) or input_data.get("tool_name") not in WRITE_TOOLS:
            return {}
        raw = target_path(input_data.get("tool_input"))
        if raw is None:
            return {}  # the tool itself will reject a call without a path
        # Reads the store: off the event loop when the store waits on a server.
        reason, written = await store_call(
            store,
            judge_write,
            store,
            agent_id,
            raw,
            input_data.get("cwd"),
            acquire,
            allow_outside_repo=allow_outside_repo,
        )
        if reason is None:
            if written:  # allowed: the book notes the write as this agent's own
                await store_call(store, note_writes, store, agent_id, written)
            return {}
        await store_call(store, journal_denied_writes, store, agent_id, "write", [raw], reason)
        return deny(reason)

    return hook


def target_path(tool_input: object) -> str | None:
    """The file a write tool's input names (`file_path`, `notebook_path` or `path`)."""
    if not isinstance(tool_input, dict):
        return None
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value
    return None
