"""The marks that directory and glob locks leave in the lock directory, and their going away.

A file grant looks above its key for directory and glob locks only while the lock directory
is marked (`scopes/` exists: one `faccessat`), so the marks keep one invariant:

    Every directory or glob lock that is held, or wanted by a request that may take its
    line, has an entry in `scopes/`.

A request makes its entry before it takes its line (Dekker's order, `scopes.py`) and it goes
once nobody in its process wants or holds that lock for its agent any more, after the line
was given back. A left-over entry only costs speed (file grants look above while it is
there), a missing one would let a file grant pass a directory lock: so an entry is removed
only by its own process at that point, or once its processes are provably dead (`prune`).

    scopes/<lock name>.<mark id>                 -> <card>   one per (lock, agent, process)
    globs/<prefix's lock name>/<lock name>.<mark id> -> <glob key>   the same mark, for a glob
    pending/<lock name>.<x|s><token>             -> <card>   one per request under way

The third says that a request is under way (`pending_scopes.py`): made before the request
first takes its line and removed once it is granted or gives up, so that a line its agent
holds meanwhile is known to be no grant yet.

An entry is a symlink to the holder card of the agent's grants of that key (`disk.py`): the
card names the processes whose death ends the mark (the holder, and the process writing its
grants). A glob's mark has a second entry in the glob index (`glob_index.py`), by which a
grant finds the globs that may cover it. Folders go with their last entry: a leaver removes
its entry, then tries `rmdir` (ENOTEMPTY: another mark is there); a taker that finds its
folder gone (ENOENT) makes it again. No entry is ever lost between the two.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ..errors import CorruptRecordError
from ..liveness import Liveness, liveness_of, new_token
from ..records import CardProcess, card_processes
from ..scope_keys import glob_prefix, is_glob_key
from .disk import DIR_FLAGS, LockDir
from .glob_index import GLOBS, glob_folder
from .pending_scopes import PENDING, request_entry

SCOPES: Final = "scopes"
"""The marks' folder in the lock directory: present while any directory or glob lock is
held or wanted there. A file grant asks whether it is there itself (`LockDir.exists`, one
`faccessat`), so that a plain file's request never enters this module."""

_ATTEMPTS: Final = 64
"""How often a mark is tried again when its folder went meanwhile (each time a leaver removed
it between our `mkdir` and our entry): any number would do, each loses only to a leaver."""


@dataclass
class _Mark:
    key: str
    mark_id: str
    card: str
    pid: int
    wanting: int = 0
    """Requests of this process under way for it (each may take the line)."""


class ScopeMarks:
    """The marks of one store's directory and glob locks in `directory` (locks of
    `namespace`); `card` gives the holder card of an (agent, key)."""

    def __init__(self, directory: LockDir, namespace: str, card: Callable[[str, str], str]) -> None:
        self._dir, self._namespace, self._card = directory, namespace, card
        self._mutex = threading.Lock()
        self._mine: dict[tuple[str, str], _Mark] = {}
        """(lock name, agent) -> this process's mark."""

    def any_mine(self) -> bool:
        """Whether this process keeps any mark (a release needs to look only then)."""
        return bool(self._mine)

    def want(self, key: str, name: str, agent: str) -> None:
        """Before a request of `agent` may take the line of the directory or glob `key`
        (lock `name`): its mark, made now if this process has none for them."""
        with self._mutex:
            mark = self._mine.get((name, agent))
            if mark is None or mark.pid != os.getpid():  # a forked child makes its own
                mark = _Mark(key, new_token(), self._card(agent, key), os.getpid())
                self._write(mark, name)
                self._mine[(name, agent)] = mark
            mark.wanting += 1

    def settle(
        self, name: str, agent: str, holds: Callable[[], bool], *, request_ended: bool
    ) -> None:
        """After a request of `agent` for lock `name` ended (`request_ended`), or after a
        release of it here: its mark goes unless another request of this process still
        wants it or `holds()` says the agent holds it."""
        with self._mutex:
            mark = self._mine.get((name, agent))
            if mark is None:
                return
            if request_ended:
                mark.wanting -= 1
            if mark.wanting > 0 or holds():
                return
            del self._mine[(name, agent)]
            _remove_mark(self._dir.fd, self._namespace, mark.key, f"{name}.{mark.mark_id}")
        if self._dir.exists(SCOPES):  # others' marks are left: those of the dead go too
            self.prune()

    def request(self, key: str, name: str, agent: str, *, exclusive: bool) -> str:
        """Before a request of `agent` for the directory or glob `key` (lock `name`) first
        takes its line: its entry saying it is under way (`pending_scopes.py`), returned
        for `request_ended`."""
        entry = request_entry(name, exclusive, new_token())
        _make_entry(self._dir.fd, (PENDING,), entry, self._card(agent, key))
        return entry

    def request_ended(self, entry: str) -> None:
        """The request of `entry` is granted or gave up, its line given back then."""
        _remove_entry(self._dir.fd, (PENDING,), entry)

    def prune(self) -> list[str]:
        """Remove the marks and requests whose processes are all provably dead (the
        processes their card names); return the marks' keys. An entry that cannot be judged
        (no card, a stray) stays."""
        judged: dict[CardProcess, Liveness] = {}
        pruned = []
        for entry in _entries(self._dir.fd, SCOPES):
            found = self._dead(SCOPES, entry, judged)
            if found is not None:
                key, namespace = found
                _remove_mark(self._dir.fd, namespace, key, entry)
                pruned.append(key)
        for entry in _entries(self._dir.fd, PENDING):
            if self._dead(PENDING, entry, judged) is not None:
                _remove_entry(self._dir.fd, (PENDING,), entry)
        return pruned

    def _dead(
        self, folder: str, entry: str, judged: dict[CardProcess, Liveness]
    ) -> tuple[str, str] | None:
        """(key, namespace) of `folder`'s entry `entry` when its processes are all provably
        dead."""
        try:
            card = os.readlink(f"{folder}/{entry}", dir_fd=self._dir.fd)
            text = self._dir.cards.read(card)
        except (OSError, CorruptRecordError):
            return None
        if text is None:
            return None
        processes = card_processes(text)
        try:
            fields = json.loads(text)
            key, namespace = fields["lock_path"], fields["namespace"]
        except (ValueError, KeyError, TypeError):
            return None
        if processes is None or not isinstance(key, str) or not isinstance(namespace, str):
            return None
        for process in processes:
            if process not in judged:
                judged[process] = liveness_of(*process)[0]
            if judged[process] is not Liveness.DEAD:
                return None
        return key, namespace

    def _write(self, mark: _Mark, name: str) -> None:
        entry = f"{name}.{mark.mark_id}"
        _make_entry(self._dir.fd, (SCOPES,), entry, mark.card)
        if is_glob_key(mark.key) and not mark.key.endswith("/"):
            folder = glob_folder(self._namespace, glob_prefix(mark.key))
            _make_entry(self._dir.fd, (GLOBS, folder), entry, mark.key)


def _entries(dir_fd: int, folder: str) -> list[str]:
    try:
        folder_fd = os.open(folder, DIR_FLAGS, dir_fd=dir_fd)
    except (FileNotFoundError, NotADirectoryError):
        return []
    try:
        return os.listdir(folder_fd)
    finally:
        os.close(folder_fd)


def _remove_mark(dir_fd: int, namespace: str, key: str, entry: str) -> None:
    """The mark `entry` of `key` goes: its glob index entry first, the marker last."""
    if is_glob_key(key) and not key.endswith("/"):
        _remove_entry(dir_fd, (GLOBS, glob_folder(namespace, glob_prefix(key))), entry)
    _remove_entry(dir_fd, (SCOPES,), entry)


def _make_entry(dir_fd: int, folders: tuple[str, ...], entry: str, target: str) -> None:
    """The symlink `<folders>/<entry>` -> `target`, its folders made as needed (a folder that
    a leaver removes meanwhile is made again)."""
    path = "/".join((*folders, entry))
    for _attempt in range(_ATTEMPTS):
        try:
            os.symlink(target, path, dir_fd=dir_fd)
            return
        except FileExistsError:
            return
        except FileNotFoundError:
            for depth in range(1, len(folders) + 1):
                try:
                    os.mkdir("/".join(folders[:depth]), 0o700, dir_fd=dir_fd)
                except FileExistsError:
                    continue
                except FileNotFoundError:
                    break  # an outer folder went meanwhile (a leaver's rmdir): again
    raise OSError(f"could not mark {path} in the lock directory: its folder kept going")


def _remove_entry(dir_fd: int, folders: tuple[str, ...], entry: str) -> None:
    """Remove `<folders>/<entry>`, then each folder from the innermost while it is empty."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink("/".join((*folders, entry)), dir_fd=dir_fd)
    for depth in range(len(folders), 0, -1):
        try:
            os.rmdir("/".join(folders[:depth]), dir_fd=dir_fd)
        except OSError:  # not empty (another mark), or gone already
            return
