"""The shell guard: writes made through a shell command are checked before the command runs.

`decide_shell_command(command, cwd, agent_id, store)` -> `Decision` is the one entry point
(the SDK hook in `hook.py` and the agent-CLI hooks call it). One module per job:
`syntax` parses (tree-sitter's Bash grammar), `words` expands words, `utilities`, `oneliners`
and `git` know what commands write, `targets` walks a command line for its write targets,
`decide` checks them against the lock store.
"""

from .decide import DEFAULT_POLICY, Decision, ShellGuardPolicy, decide_shell_command, judge
from .hook import SHELL_TOOLS, make_shell_guard_hook
from .targets import Target, WriteTargets, write_targets

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
