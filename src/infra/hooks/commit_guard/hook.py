"""The commit guard as a claude-agent-sdk PreToolUse hook on the Bash tool (see `decide.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ...lockstore import journal_denied_writes
from ..guard_common import GuardStore, HookFn, deny
from .decide import commit_denial

if TYPE_CHECKING:
    from claude_agent_sdk import HookContext
    from claude_agent_sdk.types import SyncHookJSONOutput

__all__ = ["BASH_MATCHER", "make_commit_guard_hook"]

BASH_MATCHER: Final = "Bash"


def make_commit_guard_hook(
    store: GuardStore, agent_id: str, server_key: str = "lockyard"
) -> HookFn:
    """PreToolUse hook (matcher "Bash") denying a `git commit` of files this agent has not locked.

    Files outside the store's repository are not judged. If git cannot tell what would be
    committed (not a repository), the command is left to fail or succeed on its own.
    """
    import anyio.to_thread  # the SDK path only: `lockyard hook` runs without anyio

    from ...tools.naming import acquire_tool_name

    acquire = acquire_tool_name(server_key)

    async def hook(
        input_data: Any, tool_use_id: str | None, context: HookContext
    ) -> SyncHookJSONOutput:
        if not isinstance(input_data, dict) or input_data.get("tool_name") != "Bash":
            return {}
        tool_input = input_data.get("tool_input")
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if not isinstance(command, str):
            return {}
        cwd = input_data.get("cwd")
        reason = await anyio.to_thread.run_sync(
            commit_denial, store, agent_id, command, cwd, acquire
        )
        if reason is None:
            return {}
        await anyio.to_thread.run_sync(journal_denied_writes, store, agent_id, "commit", (), reason)
        return deny(reason)

    return hook
