"""How the monitor tells `on_deadlock`, and what it remembers about released locks."""

from __future__ import annotations

import anyio
import pytest

from lockyard.core.deadlock_info import DeadlockInfo
from lockyard.core.events import LockEvent, LockEventType
from lockyard.domain.monitor import FORMER_HOLDERS_KEPT, DeadlockMonitor
from polling_support import wait_until_async

pytestmark = pytest.mark.anyio

ACQUIRED, WAITING, RELEASED = (
    LockEventType.ACQUIRED,
    LockEventType.WAITING,
    LockEventType.RELEASED,
)


async def close_a_cycle(monitor: DeadlockMonitor) -> DeadlockInfo | None:
    for kind, agent, lock in [
        (ACQUIRED, "a", "f1"),
        (ACQUIRED, "b", "f2"),
        (WAITING, "a", "f2"),
    ]:
        await monitor.handle_event(LockEvent(kind, agent, lock))
    return await monitor.handle_event(LockEvent(WAITING, "b", "f1"))


async def test_on_deadlock_set_after_construction_is_called() -> None:
    monitor = DeadlockMonitor()
    seen: list[DeadlockInfo] = []
    monitor.on_deadlock = seen.append
    info = await close_a_cycle(monitor)
    assert seen == [info]
    assert monitor.on_deadlock == seen.append


def test_an_on_deadlock_that_is_not_callable_is_refused() -> None:
    monitor = DeadlockMonitor()
    with pytest.raises(TypeError, match="on_deadlock must be a function"):
        monitor.on_deadlock = "print"  # type: ignore[assignment]
    with pytest.raises(TypeError, match="on_deadlock must be a function"):
        DeadlockMonitor("print")  # type: ignore[arg-type]


async def test_with_the_callback_runner_the_reporting_call_does_not_wait_for_the_callback() -> None:
    may_end = anyio.Event()
    ended: list[DeadlockInfo] = []

    async def slow(info: DeadlockInfo) -> None:
        await may_end.wait()
        ended.append(info)

    monitor = DeadlockMonitor(slow)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            await group.start(monitor.run_callbacks)
            info = await close_a_cycle(monitor)  # returns with the callback still blocked
            assert info is not None
            assert ended == []
            may_end.set()
            await wait_until_async(lambda: ended, "the callback ended")
            group.cancel_scope.cancel()
    assert ended == [info]


async def test_one_callback_runner_per_monitor() -> None:
    monitor = DeadlockMonitor(lambda info: None)
    async with anyio.create_task_group() as group:
        await group.start(monitor.run_callbacks)
        with pytest.raises(RuntimeError, match="already running"):
            await monitor.run_callbacks()
        group.cancel_scope.cancel()
    # Stopped: reports go inline again.
    seen: list[DeadlockInfo] = []
    monitor.on_deadlock = seen.append
    assert await close_a_cycle(monitor) is not None
    assert len(seen) == 1


async def test_released_locks_are_remembered_within_a_bound() -> None:
    monitor = DeadlockMonitor()
    for i in range(FORMER_HOLDERS_KEPT * 3):
        await monitor.handle_event(LockEvent(ACQUIRED, "a", f"f{i}"))
        await monitor.handle_event(LockEvent(RELEASED, "a", f"f{i}"))
    assert len(monitor._former_holder) == FORMER_HOLDERS_KEPT
    assert f"f{FORMER_HOLDERS_KEPT * 3 - 1}" in monitor._former_holder
    assert "f0" not in monitor._former_holder


async def test_a_late_duplicate_release_of_a_recent_lock_is_still_recognised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    monitor = DeadlockMonitor()
    await monitor.handle_event(LockEvent(ACQUIRED, "a", "f"))
    await monitor.handle_event(LockEvent(RELEASED, "a", "f"))
    for i in range(100):
        await monitor.handle_event(LockEvent(ACQUIRED, "c", f"other{i}"))
        await monitor.handle_event(LockEvent(RELEASED, "c", f"other{i}"))
    await monitor.handle_event(LockEvent(ACQUIRED, "b", "f"))
    await monitor.handle_event(LockEvent(RELEASED, "a", "f"))  # the hook, late
    assert "released by a but held by b" not in caplog.text
    assert monitor.snapshot().holds["f"] == "b"
