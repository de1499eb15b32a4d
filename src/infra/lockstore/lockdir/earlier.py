"""Locks of an earlier lockyard version, honoured until they are released.

A version before repository-relative keys named a lock by (repository directory, absolute
path): another lock name for the same file. Its live locks are found when a store opens,
translated to the store's keys, and honoured until released or their holder is provably
dead; they are never treated as free. (A lock such a version takes after the store opened
is not seen: stop the earlier version's agents before starting this one's; `lockyard
status` lists what they still hold.)
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from ..checkout import checkout_at
from ..errors import CorruptRecordError, LockDirError
from ..paths import lock_name
from ..records import HolderRecord
from .disk import LOCK_SUFFIX, LockDir
from .reading import names_with, read_holder
from .reclamation import reclaim_if_dead

if TYPE_CHECKING:
    from .store import LockStore

log = logging.getLogger(__name__)


def find_earlier_locks(directory: LockDir, namespace: str, root: str) -> dict[str, str]:
    """lock name -> name of a lock an earlier version holds on the same file, for the
    store of `namespace` opened on checkout `root`."""
    found: dict[str, str] = {}
    for name in names_with(directory, LOCK_SUFFIX):
        try:
            holder = read_holder(directory, name)
        except (CorruptRecordError, LockDirError):
            continue
        if holder is None or not holder.earlier_format:
            continue
        key = key_of_earlier(holder, root)
        if key is not None:
            found[lock_name(namespace, key)] = name
    if found:
        log.warning(
            "%d lock(s) in %s were taken by an earlier lockyard version; their files stay "
            "locked until released (`lockyard status` lists them)",
            len(found),
            directory.path,
        )
    return found


def key_of_earlier(holder: HolderRecord, root: str) -> str | None:
    """The key, in the checkout `root`, of the file an earlier-format record locks, or None
    when that record is about another repository (or one this host cannot see)."""
    try:
        theirs = checkout_at(os.path.realpath(holder.namespace), None)
        ours = checkout_at(root, None)
    except (OSError, ValueError):
        return None
    if theirs.namespace != ours.namespace:
        return None
    path = holder.lock_path
    if path.startswith("/") and theirs.contains(path) and path != theirs.root:
        return path[len(theirs.root.rstrip("/")) + 1 :]
    return path  # a literal key, or a file outside the repository


def held_by_earlier_version(store: LockStore, name: str, agent: str) -> bool:
    """Whether lock `name` is still held under its earlier-version name (a provably dead
    such holder is reclaimed, and the lock forgotten once free)."""
    earlier = store._earlier.get(name)
    if earlier is None:
        return False
    try:
        holder = read_holder(store._dir, earlier)
    except CorruptRecordError:
        return True  # never guess
    if holder is not None and reclaim_if_dead(store, earlier, holder, agent):
        holder = None
    if holder is None:
        store._earlier.pop(name, None)
        return False
    return True
