"""What the demo saw: lock events, agent progress, deadlocks and any overlap of holders.

The recorder sits between the lock tools and the monitor (every LockEvent passes through
`on_event`), and the scripted agents report their phases and critical sections to it. The
live view reads it while the run goes on; the summary reads it at the end. Everything runs
on one event loop, so plain dicts are enough: no method awaits while it updates state.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

import anyio

from ...core.deadlock_info import DeadlockInfo
from ...core.events import LockEvent, LockEventType


class Phase(StrEnum):
    STARTING = "starting"
    LOCKING = "locking"
    WAITING = "waiting"
    EDITING = "editing"
    READING = "reading"
    HOLDING = "holding"
    IDLE = "between tasks"
    BACKING_OFF = "backing off"
    DONE = "done"
    FAILED = "failed"


@dataclass
class AgentProgress:
    agent_id: str
    edits_total: int
    edits_done: int = 0
    phase: Phase = Phase.STARTING
    deadlock_results: int = 0
    note: str = ""


@dataclass(frozen=True)
class Overlap:
    """Two agents inside one file's critical section at once: mutual exclusion broke."""

    lock_key: str
    agent_id: str
    other_agent_id: str
    at: float


@dataclass
class SessionRecorder:
    clock: Callable[[], float] = time.perf_counter
    holds: dict[str, list[str]] = field(default_factory=dict)
    """key -> its holders: one, or the readers holding it together (mode shared)."""
    waits: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    agents: dict[str, AgentProgress] = field(default_factory=dict)
    handoffs: list[float] = field(default_factory=list)
    handoffs_in_order: int = 0
    loop_turns: list[float] = field(default_factory=list)
    floor_cycles: list[float] = field(default_factory=list)
    """The backend's own floor of a hand-off, measured in the same run (`runner.py`)."""
    floor_name: str = ""
    wait_events: int = 0
    deadlocks: list[DeadlockInfo] = field(default_factory=list)
    overlaps: list[Overlap] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    events: int = 0
    _release_started: dict[str, tuple[str, float]] = field(default_factory=dict)
    """key -> (holder, when its release began): the holder's lock_release call, or the
    RELEASED event when that came first (a victim's locks, released for it)."""
    _inside: dict[str, str] = field(default_factory=dict)
    _queues: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    _awaited_waits: dict[tuple[str, str], anyio.Event] = field(default_factory=dict)
    _shared: set[tuple[str, str]] = field(default_factory=set)
    """(agent, key) the agent asks for in mode shared (`reading`)."""

    def add_agent(self, agent_id: str, edits_total: int) -> None:
        self.agents[agent_id] = AgentProgress(agent_id=agent_id, edits_total=edits_total)

    # --- lock events (the emit_lock_event of every agent's tool server passes through here)

    def on_event(self, event: LockEvent) -> None:
        now = self.clock()
        self.events += 1
        agent, key = event.agent_id, event.lock_path
        waiting_on, queue = self.waits[agent], self._queues[key]
        if event.event_type is LockEventType.WAITING:
            if key not in waiting_on:
                waiting_on.append(key)
                queue.append(agent)
                self.wait_events += 1
            awaited = self._awaited_waits.pop((agent, key), None)
            if awaited is not None:
                awaited.set()
        elif event.event_type is LockEventType.WAIT_ENDED:
            _discard(waiting_on, key)
            _discard(queue, agent)
        elif event.event_type is LockEventType.ACQUIRED:
            holders = self.holds.setdefault(key, [])
            if agent in holders:
                return  # a duplicate (the hook re-emits what the tool emitted)
            # A hand-off may be reported before the release that caused it: on PostgreSQL
            # the server pushes the grant to the waiter while the holder's release call is
            # still returning. So it is timed from the start of that release, not from the
            # RELEASED event (which then still names the former holder).
            released = self._release_started.pop(key, None)
            if key in waiting_on and released is not None and released[0] != agent:
                self.handoffs.append(now - released[1])
                if queue and queue[0] == agent:
                    self.handoffs_in_order += 1
            _discard(waiting_on, key)
            _discard(queue, agent)
            if (agent, key) in self._shared:
                holders.append(agent)  # beside the other readers
            else:  # alone (a former holder's RELEASED may still be on its way)
                self.holds[key] = [agent]
        elif agent in self.holds.get(key, ()):  # RELEASED by a holder
            self.holds[key].remove(agent)
            if not self.holds[key]:
                del self.holds[key]
            if self._release_started.get(key, ("", 0.0))[0] != agent:
                self._release_started[key] = (agent, now)

    def reading(self, agent_id: str, keys: list[str]) -> None:
        """`agent_id` asks for `keys` in mode shared: its holds go beside the others'."""
        self._shared.update((agent_id, key) for key in keys)

    def releasing(self, agent_id: str, keys: list[str]) -> None:
        """`agent_id` is about to call lock_release for `keys` (the hand-offs start now)."""
        now = self.clock()
        for key in keys:
            if self.holds.get(key) == [agent_id]:
                self._release_started[key] = (agent_id, now)

    def waits_for(self) -> list[tuple[str, str, str | None]]:
        """(waiting agent, lock key, its holders or None) for every wait edge, agents in
        order."""
        return [
            (agent, key, ", ".join(self.holds.get(key, ())) or None)
            for agent in sorted(self.waits)
            for key in self.waits[agent]
        ]

    async def until_waiting(self, agent_id: str, lock_key: str) -> None:
        """Until `agent_id` waits for `lock_key` (at once if it does now)."""
        if lock_key in self.waits[agent_id]:
            return
        await self._awaited_waits.setdefault((agent_id, lock_key), anyio.Event()).wait()

    def on_deadlock(self, info: DeadlockInfo) -> None:
        self.deadlocks.append(info)

    # --- what the scripted agents report

    def set_phase(self, agent_id: str, phase: Phase, note: str = "") -> None:
        progress = self.agents[agent_id]
        progress.phase = phase
        progress.note = note

    def count_deadlock_result(self, agent_id: str) -> None:
        self.agents[agent_id].deadlock_results += 1

    def enter(self, agent_id: str, lock_key: str) -> None:
        """An agent starts its read-modify-write of a file it believes it holds."""
        other = self._inside.get(lock_key)
        if other is not None and other != agent_id:
            self.overlaps.append(Overlap(lock_key, agent_id, other, self.clock()))
        self._inside[lock_key] = agent_id

    def leave(self, agent_id: str, lock_key: str) -> None:
        if self._inside.get(lock_key) == agent_id:
            del self._inside[lock_key]
        self.agents[agent_id].edits_done += 1

    @property
    def edits_done(self) -> int:
        return sum(progress.edits_done for progress in self.agents.values())

    @property
    def edits_total(self) -> int:
        return sum(progress.edits_total for progress in self.agents.values())


def _discard(items: list[str], item: str) -> None:
    if item in items:
        items.remove(item)
