"""The index of the globs locked in a lock directory, by their literal directory.

`globs/<prefix's lock name>/<glob's lock name>.<mark id>` is a symlink whose target is the
glob's key: the second entry of a glob lock's mark (`scope_marks.py`), made before it takes
its line (Dekker's order, `scopes.py`) and gone with the mark. A grant finds the globs that
may cover its key by looking only at the directories over it (`scope_keys.places_above`),
whatever the number of globs elsewhere. While no glob is held or wanted here, that look is
one `faccessat`. Standard library only: the guards' hook processes read it too.
"""

from __future__ import annotations

import contextlib
import os
from typing import Final

from ..paths import lock_name
from ..scope_keys import is_above, places_above
from .disk import DIR_FLAGS

GLOBS: Final = "globs"
"""The index's entry in the lock directory (a directory)."""


def glob_folder(namespace: str, prefix: str) -> str:
    """The index's folder of the globs of `namespace` whose literal directory is `prefix`."""
    return lock_name(namespace, prefix)


def any_globs(dir_fd: int) -> bool:
    """Whether a glob is held or wanted in this lock directory (one `faccessat`)."""
    return os.access(GLOBS, os.F_OK, dir_fd=dir_fd, follow_symlinks=False)


def globs_at(dir_fd: int, namespace: str, prefix: str) -> list[tuple[str, str]]:
    """(glob key, lock name) of every glob of `namespace` held or wanted here from the
    directory `prefix` (`` the checkout's root)."""
    try:
        folder_fd = os.open(f"{GLOBS}/{glob_folder(namespace, prefix)}", DIR_FLAGS, dir_fd=dir_fd)
    except (FileNotFoundError, NotADirectoryError):
        return []
    try:
        found: dict[str, str] = {}  # lock name -> key: several marks of one glob are one
        for entry in os.listdir(folder_fd):
            name = entry.partition(".")[0]
            if name not in found:
                with contextlib.suppress(OSError):
                    found[name] = os.readlink(entry, dir_fd=folder_fd)
        return [(key, name) for name, key in found.items()]
    finally:
        os.close(folder_fd)


def globs_over(dir_fd: int, namespace: str, key: str) -> tuple[str, ...]:
    """The globs held or wanted here that are above `key` (`scope_keys.is_above`: for a
    file, the globs that match it), outermost first; () at once while there is none."""
    if not any_globs(dir_fd):
        return ()
    return tuple(
        glob
        for place in places_above(key)
        for glob, _name in globs_at(dir_fd, namespace, place)
        if is_above(glob, key)
    )
