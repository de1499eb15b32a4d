"""Git's turns in the shell guard: which command lines must take one, and what to say.

With git turns on (`ShellGuardPolicy.git_turns`; agent CLIs: `LOCKYARD_GIT_TURNS=1` in the
CLI's environment), a command line that runs a git command which takes a repository lock
(anything but the read-only queries: `git add`, `commit`, `stash`, `checkout`, `fetch`, `gc`,
`config`...) is refused until it starts with `lockyard git-turn --agent ID &&`, and the
refusal gives that prefix. The agent's shell then holds the turn for the line
(docs/no-lost-edits.md, 'Git takes turns').

Whatever the setting, a line that holds a turn may not also wait for file locks (`lockyard
lock`): an agent that holds one of those files and waits for git's turn would close a cycle.
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import Final

TURNS_VARIABLE: Final = "LOCKYARD_GIT_TURNS"
_ON: Final = frozenset({"1", "on", "yes", "true"})
_SHOWN_LINE_CHARS: Final = 300
"""A longer command line is not repeated in the refusal: only the prefix to put in front."""


def turns_from_environment(environ: os._Environ[str] | dict[str, str] | None = None) -> bool:
    """Whether `LOCKYARD_GIT_TURNS` turns git turns on (1, on, yes, true)."""
    values = os.environ if environ is None else environ
    return values.get(TURNS_VARIABLE, "").strip().lower() in _ON


def lockyard_program() -> str | None:
    """How an agent's shell runs this lockyard: `lockyard` when that is the one on PATH, else
    its full path; None when there is none to name."""
    import shutil  # only for a git line: hook processes do not load it otherwise

    candidates = [os.path.join(os.path.dirname(sys.executable), "lockyard")]
    if os.path.basename(sys.argv[0] if sys.argv else "") == "lockyard":
        candidates.insert(0, os.path.abspath(sys.argv[0]))
    ours = next((path for path in candidates if os.access(path, os.X_OK)), None)
    on_path = shutil.which("lockyard")
    if ours is None:
        return "lockyard" if on_path else None
    if on_path is not None and os.path.realpath(on_path) == os.path.realpath(ours):
        return "lockyard"
    return shlex.quote(ours)


def turn_prefix(program: str, agent_id: str, directory: str | None) -> str:
    """What goes in front of a command line that runs git in `directory` (None: its cwd)."""
    prefix = f"{program} git-turn --agent {shlex.quote(agent_id)}"
    if directory is not None:
        prefix += f" -C {shlex.quote(directory)}"
    return f"{prefix} && "


def turn_refusal(git_command: str, prefix: str, command: str) -> str:
    """Why a line that runs `git_command` without a turn is refused, and what to run instead."""
    said = (
        f"`{git_command}` takes git's repository locks, and here agents take turns at git, so "
        "that no git command fails on another agent's `.git/index.lock`. Put "
        f"`{prefix.strip()}` in front of your command line and run it again: it waits until the "
        "earlier agents' git lines have ended, then runs yours (your shell holds the turn "
        "until the line ends)."
    )
    if len(command) <= _SHOWN_LINE_CHARS:
        said += f" That is: {prefix}{command}"
    return said


def waiting_refusal(lock_command: str) -> str:
    """Why a line that holds git's turn and waits for file locks is refused."""
    return (
        f"This command line holds git's turn and runs `{lock_command}`, which waits for file "
        "locks: an agent holding one of those files could be waiting for git's turn, and "
        "neither would go on. Run them as two commands."
    )
