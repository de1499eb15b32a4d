"""DeadlockMonitor: turns lock events into a wait-for graph and resolves each cycle the moment
it closes, softly (the victim's pending acquire is told) or hard (through `on_deadlock`).

Concurrency: the monitor lives on one event loop. Every change of state happens in a
synchronous section with no `await` inside, so tasks cannot interleave within one; the only
awaits (`verify_cycle`, `on_deadlock`) run outside them, and a cycle is re-checked against the
graph after `verify_cycle` returns, before anyone is marked. Callbacks may therefore call back
into the monitor freely. From another thread, go through `anyio.from_thread`.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream

from ..core.agent_ids import validate_agent_id
from ..core.deadlock_info import CycleStep, DeadlockInfo
from ..core.events import LockEvent, LockEventType
from .graph import Cycle, WaitForGraph
from .victim import AgentInfo, VictimPolicy, cheapest_then_youngest, explain_choice

logger = logging.getLogger(__name__)

OnDeadlock = Callable[[DeadlockInfo], Awaitable[None] | None]
"""Told about every deadlock reported (after the victim is marked). May be sync or async."""

VerifyCycle = Callable[[DeadlockInfo], Awaitable[bool] | bool]
"""Confirms with the real lock state that every edge of the cycle still exists."""

HolderInStore = Callable[[str], Awaitable[str | None] | str | None]
"""The lock store's current holder of a lock (None: free), to correct a stale hold; raises
LookupError when the store cannot tell."""

FORMER_HOLDERS_KEPT: Final = 4096
"""How many released locks remember who released them last (oldest forgotten first)."""

GAVE_WAY_KEPT: Final = 4096
"""How many agents' counts of times given way are kept (the least recent victim's forgotten
first): the victim policy ages with them, and a long run does not grow them."""


_Search = Callable[[Collection[str], Collection[tuple[str, str]]], Cycle | None]
"""A cycle search that avoids some agents and some (agent, lock) wait edges."""


@dataclass(frozen=True, slots=True)
class _Registration:
    issue_id: str | None
    start_time: float


@dataclass(slots=True)
class _VictimSignal:
    """Wakes the pending `wait_for_victim` calls of one agent; carries the deadlock to them."""

    event: anyio.Event = field(default_factory=anyio.Event)
    info: DeadlockInfo | None = None
    waiters: int = 0

    def deliver(self, info: DeadlockInfo) -> None:
        self.info = info
        self.event.set()


@dataclass(frozen=True, slots=True)
class MonitorSnapshot:
    """A read-only view of the monitor for `lockyard status` and for tests."""

    holds: Mapping[str, str]
    waits: tuple[tuple[str, str], ...]
    agents: tuple[AgentInfo, ...]
    victims: Mapping[str, DeadlockInfo]

    def to_dict(self) -> dict[str, Any]:
        return {
            "holds": dict(self.holds),
            "waits": [{"agent_id": agent, "lock_path": lock} for agent, lock in self.waits],
            "agents": [
                {
                    "agent_id": info.agent_id,
                    "registered": info.registered,
                    "issue_id": info.issue_id,
                    "start_time": info.start_time,
                    "locks_held": info.locks_held,
                    "waits": info.waits,
                    "times_given_way": info.times_given_way,
                }
                for info in self.agents
            ],
            "victims": {agent: info.to_dict() for agent, info in self.victims.items()},
        }


class DeadlockMonitor:
    """Watches holds and waits; detects, verifies and reports deadlocks; marks victims.

    Rules for events that contradict the graph (logged with both parties, never fatal):
    - ACQUIRED of a lock recorded as held by another agent: the store handed the lock over, so
      the recorded hold is stale; the new holder replaces it.
    - RELEASED by an agent that does not hold the lock: ignored (it may be a late duplicate,
      and the lock now belongs to someone else).
    """

    def __init__(
        self,
        on_deadlock: OnDeadlock | None = None,
        *,
        victim_policy: VictimPolicy | None = None,
        verify_cycle: VerifyCycle | None = None,
        holder_in_store: HolderInStore | None = None,
    ) -> None:
        self.on_deadlock = on_deadlock
        self._holder_in_store = holder_in_store
        self._reports: MemoryObjectSendStream[DeadlockInfo] | None = None
        self._victim_policy: VictimPolicy = victim_policy or cheapest_then_youngest
        self._verify_cycle = verify_cycle
        self._graph = WaitForGraph()
        self._agents: dict[str, _Registration] = {}
        self._victims: dict[str, DeadlockInfo] = {}
        self._times_given_way: dict[str, int] = {}
        self._won_this_wait: set[str] = set()
        """Agents another agent gave way to during their current waits (see victim.py)."""
        self._signals: dict[str, _VictimSignal] = {}
        # lock -> the agent whose hold on it ended last (released or superseded), so that its
        # late duplicate RELEASED is recognised as such and not reported as a violation.
        # Bounded: a late duplicate comes right after the release, not 4,096 locks later.
        self._former_holder: dict[str, str] = {}

    @property
    def on_deadlock(self) -> OnDeadlock | None:
        """Told about every deadlock reported; may be set or replaced at any time."""
        return self._on_deadlock

    @on_deadlock.setter
    def on_deadlock(self, callback: OnDeadlock | None) -> None:
        if callback is not None and not callable(callback):
            raise TypeError(
                f"on_deadlock must be a function taking a DeadlockInfo (or None), "
                f"got {type(callback).__name__}"
            )
        self._on_deadlock = callback

    def _remember_former_holder(self, lock: str, agent: str) -> None:
        self._former_holder.pop(lock, None)
        self._former_holder[lock] = agent
        if len(self._former_holder) > FORMER_HOLDERS_KEPT:
            del self._former_holder[next(iter(self._former_holder))]

    # ---- agents --------------------------------------------------------------------------

    def register_agent(
        self, agent_id: str, issue_id: str | None = None, start_time: float | None = None
    ) -> None:
        """Record an agent (again: updates it). `start_time` defaults to now."""
        validate_agent_id(agent_id)
        if start_time is not None and not math.isfinite(start_time):
            raise ValueError(f"start_time must be a finite Unix time, got {start_time!r}")
        self._agents[agent_id] = _Registration(
            issue_id=issue_id, start_time=time.time() if start_time is None else start_time
        )

    def unregister_agent(self, agent_id: str) -> None:
        """Forget the agent: its holds, its waits and its victim mark. How often it gave way
        is kept (bounded by GAVE_WAY_KEPT): a victim has just released everything, and a
        monitor that forgets agents without locks must not forget that it gave way."""
        self._agents.pop(agent_id, None)
        self._graph.remove_agent(agent_id)
        self._victims.pop(agent_id, None)
        self._won_this_wait.discard(agent_id)

    def times_given_way(self, agent_id: str) -> int:
        """How many deadlocks this monitor made `agent_id` give way in."""
        return self._times_given_way.get(agent_id, 0)

    # ---- events --------------------------------------------------------------------------

    async def handle_event(self, event: LockEvent) -> DeadlockInfo | None:
        """Apply `event`; if it closed a cycle, report it and return it (the first, if several)."""
        if not isinstance(event, LockEvent):
            raise TypeError(
                f"handle_event takes a LockEvent, got {type(event).__name__}; build one with "
                "LockEvent(event_type=..., agent_id=..., lock_path=...)"
            )
        changed_lock = self._apply(event)
        if changed_lock is None:
            return None
        # Look the graph up on every search: a rebuild may replace it while verify_cycle runs.
        reported = await self._resolve(
            lambda skip, skip_edges: self._graph.cycle_through(changed_lock, skip, skip_edges)
        )
        return reported[0] if reported else None

    def _apply(self, event: LockEvent) -> str | None:
        """Change the graph; return the lock whose wait edges changed if a cycle may have closed."""
        agent, lock = event.agent_id, event.lock_path
        graph = self._graph
        match event.event_type:
            case LockEventType.WAITING:
                return lock if graph.add_wait(agent, lock) else None
            case LockEventType.WAIT_ENDED:
                if graph.remove_wait(agent, lock):
                    self._clear_mark_if_done(agent)
                return None
            case LockEventType.ACQUIRED:
                if graph.remove_wait(agent, lock):
                    self._clear_mark_if_done(agent)
                previous = graph.set_holder(lock, agent)
                if previous == agent:
                    return None  # a duplicate (the tool, then the PostToolUse hook)
                if previous is not None:
                    # Routine, not a fault: a hand-off can be reported before the release
                    # that caused it (a server pushes the grant to the waiter while the
                    # holder's release call is still returning); the late RELEASED is then
                    # recognised as the former holder's.
                    self._remember_former_holder(lock, previous)
                    logger.debug(
                        "lock %s acquired by %s while recorded as held by %s: "
                        "treating %s's hold as ended",
                        lock, agent, previous, previous,
                    )  # fmt: skip
                # The lock's waiters now wait on `agent`: a cycle closes if it reaches one.
                return lock
            case LockEventType.RELEASED:
                holder = graph.holder(lock)
                if holder == agent:
                    graph.clear_holder(lock)
                    self._remember_former_holder(lock, agent)
                elif holder is not None and self._former_holder.get(lock) == agent:
                    # The PostToolUse hook re-reporting a release after the lock moved on.
                    logger.debug("late duplicate release of %s by %s ignored", lock, agent)
                elif holder is not None:
                    logger.warning(
                        "lock %s released by %s but held by %s: ignoring the release",
                        lock, agent, holder,
                    )  # fmt: skip
                return None

    def _clear_mark_if_done(self, agent: str) -> None:
        """A victim's mark, and a winner's turn, stand until all its waits have ended."""
        if not self._graph.wait_count(agent):
            self._victims.pop(agent, None)
            self._won_this_wait.discard(agent)

    # ---- detection and resolution --------------------------------------------------------

    async def check_all(self) -> list[DeadlockInfo]:
        """Search the whole graph (after `rebuild`) and report every deadlock found."""
        return await self._resolve(
            lambda skip, skip_edges: self._graph.find_cycle(skip, skip_edges)
        )

    def find_cycles(self) -> list[Cycle]:
        """Read-only: the cycles present now (victims included), reporting nothing."""
        return self._graph.cycles()

    async def _resolve(self, search: _Search) -> list[DeadlockInfo]:
        """Report cycles found by `search` until none is left.

        Marked victims are skipped: each is giving way, which breaks every cycle through it, so
        a cycle being resolved is not reported again, while a cycle without a victim is new.
        """
        reported: list[DeadlockInfo] = []
        # When the store does not confirm a cycle, some edge of it is stale. With
        # `holder_in_store` the stale holds are read from the store and corrected, which
        # removes the stale edge for good. Otherwise (or when no hold was stale) which edge is
        # stale is unknown: set the victim's edge aside for this call and look again, so that
        # other cycles are still found. Each refusal removes one edge, so this ends.
        declined: set[tuple[str, str]] = set()
        corrections_left = 64  # a store that keeps changing cannot keep this call going
        while True:
            cycle = search(self._victims.keys(), declined)
            if cycle is None:
                return reported
            info = self._deadlock_info(cycle)
            if not await self._confirmed(info):
                if corrections_left > 0 and await self._correct_stale_holds(cycle):
                    corrections_left -= 1
                else:
                    declined.add((info.victim, info.victim_waits_on))
                continue
            # The graph may have changed while verify_cycle ran: report only what still stands.
            if not self._graph.is_intact(cycle) or any(
                step.agent_id in self._victims for step in cycle
            ):
                continue
            self._mark(info)
            reported.append(info)
            await self._notify(info)

    def _deadlock_info(self, cycle: Cycle) -> DeadlockInfo:
        agents = {step.agent_id: self._agent_info(step.agent_id) for step in cycle}
        policy = self._victim_policy
        try:
            victim: object = policy(cycle, agents)
        except Exception:
            # A deadlock must not go unresolved because a custom policy failed.
            logger.exception("victim policy failed; using the default policy")
            victim = None
        if victim not in agents:
            if victim is not None:
                logger.error(
                    "victim policy chose %r, not an agent of the cycle %s; using the default",
                    victim, list(agents),
                )  # fmt: skip
            policy = cheapest_then_youngest
            victim = policy(cycle, agents)
        assert isinstance(victim, str)
        if policy is cheapest_then_youngest:
            reason = explain_choice(cycle, agents, victim)
        else:
            name = getattr(policy, "__name__", type(policy).__name__)
            reason = f"{victim} gives way: chosen by the victim policy {name}"
        start = next(i for i, step in enumerate(cycle) if step.agent_id == victim)
        ordered: tuple[CycleStep, ...] = cycle[start:] + cycle[:start]
        return DeadlockInfo(
            cycle=ordered,
            victim=victim,
            victim_waits_on=ordered[0].lock_path,
            victim_waits_on_holder=ordered[0].held_by,
            victim_reason=reason,
        )

    def _agent_info(self, agent_id: str) -> AgentInfo:
        registration = self._agents.get(agent_id)
        return AgentInfo(
            agent_id=agent_id,
            registered=registration is not None,
            issue_id=None if registration is None else registration.issue_id,
            start_time=None if registration is None else registration.start_time,
            locks_held=self._graph.hold_count(agent_id),
            waits=self._graph.wait_count(agent_id),
            times_given_way=self._times_given_way.get(agent_id, 0),
            won_this_wait=agent_id in self._won_this_wait,
        )

    async def _confirmed(self, info: DeadlockInfo) -> bool:
        if self._verify_cycle is None:
            return True
        try:
            outcome = self._verify_cycle(info)
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except Exception:
            # Reporting an unconfirmed cycle could sacrifice an innocent agent; the waits'
            # own timeouts remain the fallback.
            logger.exception("verify_cycle failed; not reporting %s", info.describe())
            return False
        if not outcome:
            logger.info("cycle dissolved in the lock store, not reported: %s", info.describe())
        return bool(outcome)

    async def _correct_stale_holds(self, cycle: Cycle) -> bool:
        """Make the cycle's holds agree with the store; True when one was stale."""
        if self._holder_in_store is None:
            return False
        corrected = False
        for step in cycle:
            try:
                actual = self._holder_in_store(step.lock_path)
                if inspect.isawaitable(actual):
                    actual = await actual
            except LookupError:
                continue  # the store cannot tell (an unreadable record): leave that hold
            except Exception:
                logger.exception("holder_in_store failed for %s", step.lock_path)
                return corrected
            # Only what the graph still believes is corrected: events may have moved on.
            if actual == step.held_by or self._graph.holder(step.lock_path) != step.held_by:
                continue
            logger.warning(
                "monitor's hold of %s by %s was stale (the store says %s): corrected",
                step.lock_path, step.held_by, actual or "free",
            )  # fmt: skip
            if actual is None:
                self._graph.clear_holder(step.lock_path)
            else:
                self._graph.set_holder(step.lock_path, actual)
            self._remember_former_holder(step.lock_path, step.held_by)
            corrected = True
        return corrected

    def _mark(self, info: DeadlockInfo) -> None:
        self._victims[info.victim] = info
        # Counted when chosen (it gives way from here): the next choice ages it.
        count = self._times_given_way.pop(info.victim, 0) + 1
        self._times_given_way[info.victim] = count
        if len(self._times_given_way) > GAVE_WAY_KEPT:
            del self._times_given_way[next(iter(self._times_given_way))]
        self._won_this_wait.update(a for a in info.agents if a != info.victim)
        signal = self._signals.pop(info.victim, None)
        if signal is not None:
            signal.deliver(info)
        logger.warning("deadlock: %s; victim %s", info.describe(), info.victim)

    async def _notify(self, info: DeadlockInfo) -> None:
        if self._on_deadlock is None:
            return
        if self._reports is not None:
            self._reports.send_nowait(info)  # run by `run_callbacks`, off the event's path
            return
        await self._call_on_deadlock(info)

    async def run_callbacks(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run `on_deadlock` off the reporting path until cancelled: each report in a task of
        its own, so neither the event that closed the cycle (an agent's tool call) nor other
        reports wait for a slow callback. Start it in a task group (`LockCoordinator` does);
        without it, `on_deadlock` runs in the task that reported the event."""
        if self._reports is not None:
            raise RuntimeError("run_callbacks is already running for this monitor")
        send, receive = anyio.create_memory_object_stream[DeadlockInfo](math.inf)
        self._reports = send
        try:
            async with anyio.create_task_group() as group:
                task_status.started()
                async for info in receive:
                    group.start_soon(self._call_on_deadlock, info)
        finally:
            self._reports = None
            send.close()
            receive.close()

    async def _call_on_deadlock(self, info: DeadlockInfo) -> None:
        if self._on_deadlock is None:
            return
        try:
            outcome = self._on_deadlock(info)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            # A reporting call must not fail because a handler did, nor the callback runner.
            logger.exception("on_deadlock failed for %s", info.describe())

    # ---- soft resolution -----------------------------------------------------------------

    async def wait_for_victim(self, agent_id: str) -> DeadlockInfo:
        """Return once `agent_id` is chosen as a victim; at once if it is marked already."""
        validate_agent_id(agent_id)
        marked = self._victims.get(agent_id)
        if marked is not None:
            return marked
        signal = self._signals.get(agent_id)
        if signal is None:
            signal = self._signals[agent_id] = _VictimSignal()
        signal.waiters += 1
        try:
            await signal.event.wait()
        finally:
            signal.waiters -= 1
            if not signal.waiters and self._signals.get(agent_id) is signal:
                del self._signals[agent_id]  # every waiter gave up: forget the signal
        assert signal.info is not None  # set before the event fires
        return signal.info

    def victim_mark(self, agent_id: str) -> DeadlockInfo | None:
        """The deadlock `agent_id` is marked as the victim of, if any."""
        return self._victims.get(agent_id)

    # ---- snapshots -----------------------------------------------------------------------

    def rebuild(self, holds: Mapping[str, str], waits: Iterable[tuple[str, str]]) -> None:
        """Replace the graph with the lock store's truth (`holds`: lock -> holder; `waits`:
        (agent, lock) pairs). Raises ValueError on a malformed entry and then changes nothing.
        Victim marks survive for victims that still wait. Call `check_all` to find cycles.
        """
        self._graph = WaitForGraph.from_snapshot(holds, waits)
        for agent in [*self._victims, *self._won_this_wait]:
            self._clear_mark_if_done(agent)

    def snapshot(self) -> MonitorSnapshot:
        graph = self._graph.snapshot()
        known = dict.fromkeys([*self._agents, *self._graph.agents()])
        return MonitorSnapshot(
            holds=graph.holds,
            waits=graph.waits,
            agents=tuple(self._agent_info(agent) for agent in known),
            victims=dict(self._victims),
        )

    def describe(self) -> str:
        """A few lines for a person: holds, waits and victims."""
        snap = self.snapshot()
        lines = [f"{lock} held by {holder}" for lock, holder in snap.holds.items()]
        lines += [f"{agent} waits for {lock}" for agent, lock in snap.waits]
        lines += [f"victim {agent}: {info.describe()}" for agent, info in snap.victims.items()]
        return "\n".join(lines) if lines else "no locks held or awaited"
