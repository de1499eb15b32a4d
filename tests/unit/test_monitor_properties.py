"""DeadlockMonitor against a brute-force model, for random event sequences (hypothesis).

The model applies the same event rules to plain sets. After every event:
- the monitor reported a deadlock exactly when the model's graph has a cycle that avoids the
  victims still giving way (those were reported already and are being resolved);
- every reported cycle is real in the model, and its victim is one of its agents;
- afterwards every cycle left in the model goes through a victim (nothing is missed);
- the monitor's own graph equals the model.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
from hypothesis import event, given, settings
from hypothesis import strategies as st

from lockyard.core.deadlock_info import DeadlockInfo
from lockyard.core.events import LockEvent, LockEventType
from lockyard.domain.monitor import DeadlockMonitor


def has_cycle(holds: dict[str, str], waits: set[tuple[str, str]], skip: set[str]) -> bool:
    """Brute force: does any agent outside `skip` reach itself along wait-for edges?"""
    succ: dict[str, set[str]] = {}
    for agent, lock in waits:
        holder = holds.get(lock)
        if holder is not None and holder != agent and not {agent, holder} & skip:
            succ.setdefault(agent, set()).add(holder)
    for start in succ:
        seen: set[str] = set()
        todo = list(succ[start])
        while todo:
            node = todo.pop()
            if node == start:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(succ.get(node, ()))
    return False


AGENTS = ["a", "b", "c", "d", "e"]
LOCKS = ["f1", "f2", "f3", "f4", "f5", "f6"]
# Weighted towards holds and waits, so cycles form often (and get resolved, and form again).
KINDS: list[LockEventType | str] = [
    LockEventType.ACQUIRED,
    LockEventType.ACQUIRED,
    LockEventType.WAITING,
    LockEventType.WAITING,
    LockEventType.WAITING,
    LockEventType.WAITING,
    LockEventType.WAIT_ENDED,
    LockEventType.RELEASED,
    "unregister",
]
step = st.tuples(st.sampled_from(KINDS), st.sampled_from(AGENTS), st.sampled_from(LOCKS))


@st.composite
def sequences(draw: st.DrawFn) -> list[tuple[LockEventType | str, str, str]]:
    """Most locks held first (so waits make edges), then anything at all."""
    owners = draw(st.lists(st.sampled_from(AGENTS), min_size=len(LOCKS), max_size=len(LOCKS)))
    start = [
        (LockEventType.ACQUIRED, owner, lock)
        for lock, owner in zip(LOCKS, owners, strict=True)
        if draw(st.integers(0, 4))  # leave about one lock in five free
    ]
    return start + draw(st.lists(step, min_size=20, max_size=80))


class Model:
    def __init__(self) -> None:
        self.holds: dict[str, str] = {}
        self.waits: set[tuple[str, str]] = set()

    def apply(self, kind: LockEventType | str, agent: str, lock: str) -> None:
        if kind == LockEventType.WAITING:
            self.waits.add((agent, lock))
        elif kind == LockEventType.WAIT_ENDED:
            self.waits.discard((agent, lock))
        elif kind == LockEventType.ACQUIRED:
            self.waits.discard((agent, lock))
            self.holds[lock] = agent
        elif kind == LockEventType.RELEASED:
            if self.holds.get(lock) == agent:
                del self.holds[lock]
        else:
            self.holds = {k: v for k, v in self.holds.items() if v != agent}
            self.waits = {(a, k) for a, k in self.waits if a != agent}

    def waits_on_something(self, agent: str) -> bool:
        return any(a == agent for a, _ in self.waits)

    def is_real(self, info: DeadlockInfo) -> bool:
        return all(
            (s.agent_id, s.lock_path) in self.waits
            and self.holds.get(s.lock_path) == s.held_by
            and s.held_by != s.agent_id
            for s in info.cycle
        ) and all(
            s.held_by == info.cycle[(i + 1) % len(info.cycle)].agent_id
            for i, s in enumerate(info.cycle)
        )


async def run_sequence(
    steps: list[tuple[LockEventType | str, str, str]], registered: set[str]
) -> None:
    reports: list[DeadlockInfo] = []
    monitor = DeadlockMonitor(on_deadlock=reports.append)
    for index, agent in enumerate(sorted(registered)):
        monitor.register_agent(agent, start_time=float(index))
    model = Model()
    giving_way: set[str] = set()  # the model's victims: reported, still waiting
    for kind, agent, lock in steps:
        model.apply(kind, agent, lock)
        # A mark stands while its victim still waits (unregistering ends every wait).
        giving_way = {a for a in giving_way if model.waits_on_something(a)}
        before = len(reports)
        if isinstance(kind, LockEventType):
            returned = await monitor.handle_event(
                LockEvent(event_type=kind, agent_id=agent, lock_path=lock)
            )
        else:
            monitor.unregister_agent(agent)
            returned = None
        new = reports[before:]
        if new:
            event(f"reported {len(new)} on one event")
            event(f"cycle of {len(new[0].cycle)}")
        assert returned == (new[0] if new else None)
        assert bool(new) == has_cycle(model.holds, model.waits, giving_way)
        for info in new:
            assert model.is_real(info)
            assert info.victim in info.agents
            assert info.victim not in giving_way
        giving_way |= {info.victim for info in new}
        assert {a for a in AGENTS if monitor.victim_mark(a) is not None} == giving_way
        assert not has_cycle(model.holds, model.waits, giving_way), "a cycle went unreported"
        snap = monitor.snapshot()
        assert dict(snap.holds) == model.holds
        assert set(snap.waits) == model.waits


@settings(max_examples=400, deadline=None)
@given(steps=sequences(), registered=st.sets(st.sampled_from(AGENTS)))
def test_monitor_reports_exactly_the_cycles_a_brute_force_search_finds(
    steps: list[tuple[LockEventType | str, str, str]], registered: set[str]
) -> None:
    anyio.run(run_sequence, steps, registered)


async def run_with_a_disagreeing_store(
    steps: list[tuple[LockEventType | str, str, str]], refused: set[tuple[str, str]]
) -> None:
    """The store denies some wait edges: nothing unconfirmed is reported, nothing breaks."""
    reports: list[DeadlockInfo] = []
    asked: list[DeadlockInfo] = []

    def confirmed(info: DeadlockInfo) -> bool:
        return not refused & {(s.agent_id, s.lock_path) for s in info.cycle}

    def verify(info: DeadlockInfo) -> bool:
        asked.append(info)
        return confirmed(info)

    monitor = DeadlockMonitor(on_deadlock=reports.append, verify_cycle=verify)
    model = Model()
    for kind, agent, lock in steps:
        model.apply(kind, agent, lock)
        before = len(reports)
        if isinstance(kind, LockEventType):
            await monitor.handle_event(LockEvent(event_type=kind, agent_id=agent, lock_path=lock))
        else:
            monitor.unregister_agent(agent)
        for info in reports[before:]:
            assert model.is_real(info)
            assert confirmed(info)
        assert {a for a in AGENTS if monitor.victim_mark(a) is not None} <= {
            a for a in AGENTS if model.waits_on_something(a)
        }
        snap = monitor.snapshot()
        assert dict(snap.holds) == model.holds
        assert set(snap.waits) == model.waits
    event(f"store refused {len(asked) - len(reports)} cycles")
    # check_all finds what is left: every cycle of confirmed edges, except those through an
    # edge it set aside (the victim's edge of each refused cycle: which edge of a refused
    # cycle is stale is unknown).
    asked.clear()
    await monitor.check_all()
    set_aside = {(info.victim, info.victim_waits_on) for info in asked if not confirmed(info)}
    victims = {a for a in AGENTS if monitor.victim_mark(a) is not None}
    assert not has_cycle(model.holds, model.waits - refused - set_aside, victims)


@settings(max_examples=200, deadline=None)
@given(
    steps=sequences(),
    refused=st.sets(st.tuples(st.sampled_from(AGENTS), st.sampled_from(LOCKS)), max_size=3),
)
def test_cycles_the_store_refuses_are_never_reported_and_the_rest_are(
    steps: list[tuple[LockEventType | str, str, str]], refused: set[tuple[str, str]]
) -> None:
    anyio.run(run_with_a_disagreeing_store, steps, refused)


async def run_concurrently(
    tasks: list[list[tuple[LockEventType | str, str, str, int]]], verify_pauses: list[int]
) -> None:
    """Several tasks feed events at once; verify_cycle yields to them mid-report."""
    applied: list[tuple[LockEventType | str, str, str]] = []  # in the order the monitor saw
    calls = 0

    async def verify(info: DeadlockInfo) -> bool:
        nonlocal calls
        calls += 1
        for _ in range(verify_pauses[calls % len(verify_pauses)]):
            await anyio.lowlevel.checkpoint()
        return True

    def on_deadlock(info: DeadlockInfo) -> None:
        event("reported while tasks ran")
        # No one else in the cycle is giving way already: that cycle was being resolved.
        assert all(monitor.victim_mark(s.agent_id) is None for s in info.cycle[1:])
        snap = monitor.snapshot()  # at report time the cycle stands, whole
        for s in info.cycle:
            assert (s.agent_id, s.lock_path) in snap.waits
            assert snap.holds[s.lock_path] == s.held_by

    monitor = DeadlockMonitor(on_deadlock=on_deadlock, verify_cycle=verify)

    async def feed(steps: list[tuple[LockEventType | str, str, str, int]]) -> None:
        for kind, agent, lock, pauses in steps:
            for _ in range(pauses):
                await anyio.lowlevel.checkpoint()
            applied.append((kind, agent, lock))  # handle_event applies before it first yields
            if isinstance(kind, LockEventType):
                await monitor.handle_event(
                    LockEvent(event_type=kind, agent_id=agent, lock_path=lock)
                )
            else:
                monitor.unregister_agent(agent)

    async with anyio.create_task_group() as group:
        for steps in tasks:
            group.start_soon(feed, steps)

    model = Model()
    for kind, agent, lock in applied:
        model.apply(kind, agent, lock)
    snap = monitor.snapshot()
    assert dict(snap.holds) == model.holds
    assert set(snap.waits) == model.waits
    victims = {a for a in AGENTS if monitor.victim_mark(a) is not None}
    assert all(model.waits_on_something(v) for v in victims)
    assert not has_cycle(model.holds, model.waits, victims), "a cycle went unreported"


concurrent_step = st.tuples(
    st.sampled_from(KINDS), st.sampled_from(AGENTS), st.sampled_from(LOCKS), st.integers(0, 2)
)


@settings(max_examples=200, deadline=None)
@given(
    tasks=st.lists(st.lists(concurrent_step, min_size=5, max_size=25), min_size=2, max_size=4),
    verify_pauses=st.lists(st.integers(0, 3), min_size=1, max_size=5),
)
def test_many_tasks_at_once_never_miss_or_invent_a_deadlock(
    tasks: list[list[tuple[LockEventType | str, str, str, int]]], verify_pauses: list[int]
) -> None:
    anyio.run(run_concurrently, tasks, verify_pauses)
