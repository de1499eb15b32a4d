"""Word expansion, as far as it can be done safely before the command runs.

Expanded: quotes, `~`, braces (`{a,b}`, `{1..3}`), globs (against the files there now),
and variables whose value the guard knows (set earlier in the same command line to a value
it could read, `for` loop variables over such words, `$PWD`, `$HOME`). Anything else (a
variable from the agent's environment, `$(...)`, `${x:-y}`, `$((...))`) makes the word
unknown: `expand` returns None and the caller decides what that means.
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import os
import re
from collections.abc import Iterator, Mapping
from typing import Final

from .syntax import Lit, Opaque, Param, Subst, Word

Char = tuple[str, bool]
"""One character and whether it was quoted (quoted characters are never special)."""

_GLOB_CHARS: Final = frozenset("*?[")
_RANGE: Final = re.compile(r"(-?\d+)\.\.(-?\d+)|([a-zA-Z])\.\.([a-zA-Z])")
MAX_FIELDS: Final = 10_000
"""More fields than this (a glob over a huge tree) is treated as unknown."""
MAX_GLOB_ENTRIES: Final = 50_000
"""Directory entries one pattern may look at; past it the pattern is unknown."""
_IFS: Final = " \t\n"
_SPECIAL: Final = re.compile(r"[*?\[{~(]")
"""Characters that make an unquoted literal expand (globs, braces, `~`, extglob)."""
_EXTGLOB: Final = frozenset({("?", False), ("*", False), ("+", False), ("@", False), ("!", False)})


def expand(
    word: Word, cwd: str, variables: Mapping[str, str | None], *, recursive: bool = False
) -> list[str] | None:
    """The fields `word` becomes in directory `cwd`, or None if they cannot be known.
    `recursive`: `**` matches across directories (`shopt -s globstar`)."""
    if len(word) == 1 and isinstance(word[0], Lit):
        text = word[0].text  # the common case, and a long quoted text: nothing to expand
        if word[0].quoted or not _SPECIAL.search(text):
            return [text]
    pieces: list[list[Char]] = [[]]
    for segment in word:
        if isinstance(segment, Lit):
            pieces[-1].extend((char, segment.quoted) for char in segment.text)
        elif isinstance(segment, Param):
            value = variables.get(segment.name)
            if value is None:
                return None
            if segment.quoted or not any(c in _IFS for c in value):
                pieces[-1].extend((char, segment.quoted) for char in value)
            elif "IFS" in variables:
                return None  # split on separators the guard does not follow
            else:  # an unquoted value is split into fields on blanks
                parts = value.split()
                if value[:1] in _IFS and pieces[-1]:
                    pieces.append([])
                for index, part in enumerate(parts):
                    if index:
                        pieces.append([])
                    pieces[-1].extend((char, False) for char in part)
                if value[-1:] in _IFS and parts:
                    pieces.append([])
        else:
            assert isinstance(segment, Opaque | Subst)
            return None
    fields: list[str] = []
    for chars in pieces:
        if not chars:
            continue
        chars = _tilde(chars, variables)
        if _has_extglob(chars):
            return None
        alternatives = _braces(chars, [0])
        if alternatives is None:
            return None
        for alternative in alternatives:
            matched = _glob(alternative, cwd, recursive)
            if matched is None:
                return None
            fields.extend(matched)
            if len(fields) > MAX_FIELDS:
                return None
    return fields


def expand_text(word: Word, variables: Mapping[str, str | None]) -> str | None:
    """The text of a here-document or here-string: variables expanded, nothing split or
    globbed; None when some part is only known when it runs."""
    out: list[str] = []
    for segment in word:
        if isinstance(segment, Lit):
            out.append(segment.text)
        elif isinstance(segment, Param):
            value = variables.get(segment.name)
            if value is None:
                return None
            out.append(value)
        else:
            return None
    return "".join(out)


def _has_extglob(chars: list[Char]) -> bool:
    """`!(x)`, `@(a|b)`... (extglob, on in many shells): patterns the guard does not match."""
    return any(
        char == "(" and not quoted and index and chars[index - 1] in _EXTGLOB
        for index, (char, quoted) in enumerate(chars)
    )


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


def _braces(chars: list[Char], made: list[int]) -> list[list[Char]] | None:
    """Brace expansion over unquoted `{...}` with a top-level comma or a `..` range; None
    past `MAX_FIELDS` alternatives (`made` counts them across the recursion)."""
    for start, (char, quoted) in enumerate(chars):
        if char != "{" or quoted:
            continue
        found = _brace_body(chars, start)
        if found is None:
            continue
        end, alternatives = found
        out: list[list[Char]] = []
        for alternative in alternatives:
            more = _braces(chars[:start] + alternative + chars[end + 1 :], made)
            if more is None:
                return None
            out.extend(more)
        return out
    made[0] += 1
    return None if made[0] > MAX_FIELDS else [chars]


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
        if abs(high - low) >= MAX_FIELDS:
            return None
        step = 1 if high >= low else -1
        values = [str(n) for n in range(low, high + step, step)]
    else:
        low, high = ord(match.group(3)), ord(match.group(4))
        step = 1 if high >= low else -1
        values = [chr(n) for n in range(low, high + step, step)]
    if len(values) > MAX_FIELDS:
        return None
    return end, [[(c, True) for c in value] for value in values]


def _glob(chars: list[Char], cwd: str, recursive: bool = False) -> list[str] | None:
    """The paths an unquoted pattern matches now (bash passes one that matches nothing
    through unchanged); None when matching would look at more than `MAX_GLOB_ENTRIES`
    directory entries (`/*/*/*/*` over a whole disk)."""
    text = "".join(c for c, _ in chars)
    if not any(c in _GLOB_CHARS and not quoted for c, quoted in chars):
        return [text]
    absolute = text.startswith("/")
    components: list[list[Char]] = [[]]
    for char in chars:
        if char[0] == "/":
            components.append([])
        else:
            components[-1].append(char)
    start = "/" if absolute else cwd
    budget = [MAX_GLOB_ENTRIES]
    found = _match(start, [c for c in components if c], recursive, budget)
    if found is None:
        return None
    if not found:
        return [text]
    matches = sorted(found)
    if absolute:
        return matches
    return [os.path.relpath(match, cwd) for match in matches]


def _match(
    directory: str, components: list[list[Char]], recursive: bool, budget: list[int]
) -> list[str] | None:
    if not components:
        return [directory]
    head, rest = components[0], components[1:]
    literal_name = "".join(c for c, _ in head)
    if not any(c in _GLOB_CHARS and not quoted for c, quoted in head):
        path = os.path.join(directory, literal_name)
        if not rest:
            return [path] if os.path.lexists(path) else []
        return _match(path, rest, recursive, budget) if os.path.isdir(path) else []
    if recursive and head == [("*", False), ("*", False)]:
        return _match_any_depth(directory, rest, budget)
    pattern = "".join(glob.escape(c) if quoted else c for c, quoted in head)
    hidden = literal_name.startswith(".")
    out: list[str] = []
    for name in _entries(directory, budget):
        if name is None:
            return None
        if (hidden or not name.startswith(".")) and fnmatch.fnmatchcase(name, pattern):
            path = os.path.join(directory, name)
            if not rest:
                out.append(path)
            elif os.path.isdir(path):
                more = _match(path, rest, recursive, budget)
                if more is None:
                    return None
                out.extend(more)
    return out


def _match_any_depth(directory: str, rest: list[list[Char]], budget: list[int]) -> list[str] | None:
    """`**` (globstar): this directory and every one under it (not hidden, not links)."""
    out: list[str] = []
    pending = [directory]
    while pending:
        current = pending.pop()
        more = _match(current, rest, True, budget) if rest else [current]
        if more is None:
            return None
        out.extend(m for m in more if m != directory or rest)
        for name in _entries(current, budget):
            if name is None:
                return None
            path = os.path.join(current, name)
            if not name.startswith(".") and os.path.isdir(path) and not os.path.islink(path):
                pending.append(path)
                if not rest:
                    out.append(path)
    return out


def _entries(directory: str, budget: list[int]) -> Iterator[str | None]:
    """The names in `directory`, then None once the budget of entries is spent."""
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                budget[0] -= 1
                if budget[0] < 0:
                    yield None
                    return
                yield entry.name
    except OSError:
        return
