"""What the lock directory holds, as `lockyard status` and the deadlock monitor see it.

Reporting only reads: a lock whose record cannot be read is listed with its problem, never
removed, and a free lock with live waiters is listed as reserved for the first of them (so is
a lock handed over to that waiter at a release, until it accepts it).
"""

from __future__ import annotations

import time

from ..errors import CorruptRecordError, LockDirError
from ..holds_graph import snapshot_of
from ..liveness import Liveness
from ..records import HolderRecord, LockInfo, StoreSnapshot, WaiterRecord
from .disk import LOCK_SUFFIX, QUEUE_SUFFIX, SHARED_SUFFIX, LockDir
from .pending_scopes import any_pending, pending_requests
from .shared_holds import read_members


def list_locks(directory: LockDir, turn_timeout: float) -> list[LockInfo]:
    """Every lock in the lock directory (all namespaces), with holder, age and waiters.

    A free lock with live waiters is listed too (holder None, reserved for its first
    live waiter): `try_lock` refuses it, so whoever asks why must be able to see it.
    `turn_timeout` is how long that waiter may leave its turn untaken (said when exceeded).
    """
    now = time.time()
    locks = []
    names = dict.fromkeys(directory.names_with(LOCK_SUFFIX))
    names.update(dict.fromkeys(directory.names_with(QUEUE_SUFFIX)))
    names.update(dict.fromkeys(directory.names_with(SHARED_SUFFIX)))
    requests = pending_requests(directory) if any_pending(directory.fd) else {}
    for name in names:
        queue = directory.queues.scan_queue(name)
        waiters = tuple(record for _entry, record in queue)
        try:
            members = tuple(read_members(directory, name))
            holder = directory.read_holder(name)
        except (CorruptRecordError, LockDirError) as error:
            locks.append(
                LockInfo(
                    lock_path=name + LOCK_SUFFIX,
                    namespace=None,
                    holder=None,
                    age_seconds=None,
                    liveness="unknown",
                    liveness_reason="the holder record is unreadable",
                    waiters=waiters,
                    problem=str(error),
                )
            )
            continue
        if holder is None or _handed_over(holder, queue):
            reserved = _reserved(directory, name, queue, now, turn_timeout)
            if reserved is not None:
                locks.append(reserved.model_copy(update={"shared_holders": members}))
            elif members:
                locks.append(_shared_only(members, waiters, now))
            continue
        if name in requests and holder.agent_id in requests[name]:
            holder = _draining(holder, exclusive=requests[name][holder.agent_id])
        liveness, reason = holder.liveness()
        locks.append(
            LockInfo(
                lock_path=holder.lock_path,
                namespace=holder.namespace,
                holder=holder,
                age_seconds=max(0.0, now - holder.acquired_at),
                liveness=liveness.value,
                liveness_reason=reason,
                waiters=waiters,
                shared_holders=members,
            )
        )
    return sorted(locks, key=lambda info: (info.namespace or "", info.lock_path))


def snapshot(directory: LockDir, turn_timeout: float) -> StoreSnapshot:
    """Holds and live waits of the whole lock directory, for a wait-for graph
    (`holds_graph.py`).

    One pass over the directory: the waits are those `list_locks` read with each lock (a
    queue whose every waiter is dead is not listed, and has no live wait anyway)."""
    return snapshot_of(
        list_locks(directory, turn_timeout),
        lambda waiter: waiter.liveness()[0] is not Liveness.DEAD,
    )


def _draining(holder: HolderRecord, *, exclusive: bool) -> HolderRecord:
    """The holder of a directory or glob lock's line whose request is still under way: it
    waits for the holds below it (only for the exclusive ones, a shared request)."""
    mode = "exclusive" if exclusive else "shared"
    return holder.model_copy(update={"draining": True, "mode": mode})


def _shared_only(
    members: tuple[HolderRecord, ...], waiters: tuple[WaiterRecord, ...], now: float
) -> LockInfo:
    """A lock held by readers only."""
    first = min(members, key=lambda member: member.acquired_at)
    names = ", ".join(sorted(member.agent_id for member in members))
    return LockInfo(
        lock_path=first.lock_path,
        namespace=first.namespace,
        holder=None,
        age_seconds=max(0.0, now - first.acquired_at),
        liveness="alive",
        liveness_reason=f"held shared by {names}",
        waiters=waiters,
        shared_holders=members,
    )


def _handed_over(holder: HolderRecord, queue: list[tuple[str, WaiterRecord]]) -> bool:
    """Whether the lock holds the grant a release handed over to its first live waiter,
    which has not accepted it yet (by leaving the queue): it is that waiter's turn, shown
    as for a free lock reserved for it (`try_lock` refuses it the same way, and a waiter
    that leaves it unaccepted is passed over the same way)."""
    for _entry, waiter in queue:
        if waiter.liveness()[0] is not Liveness.DEAD:
            return waiter.token == holder.token
    return False


def _reserved(
    directory: LockDir,
    name: str,
    queue: list[tuple[str, WaiterRecord]],
    now: float,
    turn_timeout: float,
) -> LockInfo | None:
    """A free lock as seen by its queue: reserved for the first waiter not provably dead
    (its liveness is the lock's; `age_seconds` is how long its turn has lasted), or None
    when no such waiter is left."""
    for entry, waiter in queue:
        liveness, reason = waiter.liveness()
        if liveness is Liveness.DEAD:
            continue
        started = directory.queues.turn_started(name, entry, waiter.token)
        turn = None if started is None else max(0.0, now - started)
        text = f"free, reserved for the first waiter {waiter.agent_id}: {reason}"
        if turn is not None and turn >= turn_timeout:
            text += (
                f"; it has not taken its turn for {turn:.0f}s, so the next agent that "
                "asks passes it over (`lockyard clean` ends that wait now)"
            )
        return LockInfo(
            lock_path=waiter.lock_path,
            namespace=waiter.namespace,
            holder=None,
            age_seconds=turn,
            liveness="alive" if liveness is Liveness.ALIVE else "unknown",
            liveness_reason=text,
            waiters=tuple(record for _entry, record in queue),
        )
    return None
