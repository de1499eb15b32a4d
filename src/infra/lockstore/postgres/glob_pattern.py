"""A glob's pattern as PostgreSQL matches it: `pathspec`'s own regular expression, translated.

The lock directory matches a glob with `pathspec` (scope_keys.glob_matches); PostgreSQL must
match exactly so, in SQL, where the decisions are made (schema.py's glob block). So the
pattern is not written anew from the glob: it is the regular expression `pathspec` compiles
the glob to, in the few constructs of Python's syntax that PostgreSQL's advanced regular
expressions spell otherwise. Those `pathspec` uses are `^`, `$`, `.`, `[^/]`, `(?:...)`,
`?`, `*`, `+`, `|` and `re.escape`'s backslashes, all alike in both, and the named group
`(?P<name>...)`, which PostgreSQL writes `(...)`. Keys hold no control characters
(checkout.py), so Python's `.` (no newline) and `$` (before a final newline too) mean there
what they mean in PostgreSQL. Anything else is refused here rather than guessed at:
tests/integration/test_postgres_globs.py proves the two equal over drawn globs and paths.
"""

from __future__ import annotations

import re
from typing import Final

from ..scope_keys import glob_regex

_NAMED_GROUP: Final = re.compile(r"\(\?P<\w+>")
_TOKEN: Final = re.compile(r"\\.|\(\?.?|.", re.DOTALL)
"""An escape, a group's opening, or one character."""


def pg_glob_pattern(glob_key: str) -> str:
    """The PostgreSQL regular expression that matches a key (normalised as schema.py's
    `glob_matches` does) exactly when `pathspec` matches it to the glob `glob_key`."""
    pattern = _NAMED_GROUP.sub("(?:", glob_regex(glob_key))
    for token in _TOKEN.findall(pattern):
        # Flags and look-arounds, and letter escapes (\d, \b, \A...), mean something else
        # in PostgreSQL.
        if (token.startswith("(?") and token != "(?:") or (
            token.startswith("\\") and token[1:].isalnum()
        ):
            raise ValueError(f"no PostgreSQL translation of {pattern!r} (the glob {glob_key!r})")
    return pattern
