"""Keys of directories and globs, and which of two overlapping keys yields to the other.

A directory lock's key is its repository-relative path with a trailing slash (`src/api/`), so
one string comparison tells a file key from a directory key and a key's ancestors are its
prefixes up to each slash. A glob's key is its literal directory (its *prefix*, resolved like
any path: `src/api/`, or `` for the checkout's root) followed by the pattern from the first
component holding `*` or `?` on (`src/api/**/*.py`), matched gitignore-style (`pathspec`)
and anchored at the checkout's root: `*` and `?` stay within one component, `**` crosses any
number of them. `[` is no glob character: it is literal everywhere, so a file such as
`app/[id]/page.tsx` (a common route name) is a file key, and `app/[id]/*.tsx` matches it.

Overlap, conservative where exactness would need the file system: a glob overlaps a file it
matches, a directory over its prefix or under it, and another glob whose prefix is its own or
nested in it (two globs with nested prefixes may match no file in common: they wait for each
other all the same; a false conflict costs a wait, a missed one would lose edits).

Of two overlapping scoped keys exactly one is *above* the other (`is_above`): the one whose
scope (a directory's own key, a glob's prefix) is the shorter; at the same scope a directory
is above a glob and of two globs the lesser string. The one below passes through the line of
the one above (a turnstile); the one above waits, holding its line, for the holds below
(`lockdir/scopes.py`). One order, so two overlapping requests never wait for each other.
Pure string work, no file system.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

GLOB_CHARS: Final = frozenset("*?")
"""The characters that make a path a glob (no escapes: `?` stands for such a character)."""


def is_directory_key(key: str) -> bool:
    """Whether `key` names a directory (`src/api/`), not a file."""
    return key.endswith("/")


def is_glob_key(key: str) -> bool:
    """Whether `key` is a glob (`src/api/**/*.py`)."""
    return not GLOB_CHARS.isdisjoint(key)


def is_scoped(key: str) -> bool:
    """Whether `key` covers more than itself: a directory or a glob."""
    return key.endswith("/") or not GLOB_CHARS.isdisjoint(key)


def split_glob(text: str) -> tuple[str, str] | None:
    """(literal prefix up to and with its last slash, pattern) of a glob path: `src/api/**/*.py`
    -> (`src/api/`, `**/*.py`), `*.py` -> (``, `*.py`), `/repo/*.py` -> (`/repo/`, `*.py`);
    None when `text` holds no glob character."""
    first = min((text.find(char) for char in GLOB_CHARS if char in text), default=-1)
    if first == -1:
        return None
    cut = text.rfind("/", 0, first) + 1
    return text[:cut], text[cut:]


def glob_problem(text: str, pattern: str) -> str | None:
    """Why the glob `text`, whose part from its first glob character's component on is
    `pattern`, cannot be locked, or None."""
    if text.startswith("!"):
        return "a negated pattern (!) covers everything else: lock what you will change"
    if pattern.endswith("/"):
        return "a glob names files: drop the trailing slash (src/*/ -> src/*/**)"
    if "\\" in pattern:
        return "a glob has no escapes here: ? stands for a * or ? in a file's name"
    parts = pattern.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "a glob's pattern has no empty, . or .. components after its first * or ?"
    try:
        _matcher(pattern)
    except Exception as error:  # pathspec's errors for a malformed pattern vary by kind
        return f"not a valid gitignore-style pattern ({error})"
    return None


def glob_prefix(key: str) -> str:
    """The literal directory of the glob `key` (`` for the checkout's root)."""
    split = split_glob(key)
    return "" if split is None else split[0]


def scope_of(key: str) -> str | None:
    """The directory a scoped key lives at (a directory: itself; a glob: its prefix); None for
    a file."""
    if key.endswith("/"):
        return key
    if not GLOB_CHARS.isdisjoint(key):
        return glob_prefix(key)
    return None


def glob_matches(glob_key: str, key: str) -> bool:
    """Whether the glob `glob_key` matches the file `key`."""
    return _matcher(glob_key)(key)


def glob_regex(glob_key: str) -> str:
    """The regular expression (Python's syntax) that `pathspec` matches the glob `glob_key`
    with, against a key as `pathspec` normalises it (a leading `/` or `./` dropped): the
    PostgreSQL backend matches with its translation (postgres/glob_pattern.py)."""
    spec = _spec(glob_key)
    return str(spec.patterns[0].regex.pattern)


@functools.lru_cache(maxsize=1024)
def _matcher(glob_key: str) -> Callable[[str], bool]:
    return _spec(glob_key).match_file  # type: ignore[no-any-return]


def _spec(glob_key: str) -> Any:
    import pathspec  # only where globs are locked: the guards' start-up stays as it was

    # Only * and ? are wildcards here: gitignore's [classes], backslashes and its trailing
    # spaces are made literal.
    literal = glob_key.replace("\\", "\\\\").replace("[", "\\[").replace(" ", "\\ ")
    return pathspec.PathSpec.from_lines("gitignore", ["/" + literal])


def directory_ancestors(key: str) -> list[str]:
    """The directory keys that cover `key`, outermost first: `a/b/c.py` -> `a/`, `a/b/`;
    `a/b/` -> `a/`. The checkout's root (`./`, and `/` for a key outside it) is no lockable
    directory and is left out."""
    body = key[:-1] if key.endswith("/") else key
    found = []
    cut = body.find("/", 1)
    while cut != -1:
        prefix = body[: cut + 1]
        if prefix != "./":
            found.append(prefix)
        cut = body.find("/", cut + 1)
    return found


def covers(directory_key: str, key: str) -> bool:
    """Whether the directory `directory_key` covers `key` (a file or directory under it, or
    itself)."""
    return key.startswith(directory_key)


def overlaps(first: str, second: str) -> bool:
    """Whether a lock of `first` and one of `second` can cover a file in common (see the
    module doc: conservative for directories and globs)."""
    if first == second:
        return True
    scope_a, scope_b = scope_of(first), scope_of(second)
    if scope_a is None and scope_b is None:
        return False
    if scope_a is None or scope_b is None:
        file, scope, scoped = (
            (first, scope_b, second) if scope_a is None else (second, scope_a, first)
        )
        assert scope is not None
        return file.startswith(scope) if scoped.endswith("/") else glob_matches(scoped, file)
    return scope_a.startswith(scope_b) or scope_b.startswith(scope_a)


def is_above(upper: str, lower: str) -> bool:
    """Whether `upper` and `lower` overlap and `lower` yields to `upper` (module doc): a
    holder of `upper` waits for a hold of `lower` to go, and a request of `lower` passes
    through the line of `upper`."""
    scope_u = scope_of(upper)
    if scope_u is None or upper == lower or not overlaps(upper, lower):
        return False
    scope_l = scope_of(lower)
    if scope_l is None:
        return True
    if scope_l != scope_u:
        return scope_l.startswith(scope_u)
    if upper.endswith("/"):
        return True  # a directory over a glob at its own scope
    return not lower.endswith("/") and upper < lower


def places_above(key: str) -> list[str]:
    """The scopes at which a key above `key` can live, outermost first (`` is the root, where
    only globs live): the directories over it, and a glob's own prefix."""
    if key.endswith("/") or GLOB_CHARS.isdisjoint(key):
        return ["", *directory_ancestors(key)]
    scope = glob_prefix(key)
    return ["", *directory_ancestors(scope), scope] if scope else [""]
