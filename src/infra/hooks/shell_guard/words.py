"""Word expansion, as far as it can be done safely before the command runs.

Expanded: quotes, `~`, braces (`{a,b}`, `{1..3}`), globs (against the files there now),
and variables whose value the guard knows (set earlier in the same command line to a value
it could read, `for` loop variables over such words, `$PWD`, `$HOME`). Anything else (a
variable from the agent's environment, `$(...)`, `${x:-y}`, `$((...))`) makes the word
unknown: `expand` returns None and the caller decides what that means.
"""

from __future__ import annotations

import glob
import itertools
import os
import re
from collections.abc import Mapping
from typing import Final

from .syntax import Lit, Opaque, Param, Subst, Word

Char = tuple[str, bool]
"""One character and whether it was quoted (quoted characters are never special)."""

_GLOB_CHARS: Final = frozenset("*?[")
_RANGE: Final = re.compile(r"(-?\d+)\.\.(-?\d+)|([a-zA-Z])\.\.([a-zA-Z])")
MAX_FIELDS: Final = 10_000
"""More fields than this (a glob over a huge tree) is treated as unknown."""


def expand(word: Word, cwd: str, variables: Mapping[str, str | None]) -> list[str] | None:
    """The fields `word` becomes in directory `cwd`, or None if they cannot be known."""
    chars: list[Char] = []
    for segment in word:
        if isinstance(segment, Lit):
            chars.extend((char, segment.quoted) for char in segment.text)
        elif isinstance(segment, Param):
            value = variables.get(segment.name)
            if value is None:
                return None
            chars.extend((char, segment.quoted) for char in value)
        else:
            assert isinstance(segment, Opaque | Subst)
            return None
    chars = _tilde(chars, variables)
    fields: list[str] = []
    for alternative in _braces(chars):
        fields.extend(_glob(alternative, cwd))
        if len(fields) > MAX_FIELDS:
            return None
    return fields


def literal(word: Word) -> str | None:
    """The text of a word with no expansion in it at all (quotes removed), else None."""
    if all(isinstance(segment, Lit) for segment in word):
        return "".join(segment.text for segment in word if isinstance(segment, Lit))
    return None


def _tilde(chars: list[Char], variables: Mapping[str, str | None]) -> list[Char]:
    if not chars or chars[0] != ("~", False):
        return chars
    end = next((i for i, (c, _) in enumerate(chars) if c == "/"), len(chars))
    if any(quoted for _, quoted in chars[:end]):
        return chars
    if end == 1:
        home = variables.get("HOME")
    else:  # ~user: that user's home, or the text as written when there is no such user
        prefix = "".join(c for c, _ in chars[:end])
        found = os.path.expanduser(prefix)
        home = None if found == prefix else found
    if home is None:
        return chars
    return [(char, True) for char in home] + chars[1:]


def _braces(chars: list[Char]) -> list[list[Char]]:
    """Brace expansion over unquoted `{...}` with a top-level comma or a `..` range."""
    for start, (char, quoted) in enumerate(chars):
        if char != "{" or quoted:
            continue
        found = _brace_body(chars, start)
        if found is None:
            continue
        end, alternatives = found
        out: list[list[Char]] = []
        for alternative in alternatives:
            out.extend(_braces(chars[:start] + alternative + chars[end + 1 :]))
        return out
    return [chars]


def _brace_body(chars: list[Char], start: int) -> tuple[int, list[list[Char]]] | None:
    depth = 0
    commas: list[int] = []
    for index in range(start, len(chars)):
        char, quoted = chars[index]
        if quoted:
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return _alternatives(chars, start, index, commas)
        elif char == "," and depth == 1:
            commas.append(index)
    return None


def _alternatives(
    chars: list[Char], start: int, end: int, commas: list[int]
) -> tuple[int, list[list[Char]]] | None:
    if commas:
        bounds = [start, *commas, end]
        return end, [chars[a + 1 : b] for a, b in itertools.pairwise(bounds)]
    inner = "".join(c for c, _ in chars[start + 1 : end])
    match = _RANGE.fullmatch(inner)
    if match is None:
        return None
    if match.group(1) is not None:
        low, high = int(match.group(1)), int(match.group(2))
        step = 1 if high >= low else -1
        values = [str(n) for n in range(low, high + step, step)]
    else:
        low, high = ord(match.group(3)), ord(match.group(4))
        step = 1 if high >= low else -1
        values = [chr(n) for n in range(low, high + step, step)]
    if len(values) > MAX_FIELDS:
        return None
    return end, [[(c, True) for c in value] for value in values]


def _glob(chars: list[Char], cwd: str) -> list[str]:
    text = "".join(c for c, _ in chars)
    if not any(c in _GLOB_CHARS and not quoted for c, quoted in chars):
        return [text]
    pattern = "".join(glob.escape(c) if quoted else c for c, quoted in chars)
    absolute = os.path.isabs(text)
    matches = sorted(glob.glob(pattern if absolute else os.path.join(glob.escape(cwd), pattern)))
    if not matches:
        return [text]  # bash passes a pattern that matches nothing through unchanged
    if absolute:
        return matches
    return [os.path.relpath(match, cwd) for match in matches]
