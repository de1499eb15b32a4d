"""`lockyard git-turn [--agent ID] [-C DIR]`: wait for this command line's turn at git.

Run first on a command line (`lockyard git-turn --agent alice && git commit -m ...`), by the
shell that runs the line: that shell (this process's parent) holds the turn until it ends.
It always exits 0 and prints nothing on stdout, so the line goes on and the agent reads only
its git's output. It says on stderr whom it waits for once it has waited a second, and goes
on without the turn after `LOCKYARD_GIT_TURN_LIMIT` seconds (600 by default), saying who held
it: git then fails on its lock file as it would have without lockyard, never worse.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Final, NamedTuple, TextIO

from ..clone_state import checkout_root, git_dirs
from ..session.process_tree import ProcessRef, process_ref
from .tickets import Ticket, turn_line
from .waiting import lock_files, wait_for_end, wait_for_lock_files

DEFAULT_LIMIT: Final = 600.0
"""Seconds a turn is waited for at most: a holder stuck in an editor must not stop every git."""
LIMIT_VARIABLE: Final = "LOCKYARD_GIT_TURN_LIMIT"
QUIET: Final = 1.0
"""Seconds waited before saying whom for (most turns come sooner)."""
_COMMAND_CHARS: Final = 80


class UsageError(ValueError):
    """The arguments are not git-turn's."""


class TurnRequest(NamedTuple):
    agent: str
    directory: str
    limit: float


USAGE: Final = """\
usage: lockyard git-turn [--agent ID] [-C DIR] && GIT COMMAND LINE

Wait until this command line may run git in this clone: earlier lines that took a turn have
ended and no git command holds index.lock, HEAD.lock, packed-refs.lock or config.lock. The
shell running the line holds the turn until it ends. Always exits 0; says on stderr whom it
waits for after a second; goes on after LOCKYARD_GIT_TURN_LIMIT seconds (default 600)."""


def main(argv: list[str], err: TextIO | None = None) -> int:
    """Wait for the turn; 0 always (a turn that cannot be taken is said on stderr)."""
    err = err if err is not None else sys.stderr
    if "-h" in argv or "--help" in argv:
        print(USAGE)
        return 0
    try:
        request = _parse(argv, os.environ)
        take_turn(request, process_ref(os.getppid()), err)
    except UsageError as exc:
        _say(err, f"lockyard git-turn: {exc}; going on without a turn")
    except Exception as exc:  # the agent's command must run: the worst is git as without lockyard
        _say(err, f"lockyard git-turn: {type(exc).__name__}: {exc}; going on without a turn")
    return 0


def take_turn(request: TurnRequest, holder: ProcessRef | None, err: TextIO) -> Ticket | None:
    """Take a ticket for `holder` (the shell running the line: git-turn's parent) and wait for
    its turn; the ticket, or None when no turn applies (not in a git checkout, no holder)."""
    root = checkout_root(request.directory)
    dirs = git_dirs(root) if root is not None else None
    if dirs is None or holder is None or holder.pid == 1:
        return None
    words = _arguments(holder.pid)
    # (An empty command line, read while the holder execs, says nothing about it.)
    if words and _outlives_its_lines(words):
        _say(
            err,
            "lockyard git-turn: this shell runs one command line after another (a persistent "
            "shell), so it would hold git's turn after this line: no turn taken; run the line "
            "in a shell of its own (`bash -c '...'`) to take one",
        )
        return None
    line = turn_line(dirs)
    ticket = line.take(holder, request.agent, _command_line(words or []))
    start = time.monotonic()
    until = start + request.limit
    quiet_until = start + QUIET
    for other in line.ahead_of(ticket):
        if not wait_for_end(other.holder, min(until, quiet_until)):
            if time.monotonic() >= until:
                _say(err, _gave_up(other, request.limit))
                return ticket
            _say(err, _waiting_for(other))
            if not wait_for_end(other.holder, until):
                _say(err, _gave_up(other, request.limit))
                return ticket
        line.remove(other.number)
    paths = lock_files(dirs)
    held = wait_for_lock_files(paths, min(until, quiet_until))
    if held is not None and time.monotonic() < until:
        _say(
            err,
            f"lockyard: waiting for {held} to go: a git command outside lockyard's turns holds "
            "it (if no git command runs, a killed one left it behind: remove it)",
        )
        held = wait_for_lock_files(paths, until)
    if held is not None:
        _say(
            err,
            f"lockyard: {held} is still there after {request.limit:g} s; going on "
            "(git will say it cannot create it)",
        )
    return ticket


def _parse(argv: list[str], environ: os._Environ[str] | dict[str, str]) -> TurnRequest:
    agent = "an agent"
    directory = os.getcwd()
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("--agent", "-C"):
            if not args:
                raise UsageError(f"{arg} needs a value")
            value = args.pop(0)
        elif arg.startswith("--agent="):
            arg, value = "--agent", arg.removeprefix("--agent=")
        else:
            raise UsageError(f"unknown argument {arg!r} (it takes --agent ID and -C DIR)")
        if arg == "--agent":
            agent = value
        else:
            directory = os.path.join(directory, value)
    raw_limit = environ.get(LIMIT_VARIABLE, "")
    try:
        limit = float(raw_limit) if raw_limit else DEFAULT_LIMIT
    except ValueError:
        raise UsageError(f"{LIMIT_VARIABLE}={raw_limit!r} is not a number of seconds") from None
    return TurnRequest(agent, directory, max(0.0, limit))


def _arguments(pid: int) -> list[str] | None:
    """The command line of process `pid`, or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            raw = file.read(64 * 1024)
    except OSError:
        return None
    return [word.decode(errors="replace") for word in raw.split(b"\0")[:-1]]


def _outlives_its_lines(words: list[str]) -> bool:
    """Whether a shell started with `words` reads command line after command line (an
    interactive or persistent shell: only options, none of them `-c`), instead of running one
    line (`bash -c LINE`) or one script (`bash script.sh`) and ending."""
    options = words[1:]
    if any(not word.startswith("-") or word in ("-", "--") for word in options):
        return False  # a script, or input named after `-`/`--`: it ends with it
    return not any(not word.startswith("--") and "c" in word for word in options)


def _command_line(words: list[str]) -> str:
    """The start of the command line a shell runs (its last argument), without the git-turn
    in front."""
    text = words[-1] if len(words) > 1 else ""
    turn = text.find("git-turn")
    if turn >= 0:
        after = text.find("&&", turn)
        text = text[after + 2 :] if after >= 0 else ""
    flat = " ".join(text.split())
    return flat if len(flat) <= _COMMAND_CHARS else flat[: _COMMAND_CHARS - 1] + "…"


def _waiting_for(other: Ticket) -> str:
    since = time.strftime("%H:%M:%S", time.localtime(other.taken))
    return (
        f"lockyard: waiting for git's turn: agent {other.agent}'s `{other.command}` "
        f"has had it (or waited for it) since {since}"
    )


def _gave_up(other: Ticket, limit: float) -> str:
    since = time.strftime("%H:%M:%S", time.localtime(other.taken))
    return (
        f"lockyard: agent {other.agent}'s `{other.command}` has held git's turn since {since}, "
        f"more than {limit:g} s: going on without the turn (git may fail on its lock files)"
    )


def _say(err: TextIO, line: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr closed: the turn matters, not this
        print(line, file=err, flush=True)
