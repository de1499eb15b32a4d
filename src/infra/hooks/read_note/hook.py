"""The read note as a PreToolUse hook of an SDK agent, for its Read tool.

It never refuses anything; it notes what the agent is about to see (`note.py`), so the write,
shell and commit guards can tell a write made from a stale read. What a Bash command shows
(`cat f`) the shell guard notes, once it allows the command: it has parsed the command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ...lockstore import store_call
from ..guard_common import GuardStore, HookFn
from .note import note_reads

if TYPE_CHECKING:
    from claude_agent_sdk import HookContext
    from claude_agent_sdk.types import SyncHookJSONOutput

READ_NOTE_MATCHER: Final = "Read"


def make_read_note_hook(store: GuardStore, agent_id: str) -> HookFn:
    """PreToolUse hook (matcher `READ_NOTE_MATCHER`) noting the files the agent reads."""

    async def hook(
        input_data: Any, tool_use_id: str | None, context: HookContext
    ) -> SyncHookJSONOutput:
        if not isinstance(input_data, dict):
            return {}
        tool, tool_input = input_data.get("tool_name"), input_data.get("tool_input")
        if not isinstance(tool_input, dict):
            return {}
        cwd = input_data.get("cwd")
        if tool == "Read" and isinstance(path := tool_input.get("file_path"), str):
            # The store may be asked for the key: off the loop when it waits on a server.
            await store_call(store, note_reads, store, agent_id, [path], cwd)
        return {}

    return hook
