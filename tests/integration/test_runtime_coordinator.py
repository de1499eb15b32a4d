"""LockCoordinator: one runtime per agent id, and deadlocks that cross processes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from tool_support import data

from lockyard.core.deadlock_info import CycleStep, DeadlockInfo
from lockyard.infra.agent_runtime import AgentAlreadyOpenError, LockCoordinator
from lockyard.infra.crossproc.notices import AnyVictimNotices
from lockyard.infra.lockstore.paths import lock_name
from polling_support import wait_until_async

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


@pytest.fixture
def lock_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "locks"
    directory.mkdir(mode=0o700)
    return directory


# -- one open runtime per agent id -----------------------------------------------------------


@pytest.mark.anyio
async def test_a_second_open_runtime_of_one_agent_id_is_refused(repo: Path, lock_dir: Path) -> None:
    async with LockCoordinator(repo, lock_dir) as coordinator:
        alice = coordinator.runtime("alice")
        assert data(await alice.tools.acquire({"filepaths": ["a.py"]}))["all_acquired"]

        with pytest.raises(AgentAlreadyOpenError, match="'alice' already has an open runtime"):
            coordinator.runtime("alice")
        with pytest.raises(ValueError, match="use another agent id"):
            coordinator.runtime("alice", issue_id="ISSUE-2")
        # Nothing changed: alice keeps her lock, and is registered once.
        assert coordinator.store.holder("a.py") == "alice"
        assert [agent.agent_id for agent in coordinator.monitor.snapshot().agents] == ["alice"]

        bob = coordinator.runtime("bob")  # other ids are fine
        await alice.close()
        again = coordinator.runtime("alice")  # once closed, the id is free again
        assert again is not alice
        assert data(await again.tools.acquire({"filepaths": ["a.py"]}))["all_acquired"]
    assert again.closed
    assert bob.closed
    assert coordinator.store.holder("a.py") is None


def test_a_cycle_through_an_unreadable_record_is_not_verified(repo: Path, lock_dir: Path) -> None:
    coordinator = LockCoordinator(repo, lock_dir)
    store = coordinator.store
    assert store.try_lock("a.py", "alice")
    assert store.try_lock("b.py", "bob")
    a, b = store.canonicalize("a.py"), store.canonicalize("b.py")
    info = DeadlockInfo(
        cycle=(
            CycleStep(agent_id="bob", lock_path=a, held_by="alice"),
            CycleStep(agent_id="alice", lock_path=b, held_by="bob"),
        ),
        victim="bob",
        victim_waits_on=a,
        victim_waits_on_holder="alice",
    )
    assert coordinator.verify_cycle(info)
    lock = store.lock_dir / f"{lock_name(store.namespace, a)}.lock"
    [record] = list(lock.iterdir())
    record.unlink()
    os.symlink("garbage{", record)
    assert coordinator.verify_cycle(info) is False


# -- victim notices from `lockyard monitor` --------------------------------------------------


def test_agents_heed_the_lock_dirs_notices_only_when_asked(repo: Path, lock_dir: Path) -> None:
    plain = LockCoordinator(repo, lock_dir)
    assert plain.runtime("alice").tools.victim_notices is plain.monitor
    crossing = LockCoordinator(repo, lock_dir, cross_process=True)
    notices = crossing.runtime("alice").tools.victim_notices
    assert isinstance(notices, AnyVictimNotices)
    assert crossing.builder("bob").build().tools.victim_notices is notices
    own = crossing.runtime("carol", victim_notices=plain.monitor).tools.victim_notices
    assert own is plain.monitor  # a runtime's own setting wins


@pytest.mark.anyio
async def test_in_process_deadlocks_are_still_resolved_with_cross_process_on(
    repo: Path, lock_dir: Path
) -> None:
    async with LockCoordinator(repo, lock_dir, cross_process=True) as coordinator:
        alice, bob = coordinator.runtime("alice"), coordinator.runtime("bob")
        await alice.tools.acquire({"filepaths": ["a.py"]})
        await bob.tools.acquire({"filepaths": ["b.py"]})
        results: dict[str, dict[str, Any]] = {}

        async def wait(name: str, runtime: Any, path: str) -> None:
            outcome = await runtime.tools.acquire({"filepaths": [path], "timeout_seconds": 60})
            results[name] = data(outcome)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(wait, "alice", alice, "b.py")
                await wait_until_async(
                    lambda: coordinator.store.waiters("b.py"), "alice queued for b.py"
                )
                group.start_soon(wait, "bob", bob, "a.py")
    assert results["bob"]["deadlock"]["victim"] == "bob"
    assert results["alice"]["all_acquired"] is True


def child_env(lock_dir: Path) -> dict[str, str]:
    env = {"LOCKYARD_LOCK_DIR": str(lock_dir), "PATH": os.environ["PATH"]}
    env.update({k: v for k, v in os.environ.items() if k.startswith(("COVERAGE_", "PYTHONPATH"))})
    return env


@pytest.mark.anyio
async def test_a_deadlock_with_a_serve_agent_is_resolved_with_no_monitor_running(
    repo: Path, lock_dir: Path
) -> None:
    """bob (`lockyard serve`) holds f1 and waits for f2; alice (a coordinator agent) holds f2
    and waits for f1. Whichever of the two processes leads deadlock detection picks alice
    (the younger holder); her pending lock_acquire returns the deadlock at once and bob gets
    f2. No `lockyard monitor` runs."""
    server = StdioServerParameters(
        command=LOCKYARD,
        args=["serve", "--agent-id", "bob", "--repo", str(repo)],
        env=child_env(lock_dir),
    )
    f1, f2 = "f1.py", "f2.py"  # repository-relative keys, also in the monitor's cycle
    async with (
        LockCoordinator(repo, lock_dir, cross_process=True) as coordinator,
        Client(server) as bob,
    ):
        store = coordinator.store
        first = await bob.call_tool("lock_acquire", {"filepaths": ["f1.py"]})
        assert not first.is_error
        alice = coordinator.runtime("alice")
        assert data(await alice.tools.acquire({"filepaths": ["f2.py"]}))["all_acquired"]
        results: dict[str, dict[str, Any]] = {}

        async def bob_waits() -> None:
            result = await bob.call_tool(
                "lock_acquire", {"filepaths": ["f2.py"], "timeout_seconds": 60}
            )
            results["bob"] = json.loads(result.content[0].text)  # type: ignore[union-attr]

        async def alice_waits() -> None:
            outcome = await alice.tools.acquire({"filepaths": ["f1.py"], "timeout_seconds": 60})
            results["alice"] = data(outcome)

        with anyio.fail_after(30):  # far below the 60 s the two calls would otherwise wait
            async with anyio.create_task_group() as group:
                group.start_soon(bob_waits)
                group.start_soon(alice_waits)

        deadlock = results["alice"]["deadlock"]
        assert deadlock["victim"] == "alice"
        assert sorted(deadlock["agents"]) == ["alice", "bob"]
        assert deadlock["released"] == [f2]
        assert results["alice"]["all_acquired"] is False
        assert results["bob"]["all_acquired"] is True
        assert store.holder(f2) == "bob"
        assert store.waiters(f1) == []
        # The in-process monitor was told: alice holds nothing and waits for nothing.
        snapshot = coordinator.monitor.snapshot()
        assert all(agent != "alice" for agent in snapshot.holds.values())
        assert not [wait for wait in snapshot.waits if wait[0] == "alice"]
