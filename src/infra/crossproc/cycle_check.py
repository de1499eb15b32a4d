"""Whether a cycle an in-process monitor found still stands in the lock store.

A coordinator's or an IPC host's monitor builds its graph from the tools' events (a reader's
grant is reported under the file's own key) and from resyncs with the store (whose holds name
each reader's hold `x (shared by A)` and whose waits include a directory lock waiting for the
holds below it). Both forms are checked here against one read of the store's holds, so a
cycle through a reader or a directory is confirmed like a cycle through files.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...core.deadlock_info import DeadlockInfo
from ..lockstore import CorruptRecordError, LockBackend, shared_node


def cycle_stands(store: LockBackend, info: DeadlockInfo) -> bool:
    """Every hold of the cycle is still real in the store (an unreadable record proves
    nothing: no). Wait edges are the tools' own and trusted as reported."""
    try:
        holds = _holds_of(store)
    except CorruptRecordError:
        return False
    return all(_holds(holds, step.lock_path, step.held_by) for step in info.cycle)


def holder_in_store(store: LockBackend, lock_path: str) -> str | None:
    """The store's holder of `lock_path` (a file, a directory or a reader's node); for a lock
    that only readers hold, the first of them by name. LookupError when unreadable."""
    try:
        holds = _holds_of(store)
    except CorruptRecordError as exc:
        raise LookupError(str(exc)) from None
    holder = holds.get(lock_path)
    if holder is not None:
        return holder
    readers = sorted(
        agent for node, agent in holds.items() if node == shared_node(lock_path, agent)
    )
    return readers[0] if readers else None


def _holds_of(store: LockBackend) -> dict[str, str]:
    """Lock key (or a reader's node) -> its holder, in the store's own namespace only (a lock
    directory may serve several repositories, each with its own `src/app.py`)."""
    holds: dict[str, str] = {}
    for info in store.list_locks():
        if info.namespace != store.namespace:
            continue
        if info.holder is not None:
            holds[info.lock_path] = info.holder.agent_id
        for member in info.shared_holders:
            holds[shared_node(info.lock_path, member.agent_id)] = member.agent_id
    return holds


def _holds(holds: Mapping[str, str], lock_path: str, agent_id: str) -> bool:
    """`agent_id` holds `lock_path`: as its holder, or as one of its readers."""
    return (
        holds.get(lock_path) == agent_id or holds.get(shared_node(lock_path, agent_id)) == agent_id
    )
