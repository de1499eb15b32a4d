"""Two agents deadlock through the real MCP protocol; the real monitor makes one give way."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from lockstore_support import until_waiting
from mcp import Client

from lockyard.core.deadlock_info import DeadlockInfo
from lockyard.core.events import LockEventType
from lockyard.domain.monitor import DeadlockMonitor
from lockyard.infra.agent_runtime import LockCoordinator
from lockyard.infra.lockstore import LockStore
from lockyard.infra.tools.lock_tools import DEADLOCK_INSTRUCTION
from lockyard.infra.transports.sdk.server import create_locking_mcp_server


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("f1", "f2", "f3"):
        (root / name).write_text("")
    return root


@pytest.fixture
def coordinator(repo: Path, tmp_path: Path) -> LockCoordinator:
    return LockCoordinator(repo, tmp_path / "locks")


@asynccontextmanager
async def mcp_agent(coordinator: LockCoordinator, agent_id: str) -> AsyncIterator[Client]:
    coordinator.monitor.register_agent(agent_id)
    config = create_locking_mcp_server(
        agent_id,
        coordinator.store.namespace,
        coordinator.monitor.handle_event,
        store=coordinator.store,
        victim_notices=coordinator.monitor,
    )
    async with Client(config["instance"], mode="legacy") as client:
        yield client


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)  # type: ignore[no-any-return]


@pytest.mark.anyio
async def test_two_agents_deadlock_the_victim_gives_way_and_the_other_completes(
    coordinator: LockCoordinator,
) -> None:
    store, monitor = coordinator.store, coordinator.monitor
    reported: list[DeadlockInfo] = []
    monitor_events: list[tuple[str, LockEventType, str]] = []
    original = monitor.handle_event

    async def spy(event: Any) -> DeadlockInfo | None:
        monitor_events.append((event.agent_id, event.event_type, Path(event.lock_path).name))
        info = await original(event)
        if info is not None:
            reported.append(info)
        return info

    monitor.handle_event = spy  # type: ignore[method-assign]
    results: dict[str, dict[str, Any]] = {}
    with anyio.fail_after(20):
        async with mcp_agent(coordinator, "alice") as alice, mcp_agent(coordinator, "bob") as bob:
            assert (await call(alice, "lock_acquire", {"filepaths": ["f1"]}))["all_acquired"]
            assert (await call(bob, "lock_acquire", {"filepaths": ["f2"]}))["all_acquired"]

            async def wants(name: str, client: Client, path: str) -> None:
                results[name] = await call(
                    client, "lock_acquire", {"filepaths": [path], "timeout_seconds": 15}
                )

            async with anyio.create_task_group() as group:
                group.start_soon(wants, "alice", alice, "f2")
                await until_waiting(store, "f2", "alice")
                group.start_soon(wants, "bob", bob, "f1")

    assert len(reported) == 1
    info = reported[0]
    assert set(info.agents) == {"alice", "bob"}
    victim = info.victim
    survivor = "bob" if victim == "alice" else "alice"
    victim_file = "f1" if victim == "alice" else "f2"
    wanted_by_survivor = victim_file

    lost, won = results[victim], results[survivor]
    assert won["all_acquired"] is True
    assert won["results"] == [
        {"filepath": store.canonicalize(wanted_by_survivor), "acquired": True, "holder": survivor}
    ]
    assert "deadlock" not in won

    assert lost["all_acquired"] is False
    deadlock = lost["deadlock"]
    assert deadlock["victim"] == victim
    assert set(deadlock["agents"]) == {"alice", "bob"}
    assert set(deadlock["files"]) == {store.canonicalize("f1"), store.canonicalize("f2")}
    assert {(step["agent"], step["held_by"]) for step in deadlock["cycle"]} == {
        ("alice", "bob"),
        ("bob", "alice"),
    }
    assert deadlock["released"] == [store.canonicalize(victim_file)]
    assert deadlock["instruction"] == DEADLOCK_INSTRUCTION

    # The lock store and the monitor agree: the survivor holds both files, nobody waits.
    assert store.holder("f1") == store.holder("f2") == survivor
    snapshot = monitor.snapshot()
    assert dict(snapshot.holds) == {
        store.canonicalize("f1"): survivor,
        store.canonicalize("f2"): survivor,
    }
    assert snapshot.waits == ()
    assert monitor.victim_mark(victim) is None
    released = [(a, f) for a, kind, f in monitor_events if kind is LockEventType.RELEASED]
    assert released == [(victim, victim_file)]


@pytest.mark.anyio
async def test_a_cycle_through_one_of_several_blocked_files_is_seen(
    coordinator: LockCoordinator,
) -> None:
    """One wait edge per agent (not per blocked file) would miss this deadlock.

    alice holds f1 and waits for f2 (held by carol, who is not stuck) and f3 (held by bob);
    bob waits for f1. The cycle alice -> f3 -> bob -> f1 -> alice must be found.
    """
    store = coordinator.store
    results: dict[str, dict[str, Any]] = {}
    with anyio.fail_after(20):
        async with (
            mcp_agent(coordinator, "alice") as alice,
            mcp_agent(coordinator, "bob") as bob,
            mcp_agent(coordinator, "carol") as carol,
        ):
            await call(alice, "lock_acquire", {"filepaths": ["f1"]})
            await call(bob, "lock_acquire", {"filepaths": ["f3"]})
            await call(carol, "lock_acquire", {"filepaths": ["f2"]})

            async def wants(name: str, client: Client, paths: list[str]) -> None:
                results[name] = await call(
                    client, "lock_acquire", {"filepaths": paths, "timeout_seconds": 15}
                )

            async with anyio.create_task_group() as group:
                group.start_soon(wants, "alice", alice, ["f1", "f2", "f3"])
                await until_waiting(store, "f3", "alice")
                await until_waiting(store, "f2", "alice")
                group.start_soon(wants, "bob", bob, ["f1", "f3"])

    victims = [name for name, result in results.items() if "deadlock" in result]
    assert len(victims) == 1
    assert store.holder("f2") == "carol"  # the bystander keeps its lock
    assert set(results[victims[0]]["deadlock"]["agents"]) == {"alice", "bob"}


@pytest.mark.anyio
async def test_a_victim_mark_that_stands_returns_the_next_wait_at_once(
    repo: Path, tmp_path: Path
) -> None:
    """Level-triggered notices: a call that starts while its agent is marked returns at once."""
    store = LockStore(repo, tmp_path / "locks")
    assert store.try_lock("f2", "bob")

    class AlwaysVictim:
        async def wait_for_victim(self, agent_id: str) -> DeadlockInfo:
            return DeadlockInfo.model_validate(
                {
                    "cycle": [
                        {"agent_id": agent_id, "lock_path": store.canonicalize("f2"),
                         "held_by": "bob"},
                        {"agent_id": "bob", "lock_path": store.canonicalize("f1"),
                         "held_by": agent_id},
                    ],
                    "victim": agent_id,
                    "victim_waits_on": store.canonicalize("f2"),
                    "victim_waits_on_holder": "bob",
                }
            )  # fmt: skip

    config = create_locking_mcp_server(
        "alice", repo, None, store=store, victim_notices=AlwaysVictim()
    )
    async with Client(config["instance"], mode="legacy") as alice:
        with anyio.fail_after(5):
            result = await call(
                alice, "lock_acquire", {"filepaths": ["f1", "f2"], "timeout_seconds": 600}
            )
    assert result["deadlock"]["released"] == [store.canonicalize("f1")]
    assert result["results"] == [
        {"filepath": store.canonicalize("f1"), "acquired": False, "holder": None},
        {"filepath": store.canonicalize("f2"), "acquired": False, "holder": "bob"},
    ]
    assert store.holder("f1") is None
    assert store.waiters("f2") == []


@pytest.mark.anyio
async def test_the_coordinator_rejects_a_cycle_whose_holds_are_gone(
    coordinator: LockCoordinator,
) -> None:
    """verify_cycle re-checks holds against the store before anyone is made a victim."""
    store, monitor = coordinator.store, coordinator.monitor
    assert store.try_lock("f1", "alice")
    f1, f2 = store.canonicalize("f1"), store.canonicalize("f2")
    monitor.register_agent("alice")
    monitor.register_agent("bob")
    from lockyard.core.events import LockEvent

    for agent, kind, path in [
        ("alice", LockEventType.ACQUIRED, f1),
        ("bob", LockEventType.ACQUIRED, f2),  # the store never granted this one
        ("alice", LockEventType.WAITING, f2),
    ]:
        await monitor.handle_event(LockEvent(event_type=kind, agent_id=agent, lock_path=path))
    stale = await monitor.handle_event(
        LockEvent(event_type=LockEventType.WAITING, agent_id="bob", lock_path=f1)
    )
    assert stale is None
    assert (
        coordinator.verify_cycle(
            DeadlockInfo.model_validate(
                {
                    "cycle": [
                        {"agent_id": "alice", "lock_path": f2, "held_by": "bob"},
                        {"agent_id": "bob", "lock_path": f1, "held_by": "alice"},
                    ],
                    "victim": "bob",
                    "victim_waits_on": f1,
                    "victim_waits_on_holder": "alice",
                }
            )
        )
        is False
    )


def test_a_monitor_can_be_built_without_a_coordinator() -> None:
    monitor = DeadlockMonitor()
    assert monitor.snapshot().holds == {}


@pytest.mark.anyio
async def test_a_victim_whose_call_ends_by_another_grant_before_it_hears_still_gives_way(
    repo: Path, tmp_path: Path
) -> None:
    """The monitor marks alice as the victim; before her call's watcher runs, another of the
    files she waits for is granted, which ends the call. She must give way all the same: else
    she keeps f1, asks for f2 again, and the same cycle is reported a second time."""
    coordinator = LockCoordinator(
        repo, tmp_path / "locks", victim_policy=lambda cycle, agents: "alice"
    )
    store, monitor = coordinator.store, coordinator.monitor
    marked = anyio.Event()
    reported: list[DeadlockInfo] = []
    handle = monitor.handle_event

    async def spy(event: Any) -> DeadlockInfo | None:
        info = await handle(event)
        if info is not None:
            reported.append(info)
        return info

    class LateWatcher:
        """The monitor's notices, heard only after the call has ended (a busy loop)."""

        async def wait_for_victim(self, agent_id: str) -> DeadlockInfo:
            await monitor.wait_for_victim(agent_id)
            marked.set()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        def victim_mark(self, agent_id: str) -> DeadlockInfo | None:
            return monitor.victim_mark(agent_id)

    def agent(agent_id: str, notices: object) -> Any:
        monitor.register_agent(agent_id)
        config = create_locking_mcp_server(
            agent_id, store.namespace, spy, store=store, victim_notices=notices
        )
        return Client(config["instance"], mode="legacy")

    results: dict[str, dict[str, Any]] = {}
    with anyio.fail_after(20):
        async with agent("alice", LateWatcher()) as alice, agent("bob", monitor) as bob:
            assert (await call(alice, "lock_acquire", {"filepaths": ["f1"]}))["all_acquired"]
            assert (await call(bob, "lock_acquire", {"filepaths": ["f2"]}))["all_acquired"]
            assert store.try_lock("f3", "carol")

            async def wants(name: str, client: Client, paths: list[str]) -> None:
                results[name] = await call(
                    client, "lock_acquire", {"filepaths": paths, "timeout_seconds": 10}
                )

            async with anyio.create_task_group() as group:
                group.start_soon(wants, "alice", alice, ["f2", "f3"])
                await until_waiting(store, "f2", "alice")
                await until_waiting(store, "f3", "alice")
                group.start_soon(wants, "bob", bob, ["f1"])
                await marked.wait()
                assert store.release("f3", "carol")  # ends alice's call by a grant

    assert [info.victim for info in reported] == ["alice"]
    assert results["alice"]["deadlock"]["victim"] == "alice"
    assert sorted(results["alice"]["deadlock"]["released"]) == [
        store.canonicalize("f1"),
        store.canonicalize("f3"),
    ]
    assert results["bob"]["all_acquired"] is True
    assert store.holder("f1") == "bob"
    assert store.holder("f3") is None
