"""A person's paths as lock keys: relative to the working directory, every bad one named."""

from __future__ import annotations

import os
from collections.abc import Callable

from ._errors import CliError, ExitCode


def lock_keys(canonicalize: Callable[[str], str], paths: list[str], refused: str) -> list[str]:
    """Each path's lock key, sorted and without repeats. A relative path is taken from the
    working directory (the store would read it from the checkout's root); a literal
    `__name__` key is kept as it is. Every bad path is named in one usage error (exit 2)
    that begins with `refused` (what was not done)."""
    from ..infra.lockstore import LockStoreError

    keys: list[str] = []
    problems: list[str] = []
    for path in paths:
        literal = path.startswith("__") and path.endswith("__")
        try:
            keys.append(canonicalize(path if literal else _absolute(path)))
        except (LockStoreError, ValueError) as exc:
            problems.append(str(exc))
    if problems:
        raise CliError(f"{refused}: {'; '.join(problems)}", ExitCode.USAGE)
    return sorted(set(keys))


def _absolute(path: str) -> str:
    """`path` from the working directory, keeping a trailing slash: `src/api/` names a
    directory lock, which abspath alone would turn into the file key `src/api`."""
    absolute = os.path.abspath(path)
    return f"{absolute}/" if path.endswith("/") and not absolute.endswith("/") else absolute
