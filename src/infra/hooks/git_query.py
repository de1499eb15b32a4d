"""Git as the guards run it: read-only queries that never run the repository's programs.

A repository's configuration can make git run programs of its choosing: `core.fsmonitor` on
every index refresh, clean/smudge filters (`filter.<driver>.clean`, `.process`) when a diff
compares working files, `diff.<driver>.textconv`, external diffs, pagers, editors, ssh and
credential helpers, hooks, aliases. An agent can set any of them (`git config core.fsmonitor
...`, a planted `.git/config`), and a guard that honoured them would run the agent's program
while deciding, even on a command it then denies. So every git call a guard makes:

- overrides the fixed program settings on its command line (`-c core.fsmonitor=false`,
  `core.hooksPath=/dev/null`, `protocol.allow=never`, ...), with the environment's
  counterparts set too (`GIT_PAGER`, `GIT_EDITOR`, `GIT_SSH_COMMAND`, no lazy fetch);
- lists the configuration's names first (`git config --list --name-only`, which runs
  nothing) and empties every per-driver program it finds (`-c filter.x.clean=`): an empty
  command is no filter; a `required` filter then fails the query, and the guard, unable to
  ask, denies;
- calls only built-in subcommands (an alias cannot shadow one) with `--no-pager`.

`cached()` keeps the configuration's names for the queries of one decision, and bounds the
time they take together.
"""

from __future__ import annotations

import contextvars
import os
import re
import subprocess
import time
from collections.abc import Sequence
from typing import Final

QUERY_TIMEOUT: Final = 10.0
FIXED: Final = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.editor=:",
    "sequence.editor=:",
    "core.askPass=",
    "credential.helper=",
    "core.sshCommand=false",
    "core.gitProxy=",
    "core.attributesFile=/dev/null",
    "diff.external=",
    "gpg.program=false",
    "protocol.allow=never",
    "uploadpack.packObjectsHook=",
    "log.showSignature=false",
)
"""Settings that name a program, overridden on every call."""
_PER_DRIVER: Final = re.compile(
    r"(filter\..+\.(clean|smudge|process)|diff\..+\.(textconv|command)|merge\..+\.driver"
    r"|hook\..+\.command)"
)
_ENV_DROPPED: Final = (
    "GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_SSH",
    "GIT_PROXY_COMMAND", "GIT_EXEC_PATH",
)  # fmt: skip
_ENV_SET: Final = {
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_NO_LAZY_FETCH": "1",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
    "GIT_SSH_COMMAND": "false",
    "GIT_NO_REPLACE_OBJECTS": "1",
}

DECISION_BUDGET: Final = 10.0
"""Seconds all the git queries of one decision may take together (`cached()`): past it a
query fails, and the guard, unable to ask, says it cannot tell."""

_CACHE: contextvars.ContextVar[dict[str, tuple[str, ...]] | None] = contextvars.ContextVar(
    "lockyard_git_query_cache", default=None
)
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "lockyard_git_query_deadline", default=None
)


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _ENV_DROPPED}
    env.update(_ENV_SET)
    return env


class cached:  # noqa: N801 (used as a function: `with cached():`)
    """Within the block, each directory's configuration is listed once, and the queries
    together take at most `budget` seconds. (A class, not a generator: every shell decision
    enters one, and most ask git nothing.)"""

    __slots__ = ("_budget", "_cache", "_deadline")

    def __init__(self, budget: float = DECISION_BUDGET) -> None:
        self._budget = budget

    def __enter__(self) -> None:
        self._cache = _CACHE.set({})
        self._deadline = _DEADLINE.set(time.monotonic() + self._budget)

    def __exit__(self, *_: object) -> None:
        _CACHE.reset(self._cache)
        _DEADLINE.reset(self._deadline)


def run_git(directory: str, args: Sequence[str], *, timeout: float = QUERY_TIMEOUT) -> bytes | None:
    """Run `git ARGS` in `directory` with the repository's programs disabled; its output, or
    None when git fails, times out or cannot start."""
    overrides = _overrides(directory, timeout)
    if overrides is None:
        return None
    return _run(directory, [*overrides, *args], timeout)


def git_text(directory: str, args: Sequence[str]) -> str | None:
    out = run_git(directory, args)
    return None if out is None else out.decode(errors="surrogateescape")


def _overrides(directory: str, timeout: float) -> tuple[str, ...] | None:
    cache = _CACHE.get()
    if cache is not None and directory in cache:
        return cache[directory]
    fixed = tuple(arg for setting in FIXED for arg in ("-c", setting))
    listed = _run(directory, [*fixed, "config", "--list", "--name-only", "-z"], timeout)
    if listed is None:
        return None  # the programs to disable cannot be listed: ask nothing
    names = listed.decode(errors="surrogateescape").split("\0")
    emptied = tuple(
        arg
        for name in dict.fromkeys(n.strip() for n in names)
        if name and _PER_DRIVER.fullmatch(name.lower())
        for arg in ("-c", f"{name}=")
    )
    found = (*fixed, *emptied)
    if cache is not None:
        cache[directory] = found
    return found


def _run(directory: str, args: Sequence[str], timeout: float) -> bytes | None:
    deadline = _DEADLINE.get()
    if deadline is not None:
        timeout = min(timeout, deadline - time.monotonic())
        if timeout <= 0:
            return None
    try:
        done = subprocess.run(
            ["git", "--no-pager", "-C", directory, *args],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
            env=environment(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout
