"""The shell guard as a PreToolUse hook for the Agent SDK (matcher "Bash")."""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

import anyio

from ...lockstore import journal_denied_writes
from ...tools.naming import DEFAULT_SERVER_KEY, acquire_tool_name
from ..guard_common import GuardStore, HookFn, deny, note_writes
from ..read_note.note import note_reads
from .decide import DEFAULT_POLICY, ShellGuardPolicy, decide_shell_command

if TYPE_CHECKING:
    from claude_agent_sdk import HookContext
    from claude_agent_sdk.types import SyncHookJSONOutput

logger = logging.getLogger(__name__)

SHELL_TOOLS = ("Bash",)


def make_shell_guard_hook(
    store: GuardStore,
    agent_id: str,
    server_key: str = DEFAULT_SERVER_KEY,
    *,
    policy: ShellGuardPolicy = DEFAULT_POLICY,
) -> HookFn:
    """PreToolUse hook denying a Bash command that would write repository files this agent
    has not locked (or, by `policy`, whose targets cannot be read)."""
    acquire = acquire_tool_name(server_key)

    async def hook(
        input_data: Any, tool_use_id: str | None, context: HookContext
    ) -> SyncHookJSONOutput:
        if not isinstance(input_data, dict) or input_data.get("tool_name") not in SHELL_TOOLS:
            return {}
        tool_input = input_data.get("tool_input")
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if not isinstance(command, str) or not command.strip():
            return {}
        cwd = input_data.get("cwd")
        decide = functools.partial(
            decide_shell_command,
            command,
            cwd if isinstance(cwd, str) and cwd else None,
            agent_id,
            store,
            policy=policy,
            acquire_tool=acquire,
        )
        try:
            # In a worker thread: git queries and globs must not stall the agents' event loop.
            decision = await anyio.to_thread.run_sync(decide)
        except Exception as exc:  # fail closed: an unread command is not a checked command
            logger.exception("shell guard failed on %r", command)
            reason = f"The shell guard could not check this command ({exc}); retry it."
            await anyio.to_thread.run_sync(
                journal_denied_writes, store, agent_id, "shell", (), reason
            )
            return deny(reason)
        if decision.allowed:
            # The book notes the writes as this agent's own, and what the command shows it.
            if decision.to_note:
                await anyio.to_thread.run_sync(note_writes, store, agent_id, decision.to_note)
            if decision.viewed:
                await anyio.to_thread.run_sync(note_reads, store, agent_id, decision.viewed, None)
            return {}
        reason = decision.reason or "denied by the shell guard"
        files = [key for key, _holder in decision.unlocked]
        await anyio.to_thread.run_sync(
            journal_denied_writes, store, agent_id, "shell", files, reason
        )
        return deny(reason)

    return hook
