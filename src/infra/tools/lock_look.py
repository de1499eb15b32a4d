"""`lock_status`: a look at locks without taking them.

For each path: who holds it and since when, who waits for it in arrival order, whether the
asking agent holds or waits for it, and whether a `lock_acquire` now would be granted at
once. It reads the store (holder records, queue entries) and writes nothing: no queue entry,
no event, no journal record.

Holders are a list, never one name: shared holds (many readers) report several.
"""

from __future__ import annotations

import time
from typing import Any

from ..lockstore import HolderRecord, WaiterRecord
from .wait_view import LineReader


def lock_look(
    reader: LineReader, agent_id: str, key: str, now: float | None = None
) -> dict[str, Any]:
    """`key` as `agent_id` would find it if it asked now (two reads of the store)."""
    moment = time.time() if now is None else now
    record = reader.holder_record(key)
    holders: list[HolderRecord] = [] if record is None else [record]
    queue: list[WaiterRecord] = reader.waiters(key)
    you_hold = any(h.agent_id == agent_id for h in holders)
    you_wait = any(w.agent_id == agent_id for w in queue)
    others_ahead = [w for w in queue if w.agent_id != agent_id]
    granted_now = you_hold or (not holders and not others_ahead)
    return {
        "filepath": key,
        "held_by": [
            {
                "agent": h.agent_id,
                "since": round(h.acquired_at, 3),
                "for_seconds": round(max(0.0, moment - h.acquired_at)),
                **({} if h.fence is None else {"fence": h.fence}),
            }
            for h in holders
        ],
        "waiting": [
            {
                "agent": w.agent_id,
                "since": round(w.since, 3),
                "for_seconds": round(max(0.0, moment - w.since)),
            }
            for w in queue
        ],
        "you_hold": you_hold,
        "you_wait": you_wait,
        "would_be_granted": granted_now,
        "summary": _summary(holders, queue, agent_id, granted_now, moment),
    }


def _summary(
    holders: list[HolderRecord],
    queue: list[WaiterRecord],
    agent_id: str,
    granted_now: bool,
    now: float,
) -> str:
    if any(h.agent_id == agent_id for h in holders):
        held = "you hold it"
    elif holders:
        held = "held by " + ", ".join(
            f"{h.agent_id} for {round(max(0.0, now - h.acquired_at))} s" for h in holders
        )
    else:
        held = "free"
    waiting = f"{len(queue)} waiting" if queue else "nobody waiting"
    verdict = (
        "lock_acquire now would get it"
        if granted_now
        else "lock_acquire now would wait (first come, first served)"
    )
    return f"{held}; {waiting}; {verdict}"
