"""A deadlock through a directory or glob lock is found when the wait begins, not at the
coordinator's next resync with the store: the tools report a wait edge to each directory or
glob lock over a blocked file, and to each hold below a blocked directory or glob.

Real agents of one `LockCoordinator` on a real lock directory, its resync an hour apart: each
cycle is resolved in seconds, so by the edges of the wait itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from lockstore_support import until_waiting
from tool_support import data

from lockyard.infra.agent_runtime import LockCoordinator
from lockyard.infra.tools.scope_waits import scope_blockers

pytestmark = pytest.mark.anyio

NO_RESYNC = 3600.0


@pytest.fixture
def tree(repo: Path) -> Path:
    (repo / "src" / "api").mkdir(parents=True)
    for name in ("src/api/routes.py", "src/models.py"):
        (repo / name).write_text("")
    return repo


async def deadlock(
    tree: Path, lock_dir: Path, alice_holds: str, bob_wants: str
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Alice holds `alice_holds`, Bob src/models.py; Alice waits for src/models.py, then Bob
    asks for `bob_wants`, which waits for Alice's hold. Both results, and the locks Bob's
    wait was blocked by as the tools saw them."""
    results: dict[str, dict[str, Any]] = {}
    with anyio.fail_after(20):  # a resync would come after an hour
        async with LockCoordinator(tree, lock_dir, resync_interval=NO_RESYNC) as coordinator:
            store = coordinator.store
            alice, bob = coordinator.runtime("alice"), coordinator.runtime("bob")
            assert data(await alice.tools.acquire({"filepaths": [alice_holds]}))["all_acquired"]
            assert data(await bob.tools.acquire({"filepaths": ["src/models.py"]}))["all_acquired"]
            blockers = scope_blockers(store, "bob", [store.canonicalize(bob_wants)], "exclusive")

            async def wants(name: str, path: str) -> None:
                runtime = alice if name == "alice" else bob
                arguments = {"filepaths": [path], "timeout_seconds": 60}
                results[name] = data(await runtime.tools.acquire(arguments))

            async with anyio.create_task_group() as group:
                group.start_soon(wants, "alice", "src/models.py")
                await until_waiting(store, "src/models.py", "alice")
                group.start_soon(wants, "bob", bob_wants)
    return results, blockers


def given_way(results: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    [(victim, result)] = [(name, r) for name, r in results.items() if "deadlock" in r]
    return victim, result["deadlock"]


@pytest.mark.parametrize(
    ("alice_holds", "bob_wants", "through"),
    [
        ("src/api/routes.py", "src/api/", "src/api/routes.py"),  # a directory, a hold below
        ("src/api/", "src/api/routes.py", "src/api/"),  # a file under a directory lock
        ("src/api/*.py", "src/api/routes.py", "src/api/*.py"),  # a file a glob lock matches
        ("src/api/routes.py", "src/api/*.py", "src/api/routes.py"),  # a glob, a hold it matches
    ],
)
async def test_a_cycle_through_a_scope_is_resolved_at_the_wait(
    tree: Path, lock_dir: Path, alice_holds: str, bob_wants: str, through: str
) -> None:
    results, blockers = await deadlock(tree, lock_dir, alice_holds, bob_wants)
    assert blockers == [through]
    victim, cycle = given_way(results)
    steps = {(step["agent"], step["waits_for"], step["held_by"]) for step in cycle["cycle"]}
    assert ("alice", "src/models.py", "bob") in steps
    assert ("bob", through, "alice") in steps
    winner = "bob" if victim == "alice" else "alice"
    assert results[winner]["all_acquired"] is True


def test_no_edge_for_ones_own_scope_or_a_reader_beside_a_reader(tree: Path, lock_dir: Path) -> None:
    coordinator = LockCoordinator(tree, lock_dir)
    store = coordinator.store
    assert store.try_lock("src/api/", "alice", mode="shared")
    assert scope_blockers(store, "alice", ["src/api/routes.py"], "exclusive") == []
    assert scope_blockers(store, "bob", ["src/api/routes.py"], "shared") == []
    assert scope_blockers(store, "bob", ["src/api/routes.py"], "exclusive") == ["src/api/"]
    assert scope_blockers(store, "bob", ["src/models.py"], "exclusive") == []
