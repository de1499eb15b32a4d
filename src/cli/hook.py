"""`lockyard hook <event>`: the agent CLI hook, as a command.

Parsed by hand, not by typer: a hook is one process per tool call, so this path imports only
what the call needs: on the fast path, what hands it to the session's guard
(`lockyard.infra.agentcli.hook_client`; not even `typing`), else what judges it here
(`lockyard.infra.agentcli.hook_runner`). The typer command of the same name exists for
`lockyard --help` and delegates here.
"""

from __future__ import annotations

import os
import sys
import time

from ..infra.agentcli.hook_timeouts import HOOK_DEADLINE_SECONDS, LATE_EXIT_CODE, late_reason

TYPE_CHECKING = False  # not `typing`'s: importing typing costs the fast path time
if TYPE_CHECKING:
    from threading import Lock
    from typing import Final

HOOK_USAGE: Final = """usage: lockyard hook pre-tool-use --cli NAME [--lock-dir DIR]
                                            [--guard-port PORT] [--agent-id ID --repo PATH]
       lockyard hook pre-tool-use --cli NAME --ipc DIR [--repo PATH]

Judge one tool call of an agent CLI session (JSON on stdin), answering in that CLI's hook
format: a write to a file the session has not locked, or a `git commit` of such files, is
denied with a reason that tells the agent what to do. NAME: claude-code, codex, gemini,
opencode, copilot, qwen, pi, kilo, droid, auggie. Without --agent-id the session is found from
the process tree: the agent CLI process above this hook that runs `lockyard serve`, whose guard
(on the lock directory's guard port) judges the call; with no guard answering, this process
judges it itself. In a sandbox, --ipc names its IPC folder: the host (`lockyard ipc-host`) answers
for the folder's agent. `lockyard init` writes these hooks.
"""

EVENTS: Final = frozenset({"pre-tool-use", "PreToolUse", "BeforeTool"})
_OPTIONS: Final = ("--cli", "--lock-dir", "--agent-id", "--repo", "--guard-port", "--ipc")


def main(argv: list[str]) -> int:
    """Run the hook; the exit code. Usage errors exit 2 (which every supported CLI reads as
    'blocked', so a misconfigured hook fails closed)."""
    deadline = time.monotonic() + HOOK_DEADLINE_SECONDS
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(HOOK_USAGE)
        return 0 if argv else 2
    event, rest = argv[0], argv[1:]
    options: dict[str, str] = {}
    while rest:
        option = rest.pop(0)
        name, sep, value = option.partition("=")
        if name not in _OPTIONS:
            return _usage(f"unknown option {option!r}")
        if not sep:
            if not rest:
                return _usage(f"{name} needs a value")
            value = rest.pop(0)
        options[name] = value
    if event not in EVENTS:
        return _usage(f"unknown hook event {event!r}; lockyard handles pre-tool-use")
    if "--ipc" in options and ("--agent-id" in options or "--lock-dir" in options):
        return _usage(
            "--ipc takes the agent from the sandbox's folder and the locks from its host: "
            "drop --agent-id and --lock-dir"
        )
    cli = options.get("--cli", "claude-code")
    from ..infra.agentcli.guard_address import MAX_PAYLOAD_BYTES

    raw = sys.stdin.buffer.read(MAX_PAYLOAD_BYTES + 1)
    if not options.get("--agent-id") and "--ipc" not in options and len(raw) <= MAX_PAYLOAD_BYTES:
        # The session's own server judges the call (the fast path); it identifies this
        # process by its connection, so an explicit --agent-id (or a sandbox's host, --ipc)
        # is judged here instead.
        from ..infra.agentcli.hook_client import ask_guard

        try:
            told = ask_guard(
                cli, raw, options.get("--lock-dir"), options.get("--guard-port"), deadline
            )
        except ValueError:  # a bad lock directory or port: the full path below says what
            told = None
        if told is not None:
            sys.stdout.buffer.write(told.stdout + b"\n" if told.stdout else b"")
            sys.stderr.buffer.write(told.stderr + b"\n" if told.stderr else b"")
            sys.stdout.flush()
            return told.exit_code
    from ..infra.agentcli.formats import FORMATS

    fmt = FORMATS.get(cli)
    if fmt is None:
        return _usage(f"unknown --cli {cli!r}; use one of {', '.join(sorted(FORMATS))}")
    answering = _refuse_at(deadline)
    from ..infra.agentcli.hook_runner import HookSettings, run_pre_tool_use

    settings = HookSettings(
        lock_dir=options.get("--lock-dir") or os.environ.get("LOCKYARD_LOCK_DIR") or None,
        agent_id=options.get("--agent-id") or None,
        repo=options.get("--repo") or None,
        ipc=options.get("--ipc") or None,
    )
    answer = run_pre_tool_use(fmt, raw, settings)
    answering.acquire()  # held for good by a late refusal, which ends the process
    if answer.stdout:
        sys.stdout.write(answer.stdout + "\n")
    if answer.stderr:
        sys.stderr.write(answer.stderr + "\n")
    sys.stdout.flush()
    return answer.exit_code


def _refuse_at(deadline: float) -> Lock:
    """Start the watchdog that refuses the call at `deadline` if this process is still
    judging it (a CLI that times the hook out would let the call through). The caller takes
    the returned lock before it prints its own answer: only one of the two answers."""
    import threading

    answering = threading.Lock()

    def refuse() -> None:
        if answering.acquire(blocking=False):
            os.write(2, (late_reason(HOOK_DEADLINE_SECONDS) + "\n").encode())
            os._exit(LATE_EXIT_CODE)

    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), refuse)
    watchdog.daemon = True
    watchdog.start()
    return answering


def _usage(message: str) -> int:
    sys.stderr.write(f"lockyard: error: {message}\n{HOOK_USAGE}")
    return 2
