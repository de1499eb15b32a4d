"""PreToolUse enforcement: no edit and no commit of a file this agent has not locked.

`make_write_guard_hook` denies Write, Edit, MultiEdit and NotebookEdit on a file inside the
repository unless the lock store says this agent holds its lock; `make_commit_guard_hook`
(in `commit_guard.py`) denies a Bash `git commit` that would include files the agent has not
locked. Both only read the store: no hook takes or releases a lock, and none runs at the end
of a turn (the ancestor's Stop hook released everything behind the monitor's back).

A deny reaches the model as an error tool result whose text is our reason, so the reasons say
exactly what to do next.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Final

from claude_agent_sdk import HookContext
from claude_agent_sdk.types import SyncHookJSONOutput

from ..tools.lock_tools import UNREADABLE_HOLDER
from ..tools.naming import DEFAULT_SERVER_KEY, acquire_tool_name
from .commit_guard import BASH_MATCHER, make_commit_guard_hook
from .guard_common import (
    GuardStore,
    HookFn,
    deny,
    holder_or_unreadable,
    inside_repo,
    lost_grant,
)

__all__ = [
    "BASH_MATCHER",
    "WRITE_TOOLS",
    "WRITE_TOOLS_MATCHER",
    "GuardStore",
    "deny",
    "make_commit_guard_hook",
    "make_write_guard_hook",
]

logger = logging.getLogger(__name__)

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
        raw = _target_path(input_data.get("tool_input"))
        if raw is None:
            return {}  # the tool itself will reject a call without a path
        path = _absolute(raw, input_data.get("cwd"))
        if not inside_repo(path, store.namespace):
            if allow_outside_repo:
                return {}
            return deny(f"{raw} is outside the repository {store.namespace}: edit files inside it.")
        try:
            key = store.canonicalize(path)
        except ValueError as exc:
            return deny(f"Cannot edit {raw}: {exc}.")
        try:
            holder = holder_or_unreadable(store, key)
        except Exception as exc:  # fail closed: an unreadable lock is not a granted lock
            logger.exception("write guard could not read the lock of %s", key)
            return deny(f"Cannot check the lock of {key} ({exc}); retry the edit shortly.")
        if holder == UNREADABLE_HOLDER:
            return deny(
                f"The lock of {key} is unreadable, so nobody may edit it: ask the operator to "
                "run `lockyard status`, and work on other files meanwhile."
            )
        stale = lost_grant(store, key, agent_id)
        if stale is not None:
            return deny(
                f"{stale}: the lock you were granted was lost, so your edit could overwrite "
                f'another agent\'s. Call {acquire} with {{"filepaths": ["{key}"]}}, re-read '
                "the file, then edit."
            )
        if holder == agent_id:
            return {}
        return deny(_not_locked_reason(key, holder, acquire))

    return hook


def _not_locked_reason(key: str, holder: str | None, acquire: str) -> str:
    call = f'{acquire} with {{"filepaths": ["{key}"]}}'
    if holder is None:
        return f"{key} is not locked by you. Call {call} first, then retry this edit."
    return (
        f"{key} is locked by agent {holder}. Call {call} (it waits for {holder} to release it), "
        "or work on other files first; then retry this edit."
    )


def _target_path(tool_input: object) -> str | None:
    if not isinstance(tool_input, dict):
        return None
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _absolute(path: str, cwd: object) -> str:
    if os.path.isabs(path) or not isinstance(cwd, str) or not cwd:
        return path
    return os.path.join(cwd, path)
