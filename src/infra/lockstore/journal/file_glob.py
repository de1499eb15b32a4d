"""A reader's file filter (`lockyard log --file GLOB`): a shell-style glob, checked whole
before any record is read, as one regular expression both Python and PostgreSQL run.

`*` matches any run of characters (`/` too, as in git's pathspecs), `?` one character,
`[abc]`, `[a-z]` and `[!abc]` one character of a set or out of it; every other character,
backslash included, is itself (`[[]` and `[*]` match `[` and `*`). A glob that cannot mean
what its writer meant is refused with what to write instead (`BadGlobError`): a set never
closed (`src/[x.py`), a range written backwards (`[z-a]`), an empty pattern, a path that is
not relative to the repository's root (`/home/me/app/src/a.py`, `./src/a.py`: the journal
names files as every result shows them, `src/a.py`), text that is not UTF-8 (no record can
name it). Python's `fnmatch` read the first two as literal text, and PostgreSQL refused
their translation with a server error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_SET_SYNTAX: Final = "[abc], [a-z] or [!abc]"


class BadGlobError(ValueError):
    """A `--file` pattern that cannot match what its writer meant: the message says why, the
    hint what to write instead."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True, slots=True)
class FileGlob:
    """A checked glob: `matches(name)`, and `regex`, the body of a regular expression that
    Python's `re` (with re.DOTALL) and PostgreSQL's `~` both read the same way (anchor it:
    `^(?:...)$` on the server, `fullmatch` here)."""

    pattern: str
    regex: str

    @classmethod
    def parse(cls, pattern: str) -> FileGlob:
        _check_path(pattern)
        return cls(pattern, "".join(_pieces(pattern)))

    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.regex, re.DOTALL)


def _check_path(pattern: str) -> None:
    if not pattern:
        raise BadGlobError(
            "--file '' is empty", "give a path from the repository's root (src/models.py) or a "
            "glob (src/*.py)"
        )  # fmt: skip
    if any("\ud800" <= char <= "\udfff" for char in pattern):
        raise BadGlobError(
            f"--file {_shown(pattern)} is not UTF-8 text: no record names such a file",
            "write the name as `lockyard log --json` shows it",
        )
    relative = pattern.lstrip("/")
    while relative.startswith("./"):
        relative = relative[2:].lstrip("/")
    if relative == pattern:
        return
    raise BadGlobError(
        f"--file {_shown(pattern)} is not a path from the repository's root",
        "write it from the repository's root (src/models.py, not /home/me/app/src/models.py)"
        if pattern.startswith("/")
        else f"write {relative or 'src/*.py'}, as `lockyard log` shows files",
    )


def _pieces(pattern: str) -> list[str]:
    pieces: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            pieces.append(".*")
        elif char == "?":
            pieces.append(".")
        elif char == "[":
            piece, i = _set(pattern, i)
            pieces.append(piece)
            continue
        else:
            pieces.append(_literal(char))
        i += 1
    return pieces


def _set(pattern: str, start: int) -> tuple[str, int]:
    """The set opening at `pattern[start]` as a bracket expression, and where it ends; a
    `]` right after `[` or `[!` is a member, as in the shell."""
    i = start + 1
    negated = i < len(pattern) and pattern[i] == "!"
    if negated:
        i += 1
    members: list[str] = []
    first = True
    while i < len(pattern) and (first or pattern[i] != "]"):
        low = pattern[i]
        if i + 2 < len(pattern) and pattern[i + 1] == "-" and pattern[i + 2] != "]":
            high = pattern[i + 2]
            if high < low:
                raise BadGlobError(
                    f"--file {_shown(pattern)}: the range {low}-{high} is backwards (it "
                    "matches nothing)",
                    f"write {high}-{low}",
                )
            members.append(f"{_member(low)}-{_member(high)}")
            i += 3
        else:
            members.append(_member(low))
            i += 1
        first = False
    if i >= len(pattern):
        raise BadGlobError(
            f"--file {_shown(pattern)}: the '[' at character {start + 1} is never closed",
            f"close the set ({_SET_SYNTAX}), or write [[] to match a '[' itself",
        )
    return f"[{'^' if negated else ''}{''.join(members)}]", i + 1


def _literal(char: str) -> str:
    return char if char.isalnum() or char in "/_ " else "\\" + char


def _member(char: str) -> str:
    """A set's member: a letter or digit as itself, anything else escaped (PostgreSQL's
    bracket expressions read `[:`, `[.`, `[=` and a leading `^` as syntax)."""
    return char if char.isalnum() else "\\" + char


def _shown(text: str) -> str:
    return repr(text).replace("\\\\", "\\")
