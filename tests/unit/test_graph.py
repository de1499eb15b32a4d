"""WaitForGraph: its bookkeeping, its cycle searches, and a brute-force reference."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from lockyard.core.deadlock_info import CycleStep
from lockyard.domain.graph import Cycle, WaitForGraph

# ---- a brute-force reference -----------------------------------------------------------


def edges(
    holds: Mapping[str, str],
    waits: Collection[tuple[str, str]],
    skip: Collection[str] = (),
    skip_edges: Collection[tuple[str, str]] = (),
) -> dict[str, set[str]]:
    """Agent -> agents it waits for (self-waits, skipped agents and skipped edges left out)."""
    graph: dict[str, set[str]] = {}
    for agent, lock in waits:
        holder = holds.get(lock)
        if holder is None or holder == agent or agent in skip or holder in skip:
            continue
        if (agent, lock) in skip_edges:
            continue
        graph.setdefault(agent, set()).add(holder)
    return graph


def reachable(graph: Mapping[str, set[str]], start: str) -> set[str]:
    """Agents reachable from `start` by one or more edges."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def has_cycle(
    holds: Mapping[str, str],
    waits: Collection[tuple[str, str]],
    skip: Collection[str] = (),
    skip_edges: Collection[tuple[str, str]] = (),
) -> bool:
    graph = edges(holds, waits, skip, skip_edges)
    return any(agent in reachable(graph, agent) for agent in graph)


def has_cycle_through(
    holds: Mapping[str, str],
    waits: Collection[tuple[str, str]],
    lock: str,
    skip: Collection[str],
    skip_edges: Collection[tuple[str, str]],
) -> bool:
    holder = holds.get(lock)
    if holder is None or holder in skip:
        return False
    graph = edges(holds, waits, skip, skip_edges)
    waiters = {
        a
        for a, waited in waits
        if waited == lock and a != holder and a not in skip and (a, lock) not in skip_edges
    }
    return bool(waiters & reachable(graph, holder))


def assert_real_cycle(graph: WaitForGraph, cycle: Cycle) -> None:
    assert cycle
    for i, step in enumerate(cycle):
        assert graph.has_step(step), step
        assert step.held_by == cycle[(i + 1) % len(cycle)].agent_id
    agents = [step.agent_id for step in cycle]
    assert len(set(agents)) == len(agents), "a cycle visits each agent once"


# ---- examples ----------------------------------------------------------------------------


def test_holds_and_waits_are_kept_per_agent_and_lock() -> None:
    graph = WaitForGraph()
    assert graph.set_holder("f1", "A") is None
    assert graph.set_holder("f1", "A") == "A"
    assert graph.add_wait("A", "f2")
    assert graph.add_wait("A", "f3")
    assert not graph.add_wait("A", "f3")
    assert graph.add_wait("B", "f3")
    assert graph.held_by("A") == ("f1",)
    assert graph.waits_of("A") == ("f2", "f3")
    assert graph.waiters_of("f3") == ("A", "B")
    assert graph.agents() == ("A", "B")
    assert graph.remove_wait("A", "f3")
    assert not graph.remove_wait("A", "f3")
    assert not graph.remove_wait("nobody", "f3")
    assert graph.waiters_of("f3") == ("B",)
    assert graph.set_holder("f1", "B") == "A"  # handed over: A's hold is gone
    assert graph.held_by("A") == ()
    assert graph.clear_holder("f1") == "B"
    assert graph.clear_holder("f1") is None
    graph.remove_agent("A")
    graph.remove_agent("B")
    assert graph.snapshot().holds == {}
    assert graph.snapshot().waits == ()
    assert graph.agents() == ()


def test_a_snapshot_from_json_with_lists_for_pairs_is_accepted() -> None:
    waits: list[list[str]] = [["A", "f2"], ["B", "f1"]]
    graph = WaitForGraph.from_snapshot({"f1": "A", "f2": "B"}, waits)  # type: ignore[arg-type]
    assert graph.snapshot().waits == (("A", "f2"), ("B", "f1"))
    assert graph.find_cycle() is not None


def test_two_cycle_through_either_lock() -> None:
    graph = WaitForGraph.from_snapshot({"f1": "A", "f2": "B"}, [("A", "f2"), ("B", "f1")])
    for lock in ("f1", "f2"):
        cycle = graph.cycle_through(lock)
        assert cycle is not None
        assert_real_cycle(graph, cycle)
        assert cycle[0].lock_path == lock  # starts with the edge onto the changed lock
    assert graph.cycle_through("f1", skip={"A"}) is None
    assert graph.cycle_through("unknown") is None


def test_the_shortest_cycle_through_the_lock_is_returned() -> None:
    # A -> B -> A (via f2, f1) and A -> C -> D -> A (via g1, g2, f1).
    graph = WaitForGraph.from_snapshot(
        {"f1": "A", "f2": "B", "g1": "C", "g2": "D"},
        [("A", "g1"), ("C", "g2"), ("D", "f1"), ("A", "f2"), ("B", "f1")],
    )
    cycle = graph.cycle_through("f1")
    assert cycle is not None
    assert [s.agent_id for s in cycle] == ["B", "A"]
    longer = graph.cycle_through("f1", skip={"B"})
    assert longer is not None
    assert [s.agent_id for s in longer] == ["D", "A", "C"]


def test_self_waits_and_waits_on_free_locks_are_no_edges() -> None:
    graph = WaitForGraph.from_snapshot({"f1": "A"}, [("A", "f1"), ("B", "free")])
    assert graph.cycle_through("f1") is None
    assert graph.find_cycle() is None
    assert graph.cycles() == []
    assert not graph.has_step(CycleStep(agent_id="A", lock_path="f1", held_by="A"))


def test_find_cycle_sees_a_cycle_behind_a_finished_branch() -> None:
    # Z's branch is explored first and is a dead end; the cycle is among X and Y.
    graph = WaitForGraph.from_snapshot(
        {"z": "Z", "x": "X", "y": "Y", "d": "D"},
        [("Z", "d"), ("X", "z"), ("X", "y"), ("Y", "x")],
    )
    cycle = graph.find_cycle()
    assert cycle is not None
    assert {s.agent_id for s in cycle} == {"X", "Y"}
    assert graph.find_cycle(skip={"Y"}) is None


def test_cycles_lists_each_deadlocked_group_once() -> None:
    graph = WaitForGraph.from_snapshot(
        {"f1": "A", "f2": "B", "g1": "C", "g2": "D", "h": "E"},
        [("A", "f2"), ("B", "f1"), ("C", "g2"), ("D", "g1"), ("E", "f1")],
    )
    found = graph.cycles()
    assert [{s.agent_id for s in c} for c in found] == [{"A", "B"}, {"C", "D"}]


@pytest.mark.parametrize(
    ("holds", "waits", "complaint"),
    [
        ({"": "A"}, [], "lock key"),
        ({"f": " "}, [], "holder"),
        ({"f": "A"}, [("A", "f", "x")], "pair"),
        ({"f": "A"}, [("A\x00", "f")], "agent id"),
        ({"f": "A"}, [("A", 3)], "lock key"),
    ],
)
def test_a_malformed_snapshot_is_rejected_with_a_clear_error(
    holds: dict[str, str], waits: list[tuple[str, str]], complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        WaitForGraph.from_snapshot(holds, waits)


# ---- properties against the reference ----------------------------------------------------

AGENTS = ["a", "b", "c", "d"]
LOCKS = ["f1", "f2", "f3", "f4", "f5"]
# Weighted towards holds and waits, so that cycles form in most examples.
KINDS = ["hold", "hold", "wait", "wait", "wait", "free", "unwait", "forget"]
operation = st.tuples(st.sampled_from(KINDS), st.sampled_from(LOCKS), st.sampled_from(AGENTS))


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(operation, min_size=20, max_size=60),
    skip=st.sets(st.sampled_from(AGENTS), max_size=1),
    skip_edges=st.sets(st.tuples(st.sampled_from(AGENTS), st.sampled_from(LOCKS)), max_size=3),
)
def test_graph_searches_agree_with_brute_force(
    ops: list[tuple[str, str, str]], skip: set[str], skip_edges: set[tuple[str, str]]
) -> None:
    graph = WaitForGraph()
    holds: dict[str, str] = {}
    waits: set[tuple[str, str]] = set()
    for kind, lock, agent in ops:
        if kind == "hold":
            graph.set_holder(lock, agent)
            holds[lock] = agent
        elif kind == "free":
            graph.clear_holder(lock)
            holds.pop(lock, None)
        elif kind == "wait":
            graph.add_wait(agent, lock)
            waits.add((agent, lock))
        elif kind == "unwait":
            graph.remove_wait(agent, lock)
            waits.discard((agent, lock))
        else:
            graph.remove_agent(agent)
            holds = {k: v for k, v in holds.items() if v != agent}
            waits = {(a, k) for a, k in waits if a != agent}

        snap = graph.snapshot()
        assert dict(snap.holds) == holds
        assert set(snap.waits) == waits
        for lock_key in LOCKS:
            through = graph.cycle_through(lock_key, skip, skip_edges)
            assert (through is not None) == has_cycle_through(
                holds, waits, lock_key, skip, skip_edges
            )
            if through is not None:
                assert_real_cycle(graph, through)
                assert through[0].lock_path == lock_key
                assert not skip & {s.agent_id for s in through}
                assert not skip_edges & {(s.agent_id, s.lock_path) for s in through}
        anywhere = graph.find_cycle(skip, skip_edges)
        assert (anywhere is not None) == has_cycle(holds, waits, skip, skip_edges)
        if anywhere is not None:
            assert_real_cycle(graph, anywhere)
            assert not skip & {s.agent_id for s in anywhere}
            assert not skip_edges & {(s.agent_id, s.lock_path) for s in anywhere}
        listed = graph.cycles()
        if listed:
            event(f"reached {len(listed)} disjoint cycles")
            event(f"reached a cycle of {max(len(c) for c in listed)}")
        members: set[str] = set()
        for cycle in listed:
            assert_real_cycle(graph, cycle)
            agents = {s.agent_id for s in cycle}
            assert not agents & members, "listed cycles are disjoint"
            members |= agents
        assert not has_cycle(holds, waits, members), "every cycle meets a listed one"
