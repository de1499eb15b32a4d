"""The read note as a PreToolUse hook of an SDK agent: Read, and the viewers of a Bash command.

It never refuses anything; it notes what the agent is about to see (`note.py`), so the write,
shell and commit guards can tell a write made from a stale read. A Bash command another guard
refuses is noted all the same: a note of a read that did not happen can only cost a refusal
that asks the agent to read again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ...lockstore import store_call
from ..guard_common import GuardStore, HookFn
from .note import note_reads, note_shell_reads

if TYPE_CHECKING:
    from claude_agent_sdk import HookContext
    from claude_agent_sdk.types import SyncHookJSONOutput

READ_NOTE_MATCHER: Final = "Read|Bash"


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
        elif tool == "Bash" and isinstance(command := tool_input.get("command"), str):
            import anyio.to_thread  # the SDK path only

            # Parsing the command takes a while: in a worker thread, like the shell guard.
            await anyio.to_thread.run_sync(note_shell_reads, store, agent_id, command, cwd)
        return {}

    return hook
