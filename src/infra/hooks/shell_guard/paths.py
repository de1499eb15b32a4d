"""Paths as the kernel resolves them for the command's own process, not the guard's.

`os.path.normpath` folds `deep/../a.py` into `a.py`, but the kernel follows the symlink `deep`
first and `..` then leaves wherever it led (`src/sub/..` is `src`). And some paths mean
something only in the process that opens them: `/proc/self/cwd` is that process's directory,
`/dev/fd/3` (a link to `/proc/self/fd/3`) the file it has open on descriptor 3, `/dev/stdout`
its descriptor 1. Resolved in the guard's process they would name other files. `resolve` walks
a path component by component as the kernel does, with the command's directory, its open
descriptors and the links made earlier in the same command line; what it cannot know (another
process's `/proc/PID/...`, a descriptor the command line never opened) is None.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

STREAM: Final = "/dev/null"
"""Stands for a descriptor that is not a file (a pipe, the terminal, a here-document): writing
there changes no file."""
_MAX_LINKS: Final = 40  # the kernel's limit (ELOOP)
_SELF: Final = frozenset({"/proc/self", "/proc/thread-self"})
_OTHER_PROCESS: Final = re.compile(r"/proc/\d+(/task/\d+)?")
_PROCESS_VIEWS: Final = frozenset({"cwd", "root", "fd"})


@dataclass(frozen=True)
class View:
    """What a path means in the command's process."""

    cwd: str | None
    """Its directory (None: only known when it runs)."""
    fds: Mapping[int, str | None] = field(default_factory=dict)
    """Its open descriptors: the resolved file, `STREAM`, or None when unknown."""
    links: Mapping[str, str] = field(default_factory=dict)
    """Links made earlier in the command line (absolute link -> its target as written)."""
    root: str | None = None
    """A directory known to be resolved already (the repository): paths under it are walked
    from there, which saves a system call per component above it."""


def resolve(path: str, view: View, *, follow_last: bool = True) -> str | None:
    """The absolute path the kernel opens for `path` in the process `view` describes; None
    when that depends on something only known when it runs. With `follow_last=False` a final
    symlink is kept (what `rm` or `mv` act on)."""
    if not path:
        return None
    if not path.startswith("/"):
        if view.cwd is None:
            return None
        path = f"{view.cwd}/{path}"
    current = "/"
    pending = path.split("/")
    pending.reverse()
    root = view.root
    if root is not None and (path + "/").startswith(root + "/"):
        current = root
        pending = path[len(root) :].split("/")
        pending.reverse()
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        candidate = f"{current.rstrip('/')}/{part}"
        if candidate in _SELF:
            return _process_path(pending, view)
        if _OTHER_PROCESS.fullmatch(candidate) and pending and pending[-1] in _PROCESS_VIEWS:
            return None  # another process's directory or descriptors
        if not pending and not follow_last and candidate not in view.links:
            return candidate
        target = view.links.get(candidate)
        if target is None:
            target = _readlink(candidate)
        if target is None:
            current = candidate
            continue
        hops += 1
        if hops > _MAX_LINKS:
            return candidate  # the kernel refuses (ELOOP): nothing is written
        if target.startswith("/"):
            current = "/"
        more = target.split("/")
        more.reverse()
        pending.extend(more)
    return current


def _process_path(pending: list[str], view: View) -> str | None:
    """The rest of a path after `/proc/self`, in the command's process."""
    if not pending:
        return "/proc/self"
    part = pending.pop()
    if part == "cwd":
        base = view.cwd
    elif part == "root":
        base = "/"
    elif part == "fd":
        if not pending:
            return "/proc/self/fd"
        number = pending.pop()
        if not number.isdigit() or int(number) not in view.fds:
            return None  # a descriptor this command line did not open
        base = view.fds[int(number)]
        if base is None or base == STREAM:
            return base
        return _rest(base, pending)
    else:
        return "/proc/self/" + "/".join([part, *reversed(pending)])
    if base is None:
        return None
    rest = "/".join(reversed(pending))
    return resolve(f"{base}/{rest}" if rest else base, view)


def _rest(base: str, pending: list[str]) -> str:
    rest = [p for p in reversed(pending) if p not in ("", ".")]
    return base if not rest else f"{base}/{'/'.join(rest)}"


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None  # not a link, or not there (a file the command will create)


def lexical(path: str, cwd: str | None) -> str | None:
    """`path` made absolute from `cwd` and folded textually (`cd` does this: bash's logical
    directory); None when `cwd` is unknown."""
    if path.startswith("/"):
        return os.path.normpath(path)
    if cwd is None:
        return None
    return os.path.normpath(os.path.join(cwd, path))
