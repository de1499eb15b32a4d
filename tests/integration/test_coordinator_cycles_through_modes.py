"""The in-process coordinator resolves deadlocks that run through a reader's shared hold or
through a directory lock waiting for the holds below it, as the cross-process monitor does.

Both cycles are real: two agents of one `LockCoordinator` on a real lock directory (and the
reader's on PostgreSQL too), each
waiting in `lock_acquire`; one is chosen, told through its call's `deadlock` result, and the
other then gets what it waited for. The tools' events carry a reader's grant and a
directory's wait for the holds below it, so both are found at the wait
(test_coordinator_scope_waits.py shows it with no resync); here a resync runs as well.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from lockstore_support import until_waiting
from tool_support import data

from lockyard.domain.graph import Cycle
from lockyard.domain.victim import AgentInfo
from lockyard.infra.agent_runtime import LockCoordinator

pytestmark = pytest.mark.anyio


def bob_gives_way(cycle: Cycle, agents: Mapping[str, AgentInfo]) -> str:
    return "bob"


@pytest.fixture
def tree(repo: Path) -> Path:
    (repo / "src" / "api").mkdir(parents=True)
    for name in ("src/api/routes.py", "src/models.py"):
        (repo / name).write_text("")
    return repo


async def _deadlock(
    coordinator: LockCoordinator, alice_first: dict[str, Any], bob_last: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Alice holds `alice_first`, Bob holds src/models.py; Alice waits for src/models.py,
    then Bob asks for `bob_last` (which waits for Alice): both calls' results."""
    store = coordinator.store
    alice, bob = coordinator.runtime("alice"), coordinator.runtime("bob")
    assert data(await alice.tools.acquire(alice_first))["all_acquired"]
    assert data(await bob.tools.acquire({"filepaths": ["src/models.py"]}))["all_acquired"]
    results: dict[str, dict[str, Any]] = {}

    async def wants(name: str, arguments: dict[str, Any]) -> None:
        runtime = alice if name == "alice" else bob
        results[name] = data(await runtime.tools.acquire({**arguments, "timeout_seconds": 60}))

    async with anyio.create_task_group() as group:
        group.start_soon(wants, "alice", {"filepaths": ["src/models.py"]})
        await until_waiting(store, "src/models.py", "alice")
        group.start_soon(wants, "bob", bob_last)
    return results


@pytest.mark.parametrize("backend", ["file", "postgres"])
async def test_a_cycle_through_a_readers_shared_hold_is_resolved_in_process(
    tree: Path, lock_dir: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    spec = str(lock_dir) if backend == "file" else str(request.getfixturevalue("pg_backend"))
    with anyio.fail_after(30):
        async with LockCoordinator(tree, backend=spec, victim_policy=bob_gives_way) as coordinator:
            results = await _deadlock(
                coordinator,
                {"filepaths": ["src/api/routes.py"], "mode": "shared"},
                {"filepaths": ["src/api/routes.py"]},
            )
            assert coordinator.store.holder("src/models.py") == "alice"
    deadlock = results["bob"]["deadlock"]
    assert deadlock["victim"] == "bob"
    assert {(step["agent"], step["held_by"]) for step in deadlock["cycle"]} == {
        ("alice", "bob"),
        ("bob", "alice"),
    }
    assert deadlock["released"] == ["src/models.py"]
    assert results["alice"]["all_acquired"] is True


async def test_a_cycle_through_a_directory_waiting_for_holds_below_is_resolved_in_process(
    tree: Path, lock_dir: Path
) -> None:
    with anyio.fail_after(30):
        async with LockCoordinator(
            tree, lock_dir, victim_policy=bob_gives_way, resync_interval=0.1
        ) as coordinator:
            results = await _deadlock(
                coordinator, {"filepaths": ["src/api/routes.py"]}, {"filepaths": ["src/api/"]}
            )
            assert coordinator.store.holder("src/models.py") == "alice"
    deadlock = results["bob"]["deadlock"]
    assert deadlock["victim"] == "bob"
    assert {(step["agent"], step["held_by"]) for step in deadlock["cycle"]} == {
        ("alice", "bob"),
        ("bob", "alice"),
    }
    assert results["alice"]["all_acquired"] is True
