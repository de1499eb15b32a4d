"""Exit codes and the one error type every `lockyard` command reports the same way.

Scripts rely on these numbers; docs/cli.md and `lockyard --help` list them.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from enum import IntEnum
from typing import ParamSpec, TypeVar

import typer

from ..core.extras import MissingExtraError


class ExitCode(IntEnum):
    OK = 0
    """The command did what was asked."""
    INVARIANT_BROKEN = 1
    """`demo`: an edit was lost, two holders overlapped, or an agent did not finish."""
    USAGE = 2
    """Bad options or arguments (the same code click uses for its own usage errors)."""
    LOCK_DIR = 3
    """The lock directory is missing, not a directory, or cannot be read."""
    REFUSED = 4
    """`clean --all` without confirmation: nothing was released."""
    UNREADABLE_ENTRIES = 5
    """Some lock entries could not be read (corrupt or unreadable); the rest was reported."""
    DEADLOCK_FOUND = 6
    """`monitor --once`: a deadlock was found (and, unless --no-resolve, a victim noticed)."""
    BACKEND = 7
    """The PostgreSQL backend cannot be used: server down, login refused, schema too new."""
    MISSING_EXTRA = 8
    """A part this use needs is not installed: the message names the extra to install."""
    LOCK_TIMED_OUT = 9
    """`lock --timeout`: the locks were not all held in time (nothing is held)."""
    PROBLEMS_FOUND = 10
    """`doctor`: something in the set-up needs fixing (each problem says what to do)."""


EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 demo invariant broken; 2 usage error; 3 lock directory missing or "
    "unreadable; 4 refused (clean --all needs --yes or a confirmation); 5 some lock entries "
    "unreadable (reported, never deleted); 6 monitor --once found a deadlock; 7 the PostgreSQL "
    "backend cannot be used; 8 a part of lockyard that an extra brings is not installed; "
    "9 lock --timeout passed (otherwise lock exits with its command's status); 10 doctor "
    "found something to fix."
)


class CliError(Exception):
    """A failure the user can act on: printed as one line plus a hint, never a traceback."""

    def __init__(self, message: str, code: ExitCode, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.hint = hint

    def render(self) -> str:
        text = f"lockyard: error: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


P = ParamSpec("P")
R = TypeVar("R")


def reports_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn a `CliError` raised by `command` into its message on stderr and its exit code
    (and a missing extra into its one line, exit 8)."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except CliError as error:
            print(error.render(), file=sys.stderr)
            raise typer.Exit(int(error.code)) from None
        except MissingExtraError as error:
            print(CliError(str(error), ExitCode.MISSING_EXTRA).render(), file=sys.stderr)
            raise typer.Exit(int(ExitCode.MISSING_EXTRA)) from None

    return wrapper
