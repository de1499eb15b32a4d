"""The wait-for graph's input from what a backend lists: holds, reads and waits.

Both backends list their locks as `LockInfo`s (`list_locks`); this turns them into the
holds and waits a wait-for graph is built from, the same way for both, so that a cycle
through a shared hold or a directory lock looks the same whichever backend it is on:

- a reader's shared hold is a node of its own (`shared_node`), held by the reader;
- a lock's holder that waits for its readers to leave (an exclusive grant or an upgrade)
  waits on each other reader's node;
- a directory or glob lock's holder waits on every other agent's hold below it.

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
from .scope_keys import is_above, is_scoped


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
            if info.holder is not None and info.holder.agent_id != member.agent_id:
                waits.append((info.holder.agent_id, node))
    below = waits_below(locks, {agent for agent, _node in waits})
    waits.extend((directory.agent_id, node) for directory, node in below)
    return StoreSnapshot(holds=holds, waits=tuple(waits), locks=tuple(locks))


def snapshot_of_namespace(snapshot: StoreSnapshot, namespace: str) -> StoreSnapshot:
    """`snapshot` narrowed to the locks and waits of one repository `namespace`, whose keys
    are then unique. A waiter proven dead is left out, as the lock directory's own snapshot
    does (the PostgreSQL one lists only live waiters: none is then proven dead)."""
    return snapshot_of(
        (info for info in snapshot.locks if info.namespace in (namespace, None)),
        lambda waiter: waiter.namespace == namespace and waiter.liveness()[0] is not Liveness.DEAD,
    )


def waits_below(locks: list[LockInfo], queued: set[str]) -> list[tuple[HolderRecord, str]]:
    """(holder record of a directory or glob lock, node it waits on): a directory or glob
    lock's holder waits on every other agent's hold below it (`scope_keys.is_above`) in its
    namespace, which is the node's too: it holds its line and waits for them to go (it is
    "draining"). A holder among `queued` (agents waiting elsewhere) holds that line only as a
    turnstile (it waits in that queue). A node is a hold's key or a reader's `shared_node`."""
    directories = [
        info.holder
        for info in locks
        if info.holder is not None
        and is_scoped(info.holder.lock_path)
        and info.holder.agent_id not in queued
    ]
    if not directories:
        return []
    waits = []
    for info in locks:
        held = [] if info.holder is None else [(info.holder, info.holder.lock_path)]
        held += [(m, shared_node(m.lock_path, m.agent_id)) for m in info.shared_holders]
        for record, node in held:
            for directory in directories:
                if (
                    record.agent_id != directory.agent_id
                    and record.namespace == directory.namespace
                    and is_above(directory.lock_path, record.lock_path)
                ):
                    waits.append((directory, node))
    return waits
