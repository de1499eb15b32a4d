"""The wait-for graph's input from what a backend lists: holds, reads and waits.

Both backends list their locks as `LockInfo`s (`list_locks`); this turns them into the
holds and waits a wait-for graph is built from, the same way for both, so that a cycle
through a shared hold or a directory lock looks the same whichever backend it is on:

- a reader's shared hold is a node of its own (`shared_node`), held by the reader;
- a lock's holder that waits for its readers to leave (an exclusive grant or an upgrade)
  waits on each other reader's node;
- a directory or glob lock still draining (`HolderRecord.draining`: its grant not made yet)
  waits on every other agent's hold below it, and, for an exclusive request, on their reads
  there too; a granted one waits for nothing (a hold seen below it then is a request passing
  through on its way to its line, which it gives back at once).

`StoreSnapshot.holds` and `waits` key a lock by its repository-relative key alone: two
repositories sharing one lock directory (the default per-user one is shared by all of a
user's repositories) each have their own `src/app.py`, and they would collide there. A
reader that keys nodes by key alone (the in-process monitor) narrows the snapshot to its own
namespace first (`snapshot_of_namespace`); one that keys nodes by (namespace, key) reads `locks`
(the cross-process monitor, `crossproc/state.py`), with `waits_below` for the directories.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .liveness import Liveness
from .records import HolderRecord, LockInfo, StoreSnapshot, WaiterRecord, shared_node
from .scope_keys import is_above


def snapshot_of(
    locks: Iterable[LockInfo], live: Callable[[WaiterRecord], bool] = lambda waiter: True
) -> StoreSnapshot:
    """Holds and waits of `locks` (waiters for which `live` says False left out)."""
    locks = list(locks)
    holds = {info.lock_path: info.holder.agent_id for info in locks if info.holder is not None}
    waits = [
        (waiter.agent_id, waiter.lock_path)
        for info in locks
        for waiter in info.waiters
        if live(waiter)
    ]
    for info in locks:  # a holder waiting for the readers waits on each reader's hold
        for member in info.shared_holders:
            node = shared_node(member.lock_path, member.agent_id)
            holds[node] = member.agent_id
            if info.holder is not None and waits_for_reader(info.holder, member):
                waits.append((info.holder.agent_id, node))
    waits.extend((directory.agent_id, node) for directory, node in waits_below(locks))
    return StoreSnapshot(holds=holds, waits=tuple(waits), locks=tuple(locks))


def snapshot_of_namespace(snapshot: StoreSnapshot, namespace: str) -> StoreSnapshot:
    """`snapshot` narrowed to the locks and waits of one repository `namespace`, whose keys
    are then unique. A waiter proven dead is left out, as the lock directory's own snapshot
    does (the PostgreSQL one lists only live waiters: none is then proven dead)."""
    return snapshot_of(
        (info for info in snapshot.locks if info.namespace in (namespace, None)),
        lambda waiter: waiter.namespace == namespace and waiter.liveness()[0] is not Liveness.DEAD,
    )


def waits_for_reader(holder: HolderRecord, reader: HolderRecord) -> bool:
    """Whether the lock's `holder` waits for `reader` to leave: an exclusive request does
    (a shared one, holding the line only on its way to joining the readers, never does)."""
    return holder.mode != "shared" and holder.agent_id != reader.agent_id


def waits_below(locks: list[LockInfo]) -> list[tuple[HolderRecord, str]]:
    """(holder record of a directory or glob lock still draining, node it waits on): every
    other agent's hold below it (`scope_keys.is_above`) in its namespace, and, unless its
    request is shared, every other agent's read there. A node is a hold's key or a reader's
    `shared_node`; the draining one is a lock's holder or (PostgreSQL) one of its readers."""
    draining = [
        record
        for info in locks
        for record in (info.holder, *info.shared_holders)
        if record is not None and record.draining
    ]
    if not draining:
        return []
    waits = []
    for info in locks:
        held = [] if info.holder is None else [(info.holder, info.holder.lock_path, True)]
        held += [(m, shared_node(m.lock_path, m.agent_id), False) for m in info.shared_holders]
        for record, node, exclusive in held:
            for directory in draining:
                if (
                    record.agent_id != directory.agent_id
                    and (exclusive or directory.mode != "shared")
                    and record.namespace == directory.namespace
                    and is_above(directory.lock_path, record.lock_path)
                ):
                    waits.append((directory, node))
    return waits
