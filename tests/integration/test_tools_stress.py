"""Many agents, random lock sets, random timeouts and cancellations: store and monitor agree.

The tool layer's promise to the monitor is that every hold and wait it reports is true and
every one that ends is reported as ended. Random interleavings (including deadlocks, which the
monitor resolves through the tools, and calls cancelled at random moments) must leave the
monitor's picture equal to the lock store's, with no wait edge behind, and no two agents ever
inside one file at once.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import anyio
import pytest

from lockyard.infra.agent_runtime import LockCoordinator
from lockyard.infra.tools.lock_tools import LockTools

AGENTS = 6
ROUNDS = 30
FILES = [f"f{i}.py" for i in range(4)]


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_random_interleavings_keep_store_and_monitor_in_agreement(
    tmp_path: Path, seed: int
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in FILES:
        (repo / name).write_text("")
    coordinator = LockCoordinator(repo, tmp_path / "locks")
    store, monitor = coordinator.store, coordinator.monitor
    inside: dict[str, str] = {}  # file -> agent currently "editing" it
    overlaps: list[str] = []

    async def agent(index: int) -> None:
        rng = random.Random(seed * 100 + index)
        runtime = coordinator.runtime(f"agent-{index}")
        tools: LockTools = runtime.tools
        async with runtime:
            for _ in range(ROUNDS):
                wanted = rng.sample(FILES, rng.randint(1, 3))
                # The prompt's protocol: take what is free, then wait for the rest while
                # holding it (hold-and-wait: this is where deadlocks come from).
                first = json.loads(
                    (await tools.acquire({"filepaths": wanted, "timeout_seconds": 0})).text
                )
                mine = [r["filepath"] for r in first["results"] if r["acquired"]]
                missing = [r["filepath"] for r in first["results"] if not r["acquired"]]
                if missing:
                    timeout = rng.choice([0.05, 0.2, 1.0, 5.0])
                    cancel_after = rng.choice([None, None, None, 0.01, 0.1])
                    outcome = None
                    with anyio.move_on_after(cancel_after if cancel_after is not None else 60):
                        outcome = await tools.acquire(
                            {"filepaths": missing, "timeout_seconds": timeout}
                        )
                    if outcome is None:
                        # Cancelled: a deadlock victim gives way even so, releasing all its
                        # locks, and the agent never saw the result that says so.
                        mine = [key for key in mine if store.holder(key) == runtime.agent_id]
                    else:
                        result = json.loads(outcome.text)
                        if "deadlock" in result:
                            mine = []  # all our locks were released for us
                        mine += [r["filepath"] for r in result["results"] if r["acquired"]]
                for key in mine:
                    assert store.holder(key) == runtime.agent_id
                    if key in inside:
                        overlaps.append(key)
                    inside[key] = runtime.agent_id
                await anyio.sleep(0.002 + rng.random() * 0.01)  # "edit"
                for key in mine:
                    inside.pop(key, None)
                if rng.random() < 0.5:
                    await tools.release({"all": True})
                else:
                    await tools.release({"filepaths": mine or wanted})

            # Quiescent for this agent: what the monitor believes it holds is what it holds.
            believed = {k for k, v in monitor.snapshot().holds.items() if v == runtime.agent_id}
            actual = {
                info.lock_path
                for info in store.list_locks()
                if info.holder is not None and info.holder.agent_id == runtime.agent_id
            }
            assert believed == actual

    with anyio.fail_after(120):
        async with anyio.create_task_group() as group:
            for index in range(AGENTS):
                group.start_soon(agent, index)

    assert overlaps == []
    assert store.list_locks() == []
    snapshot = monitor.snapshot()
    assert snapshot.holds == {}
    assert snapshot.waits == ()
    assert snapshot.agents == ()
