"""The index of the globs locked in a lock directory, by their literal directory.

`globs/<prefix's lock name>/<glob's lock name>` is a symlink whose target is the glob's key,
left by a glob lock before it takes its line (Dekker's order, `scopes.py`) and kept, as the
directory locks' marker is: a grant finds the globs that may cover its key by looking only at
the directories over it (`scope_keys.places_above`), whatever the number of globs elsewhere.
While no glob was ever locked here, that look is one `faccessat`. Standard library only: the
guards' hook processes read it too.
"""

from __future__ import annotations

import contextlib
import os
from typing import Final

from ..paths import lock_name
from ..scope_keys import glob_prefix, is_above, places_above
from .disk import DIR_FLAGS

GLOBS: Final = "globs"
"""The index's entry in the lock directory (a directory)."""


def _folder(namespace: str, prefix: str) -> str:
    return f"{GLOBS}/{lock_name(namespace, prefix)}"


def add_glob(dir_fd: int, namespace: str, key: str) -> None:
    """List the glob `key` in the index of the lock directory open at `dir_fd` (idempotent)."""
    folder = _folder(namespace, glob_prefix(key))
    entry = f"{folder}/{lock_name(namespace, key)}"
    if os.access(entry, os.F_OK, dir_fd=dir_fd, follow_symlinks=False):
        return
    for made in (GLOBS, folder):
        with contextlib.suppress(FileExistsError):
            os.mkdir(made, 0o700, dir_fd=dir_fd)
    with contextlib.suppress(FileExistsError):
        os.symlink(key, entry, dir_fd=dir_fd)


def any_globs(dir_fd: int) -> bool:
    """Whether a glob was ever locked in this lock directory (one `faccessat`)."""
    return os.access(GLOBS, os.F_OK, dir_fd=dir_fd, follow_symlinks=False)


def globs_at(dir_fd: int, namespace: str, prefix: str) -> list[tuple[str, str]]:
    """(glob key, lock name) of every glob of `namespace` ever locked here from the directory
    `prefix` (`` the checkout's root)."""
    try:
        folder_fd = os.open(_folder(namespace, prefix), DIR_FLAGS, dir_fd=dir_fd)
    except (FileNotFoundError, NotADirectoryError):
        return []
    try:
        found = []
        for name in os.listdir(folder_fd):
            with contextlib.suppress(OSError):
                found.append((os.readlink(name, dir_fd=folder_fd), name))
        return found
    finally:
        os.close(folder_fd)


def globs_over(dir_fd: int, namespace: str, key: str) -> tuple[str, ...]:
    """The globs ever locked here that are above `key` (`scope_keys.is_above`: for a file,
    the globs that match it), outermost first; () at once while no glob was ever locked."""
    if not any_globs(dir_fd):
        return ()
    return tuple(
        glob
        for place in places_above(key)
        for glob, _name in globs_at(dir_fd, namespace, place)
        if is_above(glob, key)
    )
