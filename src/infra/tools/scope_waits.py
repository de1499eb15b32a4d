"""Whom a blocked request waits for through a directory or glob lock: the monitor's edges.

A file under a held directory (or matching a held glob) is free itself; a directory or glob
request waits for the holds below it (`lockstore/scope_keys.py`). Each such blocker is a wait
edge the monitor needs at once, or a cycle through it shows only at the next resync with the
store. The edges name the blocking lock's own key (`src/api/` above a file, `src/api/a.py`
below a directory), held by its holder, so the monitor's cycle reads like any other and the
coordinator confirms it against the store's holds. Read-only: it changes nothing.

The same reads name, in a refused request's result, who keeps a key from the agent when the
key's own lock has no holder to name (`blocked_by`): `src/api/ held by ann` over a file,
`docs/x.md shared by cid` for an exclusive request of a file being read.
"""

from __future__ import annotations

from typing import Protocol

from ..lockstore import (
    EXCLUSIVE,
    HolderRecord,
    LockInfo,
    LockMode,
    directory_ancestors,
    is_directory_key,
    is_glob_key,
    overlaps,
)


class ScopeReader(Protocol):
    """The store reads needed (every `LockBackend` has them)."""

    @property
    def namespace(self) -> str: ...
    def holder_record(self, filepath: str) -> HolderRecord | None: ...
    def readers(self, filepath: str) -> tuple[str, ...]: ...
    def globs_over(self, key: str) -> tuple[str, ...]: ...
    def list_locks(self) -> list[LockInfo]: ...


def scope_blockers(store: ScopeReader, agent_id: str, keys: list[str], mode: LockMode) -> list[str]:
    """The other locks whose holders (or readers, for an exclusive request) keep `keys` from
    `agent_id`: the directories and globs over a file key (a few reads each), and every lock
    overlapping a directory or glob key (one `list_locks` for all of them)."""
    found: set[str] = set()
    scoped = [key for key in keys if is_directory_key(key) or is_glob_key(key)]
    for key in keys:
        if key in scoped or key.startswith("/"):
            continue  # a key outside the checkout has no lock above it
        for above in (*directory_ancestors(key), *store.globs_over(key)):
            if _blocks(store.holder_record(above), store.readers(above), agent_id, mode):
                found.add(above)
    if scoped:
        for info in store.list_locks():
            if info.namespace != store.namespace or info.lock_path in scoped:
                continue
            readers = tuple(reader.agent_id for reader in info.shared_holders)
            if any(overlaps(key, info.lock_path) for key in scoped) and _blocks(
                info.holder, readers, agent_id, mode
            ):
                found.add(info.lock_path)
    return sorted(found - set(keys))


def blocked_by(store: ScopeReader, agent_id: str, key: str, mode: LockMode) -> list[str]:
    """Who keeps `key` from `agent_id`'s request in `mode`, besides the holder of its own lock:
    its readers (for an exclusive request), and the holder or readers of each lock over or
    below it that blocks it (`scope_blockers`), as `<lock> held by <agent>` or `<lock>
    shared by <agents>`."""
    found = []
    for other in (key, *scope_blockers(store, agent_id, [key], mode)):
        holder = store.holder_record(other) if other != key else None
        if holder is not None and holder.agent_id != agent_id:
            found.append(f"{other} held by {holder.agent_id}")
            continue
        readers = [reader for reader in store.readers(other) if reader != agent_id]
        if mode == EXCLUSIVE and readers:
            found.append(f"{other} shared by {', '.join(readers)}")
    return found


def _blocks(
    holder: HolderRecord | None, readers: tuple[str, ...], agent_id: str, mode: LockMode
) -> bool:
    if holder is not None and holder.agent_id != agent_id:
        return True
    return mode == EXCLUSIVE and any(reader != agent_id for reader in readers)
