"""How long one guarded tool call may wait for lockyard's answer, at each step.

Codex CLI, Gemini CLI, Qwen Code and Copilot CLI let a tool call through when their hook
times out, and OpenCode, Kilo and pi wait for their plugin without any limit. So the hook
answers by a deadline of its own, well before the CLI's timeout: a guard that has not judged
the call by then refuses it (exit 2 with the reason on stderr, which every supported CLI reads
as a refusal). The CLI's timeout, which `lockyard init` writes, is only the backstop for a hook
process that cannot even do that.

Standard library only, and no imports: the command hook's fast path reads this.
"""

from __future__ import annotations

HOOK_DEADLINE_SECONDS = 25.0
"""The command hook (and a plugin's wait for the guard) refuses the call when it has no
answer by then. The guard's own bounds stay under it (the shell walk 5 s, git 10 s, a
sandbox's host 15 s)."""

CLI_HOOK_TIMEOUT_SECONDS = 60
"""The hook timeout `lockyard init` writes for a command hook (and a plugin's `spawnSync`):
the deadline above plus room for a Python process to start on a loaded machine."""

LATE_EXIT_CODE = 2
"""How a late hook refuses: exit 2 with the reason on stderr blocks the call in every
supported CLI (a plugin refuses on any non-zero status)."""


def late_reason(seconds: float) -> str:
    """What the agent reads when the guard did not answer in time."""
    return (
        f"lockyard's guard did not answer within {seconds:g} s (the machine is very busy, or "
        "the guard is stuck), so this call is refused. Retry it; if it is refused again, ask "
        "the operator to run `lockyard doctor`."
    )
