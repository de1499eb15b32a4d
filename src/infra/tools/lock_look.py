"""`lock_status`: a look at locks without taking them.

For each path: who holds it and since when, who waits for it in arrival order, whether the
asking agent holds or waits for it, and whether a `lock_acquire` now would be granted at
once. It reads the store (holder records, queue entries) and writes nothing: no queue entry,
no event, no journal record. `lockyard status PATH...` shows a person the same `Look`.

Holders are a list, never one name. Readers (agents holding the file in mode "shared") are
listed apart, by name: an exclusive `lock_acquire` waits for every one of them to leave.

A lock's scope may meet others' (issue 28): a directory or glob lock covers the locks below
it, and a file is covered by the directory and glob locks above it (`scope_keys.overlaps`,
`is_above`: the order every request passes in). Given the store's locks (one `list_locks`
read for a whole look), each look also lists those overlapping locks, with their holders,
readers and waiters, and counts them in `would_be_granted`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..lockstore import HolderRecord, Liveness, LockInfo, WaiterRecord, is_above
from ..lockstore import overlaps as scopes_overlap
from .wait_view import LineReader


class LookReader(LineReader, Protocol):
    """The reads a look needs: a line's, and the store's namespace (every `LockBackend`)."""

    @property
    def namespace(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Overlap:
    """Another lock whose scope meets the looked-at one: a directory or glob lock above it, or
    (for a directory or glob) a lock below it."""

    key: str
    above: bool
    """True: a directory or glob lock over the looked-at key; False: a lock below it."""
    holders: tuple[HolderRecord, ...]
    readers: tuple[HolderRecord, ...]
    queue: tuple[WaiterRecord, ...]

    def blocks(self, agent_id: str) -> bool:
        """Whether a live holder or reader other than `agent_id` keeps it from an exclusive
        grant of the looked-at key."""
        return any(
            record.agent_id != agent_id and _alive(record)
            for record in (*self.holders, *self.readers)
        )

    def describe(self) -> str:
        """`src/api/ (above) held by bob; shared by carol; 1 waiting`."""
        parts = [f"{self.key} ({'above' if self.above else 'below'})"]
        if self.holders:
            parts.append("held by " + ", ".join(h.agent_id for h in self.holders))
        if self.readers:
            parts.append("shared by " + ", ".join(r.agent_id for r in self.readers))
        if self.queue:
            parts.append(f"{len(self.queue)} waiting")
        return " ".join(parts[:2]) + "".join(f"; {part}" for part in parts[2:])


def overlaps(key: str, namespace: str, locks: Iterable[LockInfo]) -> tuple[Overlap, ...]:
    """The locks of `locks` (in `namespace`) whose scope meets `key`'s, in key order."""
    found = []
    for info in locks:
        other = info.lock_path
        if info.namespace != namespace or other == key or not scopes_overlap(key, other):
            continue
        above = is_above(other, key)
        holders = () if info.holder is None else (info.holder,)
        found.append(Overlap(other, above, holders, info.shared_holders, info.waiters))
    return tuple(sorted(found, key=lambda overlap: overlap.key))


@dataclass(frozen=True, slots=True)
class Look:
    """One lock as the store has it now: its holders and its queue in arrival order."""

    key: str
    holders: tuple[HolderRecord, ...]
    queue: tuple[WaiterRecord, ...]
    active: Mapping[str, float] = field(default_factory=dict)
    """Each holder's last heartbeat (any tool call or hook event), where the store has one."""
    readers: tuple[str, ...] = ()
    """The agents holding the file shared, not provably dead."""
    overlapping: tuple[Overlap, ...] = ()
    """Directory and glob locks above the key and, for a directory or glob, the locks below
    it."""

    def idle_seconds(self, holder: HolderRecord, now: float) -> float | None:
        """How long since `holder` last did anything (None: the store keeps no heartbeats)."""
        stamp = self.active.get(holder.agent_id)
        return None if stamp is None else max(0.0, now - stamp)

    def holds(self, agent_id: str) -> bool:
        return any(holder.agent_id == agent_id for holder in self.holders)

    def waits(self, agent_id: str) -> bool:
        return any(waiter.agent_id == agent_id for waiter in self.queue)

    def would_be_granted(self, agent_id: str) -> bool:
        """Whether `agent_id`'s exclusive acquire now gets it at once: it holds it already,
        or nobody else holds it, reads it or waits (first come, first served). A holder or
        waiter whose process is provably dead is no obstacle: the next acquire takes its
        place over. Its own shared hold is none either (an upgrade alone is granted). Another
        agent's hold above a file or below a directory keeps it from being granted."""
        if any(overlap.blocks(agent_id) for overlap in self.overlapping):
            return False
        if self.holds(agent_id):
            return True
        return (
            not any(map(_alive, self.holders))
            and all(reader == agent_id for reader in self.readers)
            and not any(_alive(waiter) for waiter in self.queue if waiter.agent_id != agent_id)
        )


def _alive(record: HolderRecord | WaiterRecord) -> bool:
    """Not provably dead (alive, or on another host or boot: unknown)."""
    return record.liveness()[0] is not Liveness.DEAD


def look(reader: LookReader, key: str, overlapping: tuple[Overlap, ...] = ()) -> Look:
    """`key` now (three reads of the store; a record gone between them is simply not shown),
    with the `overlapping` locks read beforehand (`overlaps`)."""
    record = reader.holder_record(key)
    holders = () if record is None else (record,)
    active = {h.agent_id: stamp for h in holders if (stamp := reader.last_active(h.agent_id))}
    queue = tuple(reader.waiters(key))
    return Look(key, holders, queue, active, reader.readers(key), overlapping)


def overlap_entry(overlap: Overlap, now: float) -> dict[str, Any]:
    """One overlapping lock as results show it."""
    return {
        "filepath": overlap.key,
        "where": "above" if overlap.above else "below",
        "held_by": [
            {"agent": h.agent_id, "for_seconds": round(max(0.0, now - h.acquired_at))}
            for h in overlap.holders
        ],
        "shared_by": [reader.agent_id for reader in overlap.readers],
        "waiting": [waiting_entry(waiter, now) for waiter in overlap.queue],
    }


def holding_entry(found: Look, holder: HolderRecord, now: float) -> dict[str, Any]:
    """One holder as results show it: who, since when, for how long, its fencing number,
    and how long since it last did anything."""
    idle = found.idle_seconds(holder, now)
    return {
        "agent": holder.agent_id,
        "since": round(holder.acquired_at, 3),
        "for_seconds": round(max(0.0, now - holder.acquired_at)),
        **({} if holder.fence is None else {"fence": holder.fence}),
        **({} if idle is None else {"idle_seconds": round(idle)}),
    }


def waiting_entry(waiter: WaiterRecord, now: float) -> dict[str, Any]:
    """One waiter as results show it: who, since when, for how long."""
    return {
        "agent": waiter.agent_id,
        "since": round(waiter.since, 3),
        "for_seconds": round(max(0.0, now - waiter.since)),
    }


def lock_look(
    reader: LookReader,
    agent_id: str,
    key: str,
    now: float | None = None,
    locks: Iterable[LockInfo] = (),
) -> dict[str, Any]:
    """`key` as `agent_id` would find it if it asked now; `locks` (the store's `list_locks`)
    for the locks above or below it."""
    moment = time.time() if now is None else now
    found = look(reader, key, overlaps(key, reader.namespace, locks))
    granted_now = found.would_be_granted(agent_id)
    return {
        "filepath": key,
        "held_by": [holding_entry(found, holder, moment) for holder in found.holders],
        "waiting": [waiting_entry(waiter, moment) for waiter in found.queue],
        "shared_by": list(found.readers),
        "you_hold": found.holds(agent_id),
        "you_hold_shared": agent_id in found.readers,
        "you_wait": found.waits(agent_id),
        "would_be_granted": granted_now,
        **(
            {"overlapping": [overlap_entry(o, moment) for o in found.overlapping]}
            if found.overlapping
            else {}
        ),
        "summary": _summary(found, agent_id, granted_now, moment),
    }


def _holding(found: Look, holder: HolderRecord, now: float) -> str:
    held = f"{holder.agent_id} for {round(max(0.0, now - holder.acquired_at))} s"
    idle = found.idle_seconds(holder, now)
    return held if idle is None else f"{held} (last active {round(idle)} s ago)"


def _summary(found: Look, agent_id: str, granted_now: bool, now: float) -> str:
    if found.holds(agent_id):
        held = "you hold it"
    elif found.holders:
        held = "held by " + ", ".join(_holding(found, h, now) for h in found.holders)
    elif not found.readers:
        held = "free"
    else:
        held = ""
    if found.readers:  # beside a holder: it is waiting, with the lock, for them to leave
        shared = "held shared by " + ", ".join(found.readers)
        held = f"{held} ({shared})" if held else shared
    waiting = f"{len(found.queue)} waiting" if found.queue else "nobody waiting"
    if found.overlapping:
        waiting += "; overlapping: " + ", ".join(o.describe() for o in found.overlapping)
    verdict = (
        "lock_acquire now would get it"
        if granted_now
        else "lock_acquire now would wait (first come, first served)"
    )
    return f"{held}; {waiting}; {verdict}"
