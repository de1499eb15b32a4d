"""What the coordinator runs in its own task group: `on_deadlock` callbacks off the agents'
tool calls, and the re-sync of its monitor with the lock store."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from lockstore_support import until_waiting
from tool_support import data

from lockyard.core.deadlock_info import DeadlockInfo
from lockyard.core.events import LockEvent, LockEventType
from lockyard.domain.graph import Cycle
from lockyard.domain.victim import AgentInfo
from lockyard.infra.agent_runtime import CoordinatorNotOpenError, LockCoordinator
from lockyard.infra.lockstore import LockStore
from polling_support import wait_until_async

pytestmark = pytest.mark.anyio


def bob_gives_way(cycle: Cycle, agents: Mapping[str, AgentInfo]) -> str:
    return "bob"


async def test_a_slow_on_deadlock_never_holds_up_the_call_that_closed_the_cycle(
    repo: Path, lock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    callback_may_end = anyio.Event()
    started: list[DeadlockInfo] = []
    ended: list[DeadlockInfo] = []

    async def slow_on_deadlock(info: DeadlockInfo) -> None:
        started.append(info)
        with anyio.move_on_after(60):  # a real slow callback: seconds, unless let go
            await callback_may_end.wait()
        ended.append(info)
        raise RuntimeError("the orchestrator's handler failed")

    results: dict[str, dict[str, Any]] = {}
    with anyio.fail_after(30):
        async with LockCoordinator(
            repo, lock_dir, on_deadlock=slow_on_deadlock, victim_policy=bob_gives_way
        ) as coordinator:
            alice, bob = coordinator.runtime("alice"), coordinator.runtime("bob")
            assert data(await alice.tools.acquire({"filepaths": ["f1"]}))["all_acquired"]
            assert data(await bob.tools.acquire({"filepaths": ["f2"]}))["all_acquired"]

            async def wants(name: str, path: str) -> None:
                runtime = alice if name == "alice" else bob
                outcome = await runtime.tools.acquire({"filepaths": [path], "timeout_seconds": 60})
                results[name] = data(outcome)

            async with anyio.create_task_group() as group:
                group.start_soon(wants, "alice", "f2")
                await until_waiting(coordinator.store, "f2", "alice")
                await wants("bob", "f1")  # closes the cycle; bob is the victim
                # Bob's call is back while the callback still runs.
                assert results["bob"]["deadlock"]["victim"] == "bob"
                assert len(started) == 1
                assert ended == []
            assert results["alice"]["all_acquired"] is True
            callback_may_end.set()
            # The callback runs in the coordinator's task group: nothing here can await it.
            await wait_until_async(lambda: ended, "the on_deadlock callback ended")
    assert "on_deadlock failed" in caplog.text


async def test_a_victim_cancelled_before_it_heard_of_the_deadlock_still_gives_way(
    repo: Path, lock_dir: Path
) -> None:
    results: dict[str, dict[str, Any]] = {}
    bob_call = anyio.CancelScope()

    def cancel_bob_once_marked(event: LockEvent) -> None:
        # Runs right after the monitor marked bob, before his call can hear of it: the
        # cancellation lands before the call gives its locks back.
        if event.agent_id == "bob" and event.event_type is LockEventType.WAITING:
            bob_call.cancel()

    with anyio.fail_after(30):
        async with LockCoordinator(
            repo, lock_dir, victim_policy=bob_gives_way, resync_interval=3600
        ) as coordinator:
            alice = coordinator.runtime("alice")
            bob = coordinator.runtime("bob", emit_lock_event=cancel_bob_once_marked)
            assert data(await alice.tools.acquire({"filepaths": ["f1"]}))["all_acquired"]
            assert data(await bob.tools.acquire({"filepaths": ["f2"]}))["all_acquired"]

            async def alice_wants_f2() -> None:
                outcome = await alice.tools.acquire({"filepaths": ["f2"], "timeout_seconds": 60})
                results["alice"] = data(outcome)

            async with anyio.create_task_group() as group:
                group.start_soon(alice_wants_f2)
                await until_waiting(coordinator.store, "f2", "alice")
                with bob_call:
                    await bob.tools.acquire({"filepaths": ["f1"], "timeout_seconds": 60})
                assert bob_call.cancelled_caught
            assert results["alice"]["all_acquired"] is True
            assert coordinator.store.holder("f2") == "alice"
            assert coordinator.monitor.victim_mark("bob") is None


async def test_a_deadlock_the_events_missed_is_found_by_the_resync(
    repo: Path, lock_dir: Path
) -> None:
    outcome: dict[str, Any] = {}
    with anyio.fail_after(30):
        async with LockCoordinator(
            repo, lock_dir, victim_policy=bob_gives_way, resync_interval=0.05
        ) as coordinator:
            store = coordinator.store
            alice, bob = coordinator.runtime("alice"), coordinator.runtime("bob")
            # Alice works on the store directly: the monitor hears nothing of her.
            assert store.try_lock("f1", "alice")
            assert data(await bob.tools.acquire({"filepaths": ["f2"]}))["all_acquired"]
            got_f2: list[bool] = []

            async def alice_waits_for_f2() -> None:
                got_f2.append(await store.acquire_async("f2", "alice", timeout_seconds=60))

            async with anyio.create_task_group() as group:
                group.start_soon(alice_waits_for_f2)
                await until_waiting(store, "f2", "alice")
                outcome.update(
                    data(await bob.tools.acquire({"filepaths": ["f1"], "timeout_seconds": 60}))
                )
            assert got_f2 == [True]
            assert alice.agent_id == "alice"
    assert outcome["deadlock"]["victim"] == "bob"
    assert {step["agent"] for step in outcome["deadlock"]["cycle"]} == {"alice", "bob"}


async def test_a_resync_leaves_waits_of_agents_it_does_not_know_to_lockyard_monitor(
    repo: Path, lock_dir: Path
) -> None:
    async with LockCoordinator(repo, lock_dir, resync_interval=3600) as coordinator:
        store = coordinator.store
        coordinator.runtime("alice")
        assert store.try_lock("f1", "alice")
        assert store.try_lock("f2", "stranger")

        async def stranger_waits() -> None:
            await store.acquire_async("f1", "stranger", timeout_seconds=60)

        async with anyio.create_task_group() as group:
            group.start_soon(stranger_waits)
            await until_waiting(store, "f1", "stranger")
            assert await coordinator.resync() == []
            snapshot = coordinator.monitor.snapshot()
            assert dict(snapshot.holds) == {
                store.canonicalize("f1"): "alice",
                store.canonicalize("f2"): "stranger",
            }
            assert snapshot.waits == ()
            group.cancel_scope.cancel()


async def test_a_resync_reads_only_its_own_repository_of_a_shared_lock_directory(
    repo: Path, lock_dir: Path, tmp_path: Path
) -> None:
    # Another repository's agent holds its own `f1` in the same lock directory (the default
    # per-user one is shared by every repository): that is another lock, not alice's.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other_repo = LockStore(elsewhere, lock_dir, namespace="zz-another-repository")
    async with LockCoordinator(repo, lock_dir, resync_interval=3600) as coordinator:
        store = coordinator.store
        coordinator.runtime("alice")
        assert store.try_lock("f1", "alice")
        assert other_repo.try_lock("f1", "stranger")
        assert await coordinator.resync() == []
        assert dict(coordinator.monitor.snapshot().holds) == {store.canonicalize("f1"): "alice"}
    other_repo.close()


async def test_a_coordinator_with_on_deadlock_must_be_open_to_build_runtimes(
    repo: Path, lock_dir: Path
) -> None:
    coordinator = LockCoordinator(repo, lock_dir, on_deadlock=lambda info: None)
    with pytest.raises(CoordinatorNotOpenError, match="async with"):
        coordinator.runtime("alice")
    async with coordinator:
        assert coordinator.runtime("alice").agent_id == "alice"
        with pytest.raises(RuntimeError, match="already open"):
            await coordinator.__aenter__()
    with pytest.raises(CoordinatorNotOpenError):
        coordinator.runtime("bob")


def test_resync_interval_must_be_positive(repo: Path, lock_dir: Path) -> None:
    with pytest.raises(ValueError, match="resync_interval"):
        LockCoordinator(repo, lock_dir, resync_interval=0)


async def test_a_failing_resync_is_logged_and_tried_again(
    repo: Path, lock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, "lockyard")
    calls: list[int] = []
    async with LockCoordinator(repo, lock_dir, resync_interval=0.01) as coordinator:

        async def failing() -> list[DeadlockInfo]:
            calls.append(1)
            raise OSError("lock directory unreadable")

        coordinator.resync = failing  # type: ignore[method-assign]
        await wait_until_async(lambda: len(calls) >= 2, "a second re-sync")
    assert "re-sync of the deadlock monitor with the lock store failed" in caplog.text
