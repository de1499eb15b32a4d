"""The default victim policy ages: each time an agent gave way makes it costlier to choose
again, so no agent is made to give way again and again while the others are spared.

Through the monitor (real events, cycles closing and breaking as agents give way) and on the
policy alone (hypothesis: minimal cost, monotone in the count, and bounded repeat victims
over long runs of random cycles).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockyard.core.deadlock_info import CycleStep, DeadlockInfo
from lockyard.core.events import LockEvent, LockEventType
from lockyard.domain.graph import Cycle
from lockyard.domain.monitor import DeadlockMonitor
from lockyard.domain.victim import AgentInfo, cheapest_then_youngest, explain_choice, victim_cost

ACQUIRED, WAITING, WAIT_ENDED, RELEASED = (
    LockEventType.ACQUIRED,
    LockEventType.WAITING,
    LockEventType.WAIT_ENDED,
    LockEventType.RELEASED,
)
MAX_LOCKS = 3
"""Locks an agent holds at most in the random runs: the bound's L."""


def ev(kind: LockEventType, agent: str, lock: str) -> LockEvent:
    return LockEvent(event_type=kind, agent_id=agent, lock_path=lock)


async def ring_round(
    monitor: DeadlockMonitor, members: list[str], extra: Mapping[str, int], tag: str
) -> DeadlockInfo:
    """Member i holds its own file (and `extra[i]` more), then waits for member i+1's: one
    cycle. The victim gives way (its locks released, its wait ended), the others proceed and
    release everything. Returns the deadlock."""
    found: list[DeadlockInfo] = []
    for member in members:
        await monitor.handle_event(ev(ACQUIRED, member, f"{tag}/{member}"))
        for index in range(extra.get(member, 0)):
            await monitor.handle_event(ev(ACQUIRED, member, f"{tag}/{member}/x{index}"))
    for index, member in enumerate(members):
        wanted = f"{tag}/{members[(index + 1) % len(members)]}"
        info = await monitor.handle_event(ev(WAITING, member, wanted))
        if info is not None:
            found.append(info)
    assert len(found) == 1, found
    (info,) = found
    held = {
        member: [f"{tag}/{member}", *(f"{tag}/{member}/x{i}" for i in range(extra.get(member, 0)))]
        for member in members
    }
    victim = info.victim
    await monitor.handle_event(ev(WAIT_ENDED, victim, info.victim_waits_on))
    for lock in held[victim]:
        await monitor.handle_event(ev(RELEASED, victim, lock))
    for member in members:  # the others get what they waited for, in turn, and finish
        if member == victim:
            continue
        index = members.index(member)
        wanted = f"{tag}/{members[(index + 1) % len(members)]}"
        await monitor.handle_event(ev(WAIT_ENDED, member, wanted))
        for lock in held[member]:
            await monitor.handle_event(ev(RELEASED, member, lock))
    assert not monitor.snapshot().holds
    return info


@pytest.mark.anyio
async def test_two_agents_that_deadlock_again_and_again_take_turns_giving_way() -> None:
    monitor = DeadlockMonitor()
    monitor.register_agent("old", start_time=100.0)
    monitor.register_agent("young", start_time=200.0)
    victims = [
        (await ring_round(monitor, ["old", "young"], {}, f"round{n}")).victim for n in range(6)
    ]
    # Equal locks: the young one first (as before), and then each in turn, never one always.
    assert victims == ["young", "old", "young", "old", "young", "old"]
    assert monitor.times_given_way("old") == monitor.times_given_way("young") == 3


@pytest.mark.anyio
async def test_the_report_says_why_that_victim_with_each_agents_figures() -> None:
    monitor = DeadlockMonitor()
    for name, start in (("a", 1.0), ("b", 2.0), ("c", 3.0)):
        monitor.register_agent(name, start_time=start)
    await ring_round(monitor, ["a", "b"], {}, "warmup")  # b (younger) gives way once
    info = await ring_round(monitor, ["a", "b", "c"], {"a": 1}, "ring")
    # a: 2 locks, 0 times -> 3; b: 1 lock, once -> 4; c: 1 lock, 0 times -> 2
    assert info.victim == "c"
    assert info.victim_reason == (
        "c gives way: the lowest cost. Cost = (locks held + 1) x 2^(times given way before): "
        "c 2 (1 lock, gave way 0 times), a 3 (2 locks, gave way 0 times), "
        "b 4 (1 lock, gave way once)"
    )
    assert monitor.snapshot().to_dict()["agents"][1]["times_given_way"] == 1


@pytest.mark.anyio
async def test_a_custom_policy_is_named_as_the_reason() -> None:
    def oldest(cycle: Cycle, agents: Mapping[str, AgentInfo]) -> str:
        return min(agents, key=lambda a: agents[a].start_time or 0.0)

    monitor = DeadlockMonitor(victim_policy=oldest)
    monitor.register_agent("a", start_time=1.0)
    monitor.register_agent("b", start_time=2.0)
    info = await ring_round(monitor, ["a", "b"], {}, "r")
    assert info.victim == "a"
    assert info.victim_reason == "a gives way: chosen by the victim policy oldest"


def test_ties_are_explained_by_age_then_by_id() -> None:
    cycle = ring(["a", "b"])
    same_start = {n: info(n, locks=1, start=5.0) for n in ("a", "b")}
    assert "tied with b; its id sorts first" in explain_choice(cycle, same_start, "a")
    aged = {"a": info("a", locks=1, start=1.0), "b": info("b", locks=1, start=2.0)}
    assert "tied with a; it started last" in explain_choice(cycle, aged, "b")
    stranger = {"a": info("a", locks=1, start=1.0), "b": info("b", locks=1, start=None)}
    assert "it is unregistered" in explain_choice(cycle, stranger, "b")
    kept = {"a": info("a", locks=0, won=True), "b": info("b", locks=3)}
    assert explain_choice(ring(["a", "b"]), kept, "b").startswith(
        "b gives way: a keeps its turn (another agent gave way to it in this wait); "
        "then the lowest cost."
    )


@pytest.mark.anyio
async def test_an_agent_forgotten_for_holding_nothing_keeps_its_count() -> None:
    """`lockyard monitor` unregisters agents that hold no lock: a victim just released
    everything, and must not come back as new."""
    monitor = DeadlockMonitor()
    await ring_round(monitor, ["a", "b"], {}, "r1")
    monitor.unregister_agent("a")
    monitor.unregister_agent("b")
    assert monitor.times_given_way("a") + monitor.times_given_way("b") == 1


# -- the policy alone ------------------------------------------------------------------------


def info(
    name: str, *, locks: int, given: int = 0, start: float | None = 0.0, won: bool = False
) -> AgentInfo:
    return AgentInfo(
        agent_id=name,
        registered=start is not None,
        issue_id=None,
        start_time=start,
        locks_held=locks,
        waits=1,
        times_given_way=given,
        won_this_wait=won,
    )


def ring(names: list[str]) -> Cycle:
    return tuple(
        CycleStep(agent_id=a, lock_path=f"l{i}", held_by=names[(i + 1) % len(names)])
        for i, a in enumerate(names)
    )


agent_figures = st.tuples(
    st.integers(0, MAX_LOCKS), st.integers(0, 12), st.none() | st.floats(0, 10)
)


@settings(max_examples=300, deadline=None)
@given(
    figures=st.lists(agent_figures, min_size=2, max_size=6),
    won=st.lists(st.booleans(), min_size=6, max_size=6),
    turn=st.integers(0, 5),
)
def test_the_victim_keeps_no_turn_and_costs_least_wherever_the_cycle_starts(
    figures: list[tuple[int, int, float | None]], won: list[bool], turn: int
) -> None:
    names = [f"agent{i}" for i in range(len(figures))]
    agents = {
        n: info(n, locks=locks, given=given, start=start, won=won[i])
        for i, (n, (locks, given, start)) in enumerate(zip(names, figures, strict=True))
    }
    cycle = ring(names)
    victim = cheapest_then_youngest(cycle, agents)
    turn %= len(cycle)
    assert victim == cheapest_then_youngest(cycle[turn:] + cycle[:turn], agents)
    if not all(a.won_this_wait for a in agents.values()):
        assert not agents[victim].won_this_wait, "an agent keeping its turn was chosen"
    peers = [a for a in agents.values() if a.won_this_wait == agents[victim].won_this_wait]
    assert victim_cost(agents[victim]) == min(victim_cost(a) for a in peers)
    reason = explain_choice(cycle, agents, victim)
    assert reason.startswith(f"{victim} gives way: ")
    assert "the lowest cost" in reason
    assert all(name in reason for name in names)


@settings(max_examples=300, deadline=None)
@given(
    figures=st.lists(agent_figures, min_size=2, max_size=6),
    who=st.integers(0, 5),
    more=st.integers(1, 5),
)
def test_giving_way_more_often_never_makes_an_agent_the_victim(
    figures: list[tuple[int, int, float | None]], who: int, more: int
) -> None:
    names = [f"agent{i}" for i in range(len(figures))]
    agents = {
        n: info(n, locks=locks, given=given, start=start)
        for n, (locks, given, start) in zip(names, figures, strict=True)
    }
    cycle = ring(names)
    before = cheapest_then_youngest(cycle, agents)
    aged = names[who % len(names)]
    older = dict(agents)
    older[aged] = info(
        aged,
        locks=agents[aged].locks_held,
        given=agents[aged].times_given_way + more,
        start=agents[aged].start_time,
    )
    after = cheapest_then_youngest(cycle, older)
    if aged != before:
        assert after == before, "an agent that gave way once more was not chosen instead"
    else:
        assert after == before or after != aged


@settings(max_examples=200, deadline=None)
@given(
    agents=st.integers(2, 8),
    rounds=st.lists(
        st.tuples(
            st.lists(st.integers(0, 7), min_size=2, max_size=5, unique=True),
            st.lists(st.integers(0, MAX_LOCKS), min_size=5, max_size=5),
        ),
        min_size=1,
        max_size=200,
    ),
)
def test_in_a_long_run_of_random_cycles_no_agent_is_chosen_far_more_than_its_peers(
    agents: int, rounds: list[tuple[list[int], list[int]]]
) -> None:
    """Each choice: the victim had given way at most log2(L + 1) times more than any other
    agent of its cycle (L: the most locks one holds). With a fixed group, the counts of the
    most and the least chosen agent stay within that bound + 1, however long the run."""
    names = [f"agent{i}" for i in range(agents)]
    starts = {n: float(i) for i, n in enumerate(names)}
    given: Counter[str] = Counter()
    slack = math.floor(math.log2(MAX_LOCKS + 1))
    for members, locks in rounds:
        group = sorted({names[m % agents] for m in members})
        if len(group) < 2:
            continue
        figures = {
            n: info(n, locks=locks[i], given=given[n], start=starts[n]) for i, n in enumerate(group)
        }
        victim = cheapest_then_youngest(ring(group), figures)
        others = [given[n] for n in group if n != victim]
        assert given[victim] <= min(others) + slack, (victim, dict(given))
        given[victim] += 1
    fixed: Counter[str] = Counter()
    for _members, locks in rounds:  # the same rounds, always the whole group
        figures = {
            n: info(n, locks=locks[i % len(locks)], given=fixed[n], start=starts[n])
            for i, n in enumerate(names)
        }
        fixed[cheapest_then_youngest(ring(names), figures)] += 1
    counts = [fixed[n] for n in names]
    assert max(counts) - min(counts) <= slack + 1, dict(fixed)


@settings(max_examples=40, deadline=None)
@given(
    rounds=st.lists(
        st.tuples(
            st.lists(st.integers(0, 5), min_size=2, max_size=4, unique=True),
            st.lists(st.integers(0, 2), min_size=4, max_size=4),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_through_the_monitor_repeat_victims_stay_bounded(
    rounds: list[tuple[list[int], list[int]]],
) -> None:
    """The same bound with the monitor keeping the counts, on real cycles of events."""
    names = [f"agent{i}" for i in range(6)]
    slack = math.floor(math.log2(2 + 1 + 1))  # one own file + up to 2 more

    async def run() -> None:
        monitor = DeadlockMonitor()
        for i, name in enumerate(names):
            monitor.register_agent(name, start_time=float(i))
        for number, (members, extra) in enumerate(rounds):
            group = [names[m] for m in members]
            before = {n: monitor.times_given_way(n) for n in group}
            found = await ring_round(
                monitor, group, {n: extra[i] for i, n in enumerate(group)}, f"r{number}"
            )
            others = [before[n] for n in group if n != found.victim]
            assert before[found.victim] <= min(others) + slack
            assert monitor.times_given_way(found.victim) == before[found.victim] + 1

    anyio.run(run)


@pytest.mark.anyio
async def test_a_chain_of_deadlocks_over_two_files_ends_with_its_first_winner_served() -> None:
    """Two hot files, every agent holding one and waiting for both: each victim's file goes
    to the next waiter in line, who holds the other file, so a new cycle closes at once.
    The agent another gave way to keeps its turn until its wait ends, so the chain ends
    when the file reaches it, whatever the ages and counts of those queued before it."""
    monitor = DeadlockMonitor()
    for name, start in (("n1", 1.0), ("n2", 2.0), ("s", 3.0), ("v", 4.0)):
        monitor.register_agent(name, start_time=start)
    await monitor.handle_event(ev(ACQUIRED, "s", "m"))
    await monitor.handle_event(ev(ACQUIRED, "v", "v"))
    for early in ("n1", "n2"):  # queued for both files before s and v asked
        await monitor.handle_event(ev(WAITING, early, "v"))
        await monitor.handle_event(ev(WAITING, early, "m"))
    await monitor.handle_event(ev(WAITING, "s", "v"))
    first = await monitor.handle_event(ev(WAITING, "v", "m"))
    assert first is not None
    assert first.victim == "v"  # the youngest, as ever: s won
    victims = [first.victim]
    line = ["n1", "n2", "s"]  # the queue of file v after the victim's release
    giver = "v"
    while True:
        await monitor.handle_event(ev(WAIT_ENDED, giver, "m"))
        await monitor.handle_event(ev(RELEASED, giver, "v"))
        taker = line.pop(0)
        found = await monitor.handle_event(ev(ACQUIRED, taker, "v"))
        if taker == "s":
            assert found is None
            break
        assert found is not None, "the taker holds v and waits for m, held by s: a cycle"
        victims.append(found.victim)
        giver = found.victim
        assert giver == taker, f"s keeps its turn; {found.victim_reason}"
        await monitor.handle_event(ev(WAIT_ENDED, taker, "m"))
    assert victims == ["v", "n1", "n2"]
    assert monitor.snapshot().holds == {"m": "s", "v": "s"}
