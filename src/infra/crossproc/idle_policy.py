"""The idle limit: a holder that stalled while others wait for its locks loses them.

A live holder that stopped working (waiting for a person, looping) blocks its waiters longer
than any deadlock would: nothing is wrong in the wait-for graph, so the deadlock monitor never
acts. With an idle limit set (off by default; per lock directory or database with `lockyard
policy --idle-limit`, per `LockCoordinator` with `idle_limit=`), a holder idle past it while
someone waits for one of its locks has every lock revoked through `LockBackend.revoke`: the
waiters get them in turn, the guards deny its writes, and its next lock call tells it why.

Idle means: no heartbeat (any lock tool call or hook event, `lockdir/agents.py`) for longer
than the limit. A holder that never stamped counts from its newest grant, never as idle
forever. A holder nobody waits for is never revoked, nor one that waits itself: a waiting
holder is blocked, not stalled (the waits' own holder is the one to revoke, and a cycle is
the deadlock monitor's).

`find_stalls` decides (no I/O but the stamps it is handed); `revoke_stalls` acts, journalled as
an operator release naming the policy. Only the deadlock leader's pass runs it for a lock store
(`monitor_loop.py`), so a stall is revoked once, by one process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass

from ..lockstore import LockBackend, operator_release
from .state import WaitForSnapshot

log = logging.getLogger("lockyard.idle")


@dataclass(frozen=True)
class Stall:
    """A holder idle past the limit while others wait for its locks."""

    agent_id: str
    idle_seconds: float
    waited_for: tuple[str, ...]
    """Its locks (graph nodes, `namespace::key`) that someone waits for, sorted."""
    waiters: tuple[str, ...]
    """Who waits for them, in order of their first wait's arrival."""

    def reason(self, limit: float, whose: str) -> str:
        """What the holder is told: `idle 12m past the lock directory's limit of 10m while
        bob waited`."""
        waiting = ", ".join(self.waiters[:3]) + (" and others" if len(self.waiters) > 3 else "")
        return (
            f"idle {duration_text(self.idle_seconds)} past {whose} limit of "
            f"{duration_text(limit)} while {waiting} waited"
        )


@dataclass(frozen=True)
class Revocation:
    """A stall the policy acted on: the locks it released, and what the holder is told."""

    stall: Stall
    reason: str
    released: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "agent": self.stall.agent_id,
            "idle_seconds": round(self.stall.idle_seconds, 3),
            "waiters": list(self.stall.waiters),
            "reason": self.reason,
            "released": list(self.released),
        }


def find_stalls(
    snapshot: WaitForSnapshot,
    last_active: Callable[[str], float | None],
    limit: float,
    now: float,
    *,
    among: Collection[str] | None = None,
) -> list[Stall]:
    """The holders of `snapshot` idle longer than `limit` seconds at `now` while another agent
    waits for one of their locks (only those of `among` when given), by agent id.
    `last_active` is asked only about such holders."""
    waiting_agents = {wait.agent_id for wait in snapshot.waits}
    waited: dict[str, dict[str, None]] = {}  # holder -> its waited-for locks
    waiters: dict[str, dict[str, None]] = {}  # holder -> who waits, in arrival order
    for wait in sorted(snapshot.waits, key=lambda wait: wait.since):
        hold = snapshot.holds.get(wait.lock_key)
        if hold is None or hold.agent_id == wait.agent_id:
            continue
        holder = hold.agent_id
        if holder in waiting_agents or (among is not None and holder not in among):
            continue
        waited.setdefault(holder, {})[wait.lock_key] = None
        waiters.setdefault(holder, {})[wait.agent_id] = None
    stalls = []
    for holder in sorted(waited):
        since = last_active(holder)
        if since is None:  # never stamped: idle since its newest grant, not forever
            since = max(h.acquired_at for h in snapshot.holds.values() if h.agent_id == holder)
        idle = now - since
        if idle > limit:
            stalls.append(
                Stall(holder, idle, tuple(sorted(waited[holder])), tuple(waiters[holder]))
            )
    return stalls


def revoke_stalls(
    store: LockBackend,
    snapshot: WaitForSnapshot,
    limit: float,
    now: float,
    *,
    whose: str,
    among: Collection[str] | None = None,
) -> list[Revocation]:
    """Revoke the locks of every stall `find_stalls` finds; `whose` names the limit's owner in
    the holder's reason (`the lock directory's`). The journal records each release as an
    operator release by the policy."""
    revocations = []
    for stall in find_stalls(snapshot, store.last_active, limit, now, among=among):
        reason = stall.reason(limit, whose)
        with operator_release(f"lockyard's idle limit ({whose} limit of {duration_text(limit)})"):
            released = store.revoke(stall.agent_id, f"lockyard's idle limit released it: {reason}")
        if released:
            log.warning("revoked the locks of %s: %s", stall.agent_id, reason)
            revocations.append(Revocation(stall, reason, tuple(released)))
    return revocations


def duration_text(seconds: float) -> str:
    """`45s`, `10m`, `12m30s`, `1h`, `2h05m`: a limit or an idle time, short."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m" if secs == 0 else f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h" if minutes == 0 else f"{hours}h{minutes:02d}m"
