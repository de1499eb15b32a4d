"""A file path's lock, for one checkout: its repository-relative key and the name of its lock
in the lock directory, with what resolving a plain path costs paid once."""

from __future__ import annotations

import os
from typing import Final

from ..checkout import Checkout
from ..paths import lock_name, resolve_entry
from .plain_paths import is_plain_file, resolve_plain_entry

_MAX_PLAIN_FILES: Final = 4096


class LockKeys:
    """(key, lock name) of file paths in `checkout`; a path outside it is refused unless
    `allow_outside_repo` (see `Checkout.key`)."""

    def __init__(self, checkout: Checkout, *, allow_outside_repo: bool) -> None:
        self.checkout = checkout
        self.allow_outside_repo = allow_outside_repo
        self._plain_files: dict[str, tuple[bytes, str, str]] = {}
        """filepath -> (the absolute path resolved, key, lock name) of paths that named an
        existing file reached without symlinks: while the kernel still walks that path
        without meeting a symlink to a file that is not a directory, the key is the same."""

    def locate(self, filepath: str) -> tuple[str, str]:
        """(key, lock name) of `filepath`.

        A path that last resolved to an existing file without meeting a symlink resolves
        to the same key for as long as that is still so, which one system call checks
        (`is_plain_file`: the kernel walks the whole path again, so a component replaced by
        a symlink, a file removed or replaced by a directory all take the full resolution
        below). Only the string work is remembered, never what the file system said.
        """
        if type(filepath) is str:
            known = self._plain_files.get(filepath)
            if known is not None and is_plain_file(known[0]):
                return known[1], known[2]
        plain: list[str] = []

        def resolve(path: str) -> tuple[str, bool]:
            found = resolve_plain_entry(path)
            if found is None:
                return resolve_entry(path)
            resolved, is_dir, exists = found
            if exists and not is_dir:
                plain.append(path)
            return resolved, is_dir

        key = self.checkout.key(
            filepath, allow_outside_repo=self.allow_outside_repo, resolve=resolve
        )
        name = lock_name(self.checkout.namespace, key)
        # A `\\$` in the path may be read as `$` depending on which files exist (see
        # unescape_dollars): such a spelling is resolved every time.
        if plain and type(filepath) is str and "\\$" not in filepath:
            if len(self._plain_files) >= _MAX_PLAIN_FILES:
                self._plain_files.clear()
            self._plain_files[filepath] = (os.fsencode(plain[0]), key, name)
        return key, name
