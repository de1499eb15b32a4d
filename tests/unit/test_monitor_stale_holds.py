"""A hold the store no longer has is corrected from the store, so it hides no real deadlock."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from lockyard.core.deadlock_info import DeadlockInfo
from lockyard.core.events import LockEvent, LockEventType
from lockyard.domain.graph import Cycle
from lockyard.domain.monitor import DeadlockMonitor
from lockyard.domain.victim import AgentInfo

pytestmark = pytest.mark.anyio

ACQUIRED, WAITING = LockEventType.ACQUIRED, LockEventType.WAITING


def b_gives_way(cycle: Cycle, agents: Mapping[str, AgentInfo]) -> str:
    return "B"


class Store:
    """The lock store's truth: lock -> holder."""

    def __init__(self, holds: dict[str, str]) -> None:
        self.holds = holds
        self.unreadable: set[str] = set()

    def verify(self, info: DeadlockInfo) -> bool:
        return all(self.holds.get(step.lock_path) == step.held_by for step in info.cycle)

    def holder(self, lock: str) -> str | None:
        if lock in self.unreadable:
            raise LookupError(f"{lock}: unreadable record")
        return self.holds.get(lock)


async def feed(monitor: DeadlockMonitor, *events: tuple[LockEventType, str, str]) -> None:
    for kind, agent, lock in events:
        await monitor.handle_event(LockEvent(kind, agent, lock))


async def stale_then_real(monitor: DeadlockMonitor) -> DeadlockInfo | None:
    # The monitor believes B holds x; the store says x is free (`lockyard clean --agent B`).
    await feed(
        monitor,
        (ACQUIRED, "B", "x"),
        (ACQUIRED, "A", "y"),
        (ACQUIRED, "C", "z"),
        (ACQUIRED, "B", "w"),
        (WAITING, "A", "x"),
        (WAITING, "C", "w"),
        (WAITING, "A", "z"),
    )
    # Closes B->A->B (through the stale x) and the real B->A->C->B.
    return await monitor.handle_event(LockEvent(WAITING, "B", "y"))


async def test_a_refused_cycle_corrects_the_stale_hold_and_the_real_cycle_is_reported() -> None:
    store = Store({"y": "A", "z": "C", "w": "B"})
    monitor = DeadlockMonitor(
        victim_policy=b_gives_way, verify_cycle=store.verify, holder_in_store=store.holder
    )
    info = await stale_then_real(monitor)
    assert info is not None
    assert info.victim == "B"
    assert [(s.agent_id, s.lock_path, s.held_by) for s in info.cycle] == [
        ("B", "y", "A"),
        ("A", "z", "C"),
        ("C", "w", "B"),
    ]
    assert "x" not in monitor.snapshot().holds  # corrected from the store


async def test_without_the_stores_holders_the_stale_edge_is_set_aside_as_before() -> None:
    store = Store({"y": "A", "z": "C", "w": "B"})
    monitor = DeadlockMonitor(victim_policy=b_gives_way, verify_cycle=store.verify)
    assert await stale_then_real(monitor) is None
    assert monitor.snapshot().holds["x"] == "B"


async def test_a_hold_the_store_cannot_read_is_left_alone() -> None:
    store = Store({"y": "A", "z": "C", "w": "B"})
    store.unreadable.add("x")
    monitor = DeadlockMonitor(
        victim_policy=b_gives_way, verify_cycle=store.verify, holder_in_store=store.holder
    )
    assert await stale_then_real(monitor) is None
    assert monitor.snapshot().holds["x"] == "B"


async def test_a_hold_the_store_gave_to_another_agent_is_moved_to_it() -> None:
    store = Store({"x": "D", "y": "A"})
    monitor = DeadlockMonitor(verify_cycle=store.verify, holder_in_store=store.holder)
    await feed(monitor, (ACQUIRED, "B", "x"), (ACQUIRED, "A", "y"), (WAITING, "A", "x"))
    assert await monitor.handle_event(LockEvent(WAITING, "B", "y")) is None
    assert monitor.snapshot().holds["x"] == "D"


async def test_a_failing_holder_lookup_is_logged_and_the_edge_set_aside(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Store({"y": "A"})

    def broken(lock: str) -> str | None:
        raise OSError("store gone")

    monitor = DeadlockMonitor(verify_cycle=store.verify, holder_in_store=broken)
    await feed(monitor, (ACQUIRED, "B", "x"), (ACQUIRED, "A", "y"), (WAITING, "A", "x"))
    assert await monitor.handle_event(LockEvent(WAITING, "B", "y")) is None
    assert "holder_in_store failed" in caplog.text


async def test_an_async_holder_lookup_corrects_too() -> None:
    store = Store({"y": "A", "z": "C", "w": "B"})

    async def holder(lock: str) -> str | None:
        return store.holder(lock)

    monitor = DeadlockMonitor(
        victim_policy=b_gives_way, verify_cycle=store.verify, holder_in_store=holder
    )
    info = await stale_then_real(monitor)
    assert info is not None
    assert len(info.cycle) == 3
