"""DeadlockMonitor: deadlocks through any of several blocked files, no false deadlock from
an ended wait, and the rules of the monitor."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockyard.core.deadlock_info import CycleStep, DeadlockInfo
from lockyard.core.events import LockEvent, LockEventType
from lockyard.core.ports import VictimNotices
from lockyard.domain.graph import Cycle
from lockyard.domain.monitor import DeadlockMonitor
from lockyard.domain.victim import AgentInfo, cheapest_then_youngest, victim_cost

ACQUIRED = LockEventType.ACQUIRED
WAITING = LockEventType.WAITING
WAIT_ENDED = LockEventType.WAIT_ENDED
RELEASED = LockEventType.RELEASED


def ev(kind: LockEventType, agent: str, lock: str) -> LockEvent:
    return LockEvent(event_type=kind, agent_id=agent, lock_path=lock)


async def feed(monitor: DeadlockMonitor, *events: LockEvent) -> list[DeadlockInfo]:
    found = []
    for event in events:
        info = await monitor.handle_event(event)
        if info is not None:
            found.append(info)
    return found


def assert_real(monitor: DeadlockMonitor, info: DeadlockInfo) -> None:
    """Every step is an edge of the monitor's graph and the steps chain into a loop."""
    snap = monitor.snapshot()
    for i, step in enumerate(info.cycle):
        assert (step.agent_id, step.lock_path) in snap.waits
        assert snap.holds[step.lock_path] == step.held_by
        assert step.held_by == info.cycle[(i + 1) % len(info.cycle)].agent_id
    assert info.cycle[0].agent_id == info.victim
    assert info.victim_waits_on == info.cycle[0].lock_path
    assert info.victim_waits_on_holder == info.cycle[0].held_by


@pytest.mark.anyio
async def test_a_deadlock_through_one_of_several_blocked_files_is_found() -> None:
    # A holds f1 and waits on f2 AND f3; B holds f3 and waits on f1.
    reports: list[DeadlockInfo] = []
    monitor = DeadlockMonitor(on_deadlock=reports.append)
    found = await feed(
        monitor,
        ev(ACQUIRED, "A", "f1"),
        ev(ACQUIRED, "C", "f2"),
        ev(ACQUIRED, "B", "f3"),
        ev(WAITING, "A", "f2"),
        ev(WAITING, "A", "f3"),
        ev(WAITING, "B", "f1"),
    )
    assert len(found) == 1
    assert reports == found
    info = found[0]
    assert set(info.agents) == {"A", "B"}
    assert {(s.agent_id, s.lock_path, s.held_by) for s in info.cycle} == {
        ("A", "f3", "B"),
        ("B", "f1", "A"),
    }
    assert_real(monitor, info)


@pytest.mark.anyio
async def test_a_wait_that_ended_without_a_grant_does_not_count() -> None:
    monitor = DeadlockMonitor()
    found = await feed(
        monitor,
        ev(ACQUIRED, "A", "f1"),
        ev(ACQUIRED, "B", "f2"),
        ev(WAITING, "A", "f2"),
        ev(WAIT_ENDED, "A", "f2"),  # A's call timed out
        ev(WAITING, "B", "f1"),
    )
    assert found == []
    assert monitor.find_cycles() == []


@pytest.mark.anyio
@pytest.mark.parametrize("length", [2, 3, 7, 200])
async def test_cycles_of_any_length_are_reported_whole(length: int) -> None:
    monitor = DeadlockMonitor()
    agents = [f"a{i:03d}" for i in range(length)]
    for i, agent in enumerate(agents):
        await monitor.handle_event(ev(ACQUIRED, agent, f"f{i}"))
    found = await feed(
        monitor, *(ev(WAITING, agent, f"f{(i + 1) % length}") for i, agent in enumerate(agents))
    )
    assert len(found) == 1
    info = found[0]
    assert len(info.cycle) == length
    assert sorted(info.agents) == agents
    assert_real(monitor, info)


@pytest.mark.anyio
async def test_acquiring_a_lock_while_still_waiting_on_others_can_close_a_cycle() -> None:
    # B waits on f1 before anyone holds it; A already waits on f2 (held by B). A gets f1.
    monitor = DeadlockMonitor()
    found = await feed(
        monitor,
        ev(ACQUIRED, "B", "f2"),
        ev(WAITING, "B", "f1"),
        ev(WAITING, "A", "f2"),
        ev(ACQUIRED, "A", "f1"),
    )
    assert len(found) == 1
    assert set(found[0].agents) == {"A", "B"}
    assert_real(monitor, found[0])


@pytest.mark.anyio
async def test_a_self_wait_is_not_a_deadlock() -> None:
    monitor = DeadlockMonitor()
    assert await feed(monitor, ev(ACQUIRED, "A", "f1"), ev(WAITING, "A", "f1")) == []
    assert monitor.find_cycles() == []
    # The recorded wait still matters once the lock changes hands.
    found = await feed(
        monitor,
        ev(ACQUIRED, "B", "f2"),
        ev(WAITING, "B", "f1"),
        ev(ACQUIRED, "B", "f1"),  # stale hold of A replaced: B holds f1, A waits on it
        ev(WAITING, "B", "f3"),
    )
    assert found == []
    found = await feed(monitor, ev(ACQUIRED, "A", "f3"))
    assert len(found) == 1
    assert_real(monitor, found[0])


@pytest.mark.anyio
async def test_duplicate_events_are_harmless() -> None:
    reports: list[DeadlockInfo] = []
    monitor = DeadlockMonitor(on_deadlock=reports.append)
    events = [
        ev(ACQUIRED, "A", "f1"),
        ev(ACQUIRED, "B", "f2"),
        ev(WAITING, "A", "f2"),
        ev(WAITING, "B", "f1"),
    ]
    for event in events:
        await monitor.handle_event(event)
        await monitor.handle_event(event)
    assert len(reports) == 1
    for event in events:
        assert await monitor.handle_event(event) is None
    await feed(monitor, ev(RELEASED, "A", "f1"), ev(RELEASED, "A", "f1"))
    assert monitor.snapshot().holds == {"f2": "B"}


@pytest.mark.anyio
async def test_unregistering_in_the_middle_of_a_cycle_dissolves_it() -> None:
    monitor = DeadlockMonitor()
    monitor.register_agent("A", issue_id="7", start_time=1.0)
    await feed(
        monitor,
        ev(ACQUIRED, "A", "f1"),
        ev(ACQUIRED, "B", "f2"),
        ev(ACQUIRED, "C", "f3"),
        ev(WAITING, "A", "f2"),
        ev(WAITING, "B", "f3"),
    )
    monitor.unregister_agent("A")
    assert await feed(monitor, ev(WAITING, "C", "f1")) == []
    snap = monitor.snapshot()
    assert "f1" not in snap.holds
    assert ("A", "f2") not in snap.waits


@pytest.mark.anyio
async def test_the_victim_is_told_softly_and_its_mark_is_level_triggered() -> None:
    monitor = DeadlockMonitor()
    notices: VictimNotices = monitor
    got: list[DeadlockInfo] = []

    async def pending_acquire_of(agent: str) -> None:
        got.append(await notices.wait_for_victim(agent))

    async with anyio.create_task_group() as tg:
        tg.start_soon(pending_acquire_of, "B")
        await anyio.wait_all_tasks_blocked()
        found = await feed(
            monitor,
            ev(ACQUIRED, "A", "f1"),
            ev(ACQUIRED, "A", "f0"),  # A holds more, so B (one lock) is the victim
            ev(ACQUIRED, "B", "f2"),
            ev(WAITING, "A", "f2"),
            ev(WAITING, "B", "f1"),
        )
    assert found[0].victim == "B"
    assert got == found
    # A call that starts while the mark stands returns at once.
    with anyio.fail_after(1):
        assert await monitor.wait_for_victim("B") == found[0]
    assert monitor.victim_mark("B") == found[0]
    # The victim gives way: its wait ends, the mark is cleared, a new call waits again.
    await feed(monitor, ev(WAIT_ENDED, "B", "f1"), ev(RELEASED, "B", "f2"))
    assert monitor.victim_mark("B") is None
    with anyio.move_on_after(0.05) as scope:
        await monitor.wait_for_victim("B")
    assert scope.cancelled_caught


@pytest.mark.anyio
async def test_a_cycle_being_resolved_is_not_reported_again_but_a_new_one_is() -> None:
    reports: list[DeadlockInfo] = []
    monitor = DeadlockMonitor(on_deadlock=reports.append)
    await feed(
        monitor,
        ev(ACQUIRED, "A", "f1"),
        ev(ACQUIRED, "B", "f2"),
        ev(WAITING, "A", "f2"),
        ev(WAITING, "B", "f1"),
    )
    assert len(reports) == 1
    assert await monitor.check_all() == []  # still there, being resolved
    assert len(reports) == 1
    # A new cycle among other agents is reported.
    await feed(
        monitor,
        ev(ACQUIRED, "C", "g1"),
        ev(ACQUIRED, "D", "g2"),
        ev(WAITING, "C", "g2"),
        ev(WAITING, "D", "g1"),
    )
    assert len(reports) == 2
    assert set(reports[1].agents) == {"C", "D"}


@pytest.mark.anyio
async def test_every_cycle_closed_by_one_event_is_reported() -> None:
    # A waits on x (held by B) and y (held by C); B and C both wait on L; A acquires L.
    reports: list[DeadlockInfo] = []
    monitor = DeadlockMonitor(on_deadlock=reports.append)
    monitor.register_agent("A", start_time=0.0)
    await feed(
        monitor,
        ev(ACQUIRED, "B", "x"),
        ev(ACQUIRED, "C", "y"),
        ev(WAITING, "A", "x"),
        ev(WAITING, "A", "y"),
        ev(WAITING, "B", "L"),
        ev(WAITING, "C", "L"),
        ev(ACQUIRED, "A", "L"),
    )
    assert len(reports) == 2
    assert {r.victim for r in reports} == {"B", "C"}
    for report in reports:
        assert_real(monitor, report)


@pytest.mark.anyio
async def test_default_victim_with_no_history_is_fewest_locks_then_youngest_then_id() -> None:
    monitor = DeadlockMonitor()
    monitor.register_agent("old", start_time=100.0)
    monitor.register_agent("young", start_time=200.0)
    found = await feed(
        monitor,
        ev(ACQUIRED, "old", "f1"),
        ev(ACQUIRED, "young", "f2"),
        ev(WAITING, "old", "f2"),
        ev(WAITING, "young", "f1"),
    )
    assert found[0].victim == "young"

    monitor = DeadlockMonitor()
    monitor.register_agent("known", start_time=300.0)
    found = await feed(
        monitor,
        ev(ACQUIRED, "known", "f1"),
        ev(ACQUIRED, "stranger", "f2"),
        ev(WAITING, "known", "f2"),
        ev(WAITING, "stranger", "f1"),
    )
    assert found[0].victim == "stranger"  # unregistered counts as youngest

    monitor = DeadlockMonitor()
    found = await feed(
        monitor,
        ev(ACQUIRED, "b", "f1"),
        ev(ACQUIRED, "b", "f3"),
        ev(ACQUIRED, "c", "f2"),
        ev(ACQUIRED, "a", "f4"),
        ev(WAITING, "b", "f2"),
        ev(WAITING, "c", "f4"),
        ev(WAITING, "a", "f1"),
    )
    assert found[0].victim == "a"  # a and c hold one lock each, both unregistered: by id


@pytest.mark.anyio
async def test_a_pluggable_policy_is_used_and_a_bad_choice_falls_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[tuple[Cycle, dict[str, AgentInfo]]] = []

    def oldest(cycle: Cycle, agents: Mapping[str, AgentInfo]) -> str:
        seen.append((cycle, dict(agents)))
        return max(agents, key=lambda a: -(agents[a].start_time or 0.0))

    monitor = DeadlockMonitor(victim_policy=oldest)
    monitor.register_agent("A", issue_id="12", start_time=1.0)
    monitor.register_agent("B", start_time=2.0)
    found = await feed(
        monitor,
        ev(ACQUIRED, "A", "f1"),
        ev(ACQUIRED, "B", "f2"),
        ev(WAITING, "A", "f2"),
        ev(WAITING, "B", "f1"),
    )
    assert found[0].victim == "A"
    assert seen[0][1]["A"] == AgentInfo(
        agent_id="A", registered=True, issue_id="12", start_time=1.0, locks_held=1, waits=1
    )

    monitor = DeadlockMonitor(victim_policy=lambda cycle, agents: "nobody")
    with caplog.at_level(logging.ERROR):
        found = await feed(
            monitor,
            ev(ACQUIRED, "A", "f1"),
            ev(ACQUIRED, "B", "f2"),
            ev(WAITING, "A", "f2"),
            ev(WAITING, "B", "f1"),
        )
    assert found[0].victim in {"A", "B"}
    assert "nobody" in caplog.text


@pytest.mark.anyio
@pytest.mark.parametrize("is_async", [False, True])
async def test_a_cycle_the_store_does_not_confirm_is_not_reported(is_async: bool) -> None:
    asked: list[DeadlockInfo] = []
    reports: list[DeadlockInfo] = []

    def verify_sync(info: DeadlockInfo) -> bool:
        asked.append(info)
        return False

    async def verify_async(info: DeadlockInfo) -> bool:
        return verify_sync(info)

    monitor = DeadlockMonitor(
        on_deadlock=reports.append, verify_cycle=verify_async if is_async else verify_sync
    )
    found = await feed(
        monitor,
        ev(ACQUIRED, "A", "f1"),
        ev(ACQUIRED, "B", "f2"),
        ev(WAITING, "A", "f2"),
        ev(WAITING, "B", "f1"),
    )
    assert found == []
    assert reports == []
    assert len(asked) == 1
    assert monitor.victim_mark("A") is None
    assert monitor.victim_mark("B") is None


@pytest.mark.anyio
async def test_failing_callbacks_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def broken_verify(info: DeadlockInfo) -> bool:
        raise RuntimeError("store unreachable")

    monitor = DeadlockMonitor(verify_cycle=broken_verify)
    with caplog.at_level(logging.ERROR):
        found = await feed(
            monitor,
            ev(ACQUIRED, "A", "f1"),
            ev(ACQUIRED, "B", "f2"),
            ev(WAITING, "A", "f2"),
            ev(WAITING, "B", "f1"),
        )
    assert found == []
    assert "store unreachable" in caplog.text

    async def broken_handler(info: DeadlockInfo) -> None:
        raise RuntimeError("orchestrator down")

    monitor = DeadlockMonitor(on_deadlock=broken_handler)
    with caplog.at_level(logging.ERROR):
        found = await feed(
            monitor,
            ev(ACQUIRED, "A", "f1"),
            ev(ACQUIRED, "B", "f2"),
            ev(WAITING, "A", "f2"),
            ev(WAITING, "B", "f1"),
        )
    assert len(found) == 1
    assert monitor.victim_mark(found[0].victim) == found[0]
    assert "orchestrator down" in caplog.text


@pytest.mark.anyio
async def test_a_cycle_that_dissolves_while_being_verified_is_not_reported() -> None:
    monitor: DeadlockMonitor

    async def verify(info: DeadlockInfo) -> bool:
        # While the orchestrator checks, the lock store's truth arrives: A's wait ended.
        await monitor.handle_event(ev(WAIT_ENDED, "A", "f2"))
        return True

    monitor = DeadlockMonitor(verify_cycle=verify)
    found = await feed(
        monitor,
        ev(ACQUIRED, "A", "f1"),
        ev(ACQUIRED, "B", "f2"),
        ev(WAITING, "A", "f2"),
        ev(WAITING, "B", "f1"),
    )
    assert found == []


@pytest.mark.anyio
async def test_a_release_by_a_non_holder_is_logged_and_a_handoff_seen_early_is_routine(
    caplog: pytest.LogCaptureFixture,
) -> None:
    monitor = DeadlockMonitor()
    # A hand-off may be reported before the release that caused it (a server pushes the grant
    # to the waiter while the holder's release call returns): routine, so no warning.
    with caplog.at_level(logging.WARNING):
        await feed(monitor, ev(ACQUIRED, "A", "f1"), ev(ACQUIRED, "B", "f1"))
    assert caplog.text == ""
    snap = monitor.snapshot()
    assert snap.holds == {"f1": "B"}
    assert {a.agent_id: a.locks_held for a in snap.agents} == {"B": 1}
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        await feed(monitor, ev(RELEASED, "C", "f1"))
    assert "released by C but held by B" in caplog.text
    assert monitor.snapshot().holds == {"f1": "B"}
    # A's release of the hold it lost ends nothing and is no new violation.
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        await feed(monitor, ev(RELEASED, "A", "f1"))
    assert caplog.text == ""
    assert monitor.snapshot().holds == {"f1": "B"}


def test_registration_rejects_bad_input_and_changes_nothing() -> None:
    monitor = DeadlockMonitor()
    with pytest.raises(ValueError, match="agent_id"):
        monitor.register_agent("  ")
    with pytest.raises(ValueError, match="start_time"):
        monitor.register_agent("A", start_time=float("nan"))
    assert monitor.snapshot().agents == ()
    monitor.register_agent("A")
    (info,) = monitor.snapshot().agents
    assert info.registered
    assert info.start_time is not None


@pytest.mark.anyio
async def test_rebuild_from_a_snapshot_finds_cycles_already_present() -> None:
    reports: list[DeadlockInfo] = []
    monitor = DeadlockMonitor(on_deadlock=reports.append)
    await monitor.handle_event(ev(ACQUIRED, "Z", "old"))
    monitor.rebuild(
        holds={"f1": "A", "f2": "B", "g1": "C", "g2": "D", "h": "E"},
        waits=[("A", "f2"), ("B", "f1"), ("C", "g2"), ("D", "g1"), ("E", "f1")],
    )
    assert "old" not in monitor.snapshot().holds
    assert len(monitor.find_cycles()) == 2
    assert reports == []
    found = await monitor.check_all()
    assert len(found) == 2
    assert reports == found
    for info in found:
        assert_real(monitor, info)
    # A monitor that rebuilds again (the cross-process poll) does not report them twice...
    monitor.rebuild(
        holds={"f1": "A", "f2": "B", "g1": "C", "g2": "D"},
        waits=[("A", "f2"), ("B", "f1"), ("C", "g2"), ("D", "g1")],
    )
    assert await monitor.check_all() == []
    # ...until a victim has given way and the cycle forms again.
    gone = found[0].victim
    still = [(a, lock) for a, lock in [("A", "f2"), ("B", "f1")] if a != gone]
    monitor.rebuild(holds={"f1": "A", "f2": "B"}, waits=still)
    assert monitor.victim_mark(gone) is None
    monitor.rebuild(holds={"f1": "A", "f2": "B"}, waits=[("A", "f2"), ("B", "f1")])
    (again,) = await monitor.check_all()
    assert set(again.agents) == {"A", "B"}


def test_rebuild_rejects_a_malformed_snapshot_and_keeps_the_old_graph() -> None:
    monitor = DeadlockMonitor()
    monitor.rebuild(holds={"f1": "A"}, waits=[("B", "f1")])
    with pytest.raises(ValueError, match="holder"):
        monitor.rebuild(holds={"f1": ""}, waits=[])
    with pytest.raises(ValueError, match="pair"):
        monitor.rebuild(holds={}, waits=[("A",)])  # type: ignore[list-item]
    assert monitor.snapshot().holds == {"f1": "A"}
    assert monitor.snapshot().waits == (("B", "f1"),)


@pytest.mark.anyio
async def test_snapshot_and_describe_show_the_state() -> None:
    monitor = DeadlockMonitor()
    assert monitor.describe() == "no locks held or awaited"
    monitor.register_agent("A", issue_id="3", start_time=5.0)
    await feed(
        monitor,
        ev(ACQUIRED, "A", "f1"),
        ev(ACQUIRED, "B", "f2"),
        ev(WAITING, "A", "f2"),
        ev(WAITING, "B", "f1"),
    )
    data = monitor.snapshot().to_dict()
    assert data["holds"] == {"f1": "A", "f2": "B"}
    assert {"agent_id": "A", "lock_path": "f2"} in data["waits"]
    assert data["agents"][0]["issue_id"] == "3"
    assert list(data["victims"]) == ["B"]
    text = monitor.describe()
    assert "f1 held by A" in text
    assert "B waits for f1" in text
    assert "victim B" in text


@pytest.mark.anyio
async def test_many_tasks_at_once_keep_the_graph_consistent() -> None:
    # 50 pairs deadlock concurrently while 50 bystanders churn; every pair is reported once.
    reports: list[DeadlockInfo] = []

    async def slow_verify(info: DeadlockInfo) -> bool:
        await anyio.lowlevel.checkpoint()
        return True

    monitor = DeadlockMonitor(on_deadlock=reports.append, verify_cycle=slow_verify)

    async def pair(i: int) -> None:
        a, b = f"a{i}", f"b{i}"
        await monitor.handle_event(ev(ACQUIRED, a, f"x{i}"))
        await monitor.handle_event(ev(ACQUIRED, b, f"y{i}"))
        await anyio.lowlevel.checkpoint()
        await monitor.handle_event(ev(WAITING, a, f"y{i}"))
        await monitor.handle_event(ev(WAITING, b, f"x{i}"))

    async def bystander(i: int) -> None:
        for _ in range(5):
            await monitor.handle_event(ev(ACQUIRED, f"c{i}", "shared"))
            await anyio.lowlevel.checkpoint()
            await monitor.handle_event(ev(RELEASED, f"c{i}", "shared"))

    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(pair, i)
            tg.start_soon(bystander, i)
    assert len(reports) == 50
    assert sorted(tuple(sorted(r.agents)) for r in reports) == sorted(
        (f"a{i}", f"b{i}") for i in range(50)
    )
    for report in reports:
        assert_real(monitor, report)
    snap = monitor.snapshot()
    held = {a.agent_id: a.locks_held for a in snap.agents if a.locks_held}
    assert sum(held.values()) == len(snap.holds)


@pytest.mark.anyio
async def test_a_late_duplicate_release_after_a_handover_is_no_violation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A releases f1 (tool), B is granted it, then A's PostToolUse hook re-reports the release.
    monitor = DeadlockMonitor()
    with caplog.at_level(logging.WARNING):
        await feed(
            monitor,
            ev(ACQUIRED, "A", "f1"),
            ev(RELEASED, "A", "f1"),
            ev(ACQUIRED, "B", "f1"),
            ev(RELEASED, "A", "f1"),
        )
    assert caplog.text == ""
    assert monitor.snapshot().holds == {"f1": "B"}
    # A release by an agent that never held the lock is still a violation.
    with caplog.at_level(logging.WARNING):
        await feed(monitor, ev(RELEASED, "C", "f1"))
    assert "released by C but held by B" in caplog.text


@pytest.mark.anyio
async def test_a_cancelled_wait_for_victim_leaves_nothing_behind() -> None:
    monitor = DeadlockMonitor()
    with anyio.move_on_after(0.01):
        await monitor.wait_for_victim("A")
    assert monitor._signals == {}  # no per-agent leftovers from calls that gave up
    # Two waiters, one gives up: the other still hears about the deadlock.
    got: list[DeadlockInfo] = []

    async def waiter() -> None:
        got.append(await monitor.wait_for_victim("B"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        with anyio.move_on_after(0.01):
            await monitor.wait_for_victim("B")
        found = await feed(
            monitor,
            ev(ACQUIRED, "A", "f1"),
            ev(ACQUIRED, "A", "f3"),
            ev(ACQUIRED, "B", "f2"),
            ev(WAITING, "A", "f2"),
            ev(WAITING, "B", "f1"),
        )
    assert got == found
    assert monitor._signals == {}


@pytest.mark.anyio
async def test_a_failing_policy_falls_back_to_the_default(caplog: pytest.LogCaptureFixture) -> None:
    def broken(cycle: Cycle, agents: Mapping[str, AgentInfo]) -> str:
        raise KeyError("no such agent")

    monitor = DeadlockMonitor(victim_policy=broken)
    monitor.register_agent("A", start_time=1.0)
    monitor.register_agent("B", start_time=2.0)
    with caplog.at_level(logging.ERROR):
        found = await feed(
            monitor,
            ev(ACQUIRED, "A", "f1"),
            ev(ACQUIRED, "B", "f2"),
            ev(WAITING, "A", "f2"),
            ev(WAITING, "B", "f1"),
        )
    assert found[0].victim == "B"  # the default: same locks, B is younger
    assert "victim policy failed" in caplog.text


@pytest.mark.anyio
async def test_handle_event_rejects_what_is_not_a_lock_event() -> None:
    monitor = DeadlockMonitor()
    bad: object = {"event_type": "ACQUIRED", "agent_id": "A", "lock_path": "f"}
    with pytest.raises(TypeError, match="LockEvent"):
        await monitor.handle_event(bad)  # type: ignore[arg-type]
    assert monitor.snapshot().holds == {}


@pytest.mark.anyio
async def test_on_deadlock_may_call_back_into_the_monitor() -> None:
    # The orchestrator kills the victim from the callback: unregister and report its releases.
    monitor: DeadlockMonitor
    killed: list[str] = []

    async def kill(info: DeadlockInfo) -> None:
        killed.append(info.victim)
        for lock_key in [s.lock_path for s in info.cycle if s.held_by == info.victim]:
            await monitor.handle_event(ev(RELEASED, info.victim, lock_key))
        monitor.unregister_agent(info.victim)

    monitor = DeadlockMonitor(on_deadlock=kill)
    found = await feed(
        monitor,
        ev(ACQUIRED, "A", "f1"),
        ev(ACQUIRED, "A", "f0"),
        ev(ACQUIRED, "B", "f2"),
        ev(WAITING, "A", "f2"),
        ev(WAITING, "B", "f1"),
    )
    assert killed == ["B"] == [info.victim for info in found]
    snap = monitor.snapshot()
    assert snap.holds == {"f1": "A", "f0": "A"}
    assert snap.waits == (("A", "f2"),)
    assert monitor.victim_mark("B") is None
    assert await monitor.handle_event(ev(ACQUIRED, "A", "f2")) is None


@pytest.mark.anyio
async def test_check_all_skips_cycles_the_store_does_not_confirm_and_reports_the_rest() -> None:
    def only_c_and_d(info: DeadlockInfo) -> bool:
        return set(info.agents) == {"C", "D"}

    monitor = DeadlockMonitor(verify_cycle=only_c_and_d)
    monitor.rebuild(
        holds={"f1": "A", "f2": "B", "g1": "C", "g2": "D"},
        waits=[("A", "f2"), ("B", "f1"), ("C", "g2"), ("D", "g1")],
    )
    found = await monitor.check_all()
    assert [set(info.agents) for info in found] == [{"C", "D"}]
    assert len(monitor.find_cycles()) == 2


@settings(max_examples=200, deadline=None)
@given(
    infos=st.lists(
        st.tuples(st.integers(0, 3), st.none() | st.floats(0, 10), st.booleans()),
        min_size=2,
        max_size=6,
    ),
    turn=st.integers(0, 5),
)
def test_the_default_policy_is_deterministic_and_ignores_where_the_cycle_starts(
    infos: list[tuple[int, float | None, bool]], turn: int
) -> None:
    ids = [f"agent{i}" for i in range(len(infos))]
    agents = {
        agent_id: AgentInfo(
            agent_id=agent_id,
            registered=start is not None,
            issue_id=None,
            start_time=start,
            locks_held=held,
            waits=1,
        )
        for agent_id, (held, start, _) in zip(ids, infos, strict=True)
    }
    cycle = tuple(
        CycleStep(agent_id=a, lock_path=f"l{i}", held_by=ids[(i + 1) % len(ids)])
        for i, a in enumerate(ids)
    )
    turn %= len(cycle)
    victim = cheapest_then_youngest(cycle, agents)
    assert victim == cheapest_then_youngest(cycle[turn:] + cycle[:turn], agents)
    fewest = min(info.locks_held for info in agents.values())
    assert agents[victim].locks_held == fewest  # nobody gave way yet: cost is locks held
    assert victim_cost(agents[victim]) == min(victim_cost(info) for info in agents.values())
    peers = [info for info in agents.values() if info.locks_held == fewest]
    latest = agents[victim].start_time
    if latest is not None:  # a registered victim: no unregistered peer, and none younger
        assert all(p.start_time is not None and p.start_time <= latest for p in peers)


@pytest.mark.anyio
async def test_a_refused_cycle_sets_one_edge_aside_and_other_cycles_are_still_found() -> None:
    # The store says A no longer waits on L; A's other wait (on z) still closes a real cycle.
    def store_has_no_wait_of_a_on_l(info: DeadlockInfo) -> bool:
        return all((s.agent_id, s.lock_path) != ("A", "L") for s in info.cycle)

    monitor = DeadlockMonitor(verify_cycle=store_has_no_wait_of_a_on_l)
    found = await feed(
        monitor,
        ev(ACQUIRED, "H", "L"),
        ev(ACQUIRED, "H", "z"),
        ev(ACQUIRED, "H", "w"),
        ev(ACQUIRED, "A", "x"),
        ev(WAITING, "A", "L"),
        ev(WAITING, "A", "z"),
        ev(WAITING, "H", "x"),
    )
    assert len(found) == 1
    assert {(s.agent_id, s.lock_path, s.held_by) for s in found[0].cycle} == {
        ("A", "z", "H"),
        ("H", "x", "A"),
    }


@pytest.mark.anyio
async def test_two_events_closing_overlapping_cycles_at_once_give_one_report() -> None:
    # A waits on f2 and f3, both held by B, which waits on f1 held by A. The two WAITING events
    # of A arrive from two tasks while verification of the first cycle is still pending.
    reports: list[DeadlockInfo] = []

    async def slow_verify(info: DeadlockInfo) -> bool:
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        return True

    monitor = DeadlockMonitor(on_deadlock=reports.append, verify_cycle=slow_verify)
    await feed(
        monitor,
        ev(ACQUIRED, "A", "f1"),
        ev(ACQUIRED, "B", "f2"),
        ev(ACQUIRED, "B", "f3"),
        ev(WAITING, "B", "f1"),
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(monitor.handle_event, ev(WAITING, "A", "f2"))
        tg.start_soon(monitor.handle_event, ev(WAITING, "A", "f3"))
    assert len(reports) == 1
    assert reports[0].victim == "A"


@pytest.mark.anyio
async def test_wait_for_victim_rejects_a_blank_agent_id() -> None:
    with pytest.raises(ValueError, match="agent_id"):
        await DeadlockMonitor().wait_for_victim(" ")
