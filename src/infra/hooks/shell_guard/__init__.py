"""The shell guard: writes made through a shell command are checked before the command runs.

`decide_shell_command(command, cwd, agent_id, store)` -> `Decision` is the one entry point
(the SDK hook in `hook.py` and the agent-CLI hooks call it). One module per job:
`syntax` parses (tree-sitter's Bash grammar), `words` expands words, `utilities`,
`oneliners`, `formatters` and `git` know what commands write, `targets` walks a command line
for its write targets, `decide` checks them against the lock store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .decide import DEFAULT_POLICY, Decision, ShellGuardPolicy, decide_shell_command, judge
from .targets import Target, WriteTargets, write_targets

if TYPE_CHECKING:
    from .hook import SHELL_TOOLS, make_shell_guard_hook


def __getattr__(name: str) -> Any:
    # The SDK hook loads claude_agent_sdk: only on demand, so agent-CLI hooks (one process
    # per tool call) that call `decide_shell_command` do not pay for it.
    if name in ("SHELL_TOOLS", "make_shell_guard_hook"):
        from . import hook

        return getattr(hook, name)
    raise AttributeError(name)


__all__ = [
    "DEFAULT_POLICY",
    "SHELL_TOOLS",
    "Decision",
    "ShellGuardPolicy",
    "Target",
    "WriteTargets",
    "decide_shell_command",
    "judge",
    "make_shell_guard_hook",
    "write_targets",
]
