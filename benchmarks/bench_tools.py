"""What the agent tools add on top of the lock store, measured against the store in the same run.

1. Uncontended cycle: lock + unlock one file.
   - baseline: `store.try_lock` + `store.release`;
   - `LockTools.acquire` + `LockTools.release` (validation, canonical keys, events to a monitor);
   - the same two tools over the MCP protocol in memory (`mcp.Client(..., mode="legacy")`, the
     JSON-RPC path the CLI drives).
2. Handoff: an agent blocked in `lock_acquire` while the holder releases.
   - baseline: a task blocked in `store.acquire_async`, woken by `store.release`;
   - a task blocked in `LockTools.acquire`, woken by `LockTools.release` (with the monitor).
   Time from the release call to the waiter's return.
3. Deadlock: two agents, each holding one file, each asking for the other's. Time from the
   call that closes the cycle to the victim's `lock_acquire` returning the deadlock result
   (detection, victim choice, verification against the store, release of the victim's lock).

Figures are medians (and p99 for handoffs) in microseconds and ratios against the baseline of
the same run, so a busy machine shifts both sides alike. Run it:

    python3 scripts/uv run python benchmarks/bench_tools.py            # full run (~20 s)
    python3 scripts/uv run python benchmarks/bench_tools.py --quick
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from mcp import Client

from lockyard.infra.agent_runtime import LockCoordinator
from lockyard.infra.tools.lock_tools import LockTools
from lockyard.infra.transports.sdk.server import create_locking_mcp_server


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def p99_us(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e6


async def timed(repeat: int, step: Callable[[], Awaitable[None]]) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await step()
        samples.append(time.perf_counter() - start)
    return samples


async def uncontended(coordinator: LockCoordinator, repeat: int) -> dict[str, list[float]]:
    store = coordinator.store
    coordinator.monitor.register_agent("bench")
    tools = LockTools(store, "bench", coordinator.monitor.handle_event, coordinator.monitor)

    async def raw() -> None:
        store.try_lock("a.py", "bench")
        store.release("a.py", "bench")

    async def direct() -> None:
        await tools.acquire({"filepaths": ["a.py"], "timeout_seconds": 0})
        await tools.release({"filepaths": ["a.py"]})

    config = create_locking_mcp_server(
        "bench-mcp",
        store.namespace,
        coordinator.monitor.handle_event,
        store=store,
        victim_notices=coordinator.monitor,
    )
    async with Client(config["instance"], mode="legacy") as client:

        async def over_mcp() -> None:
            await client.call_tool("lock_acquire", {"filepaths": ["a.py"], "timeout_seconds": 0})
            await client.call_tool("lock_release", {"filepaths": ["a.py"]})

        for step in (raw, direct, over_mcp):  # warm up
            await timed(20, step)
        return {
            "store try_lock + release (baseline)": await timed(repeat, raw),
            "LockTools acquire + release": await timed(repeat, direct),
            "lock tools over MCP (in memory)": await timed(repeat, over_mcp),
        }


async def handoffs(coordinator: LockCoordinator, repeat: int) -> dict[str, list[float]]:
    store, monitor = coordinator.store, coordinator.monitor
    for agent in ("holder", "waiter"):
        monitor.register_agent(agent)
    holder = LockTools(store, "holder", monitor.handle_event, monitor)
    waiter = LockTools(store, "waiter", monitor.handle_event, monitor)

    async def one(use_tools: bool) -> float:
        assert store.try_lock("b.py", "holder")
        returned = anyio.Event()
        ended: list[float] = []

        async def wait() -> None:
            if use_tools:
                await waiter.acquire({"filepaths": ["b.py"], "timeout_seconds": 30})
            else:
                await store.acquire_async("b.py", "waiter", 30)
            ended.append(time.perf_counter())
            returned.set()

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            while not store.waiters("b.py"):  # noqa: ASYNC110 - the queue entry is on disk
                await anyio.sleep(0.001)
            start = time.perf_counter()
            if use_tools:
                await holder.release({"filepaths": ["b.py"]})
            else:
                store.release("b.py", "holder")
            await returned.wait()
        store.release("b.py", "waiter")
        return ended[0] - start

    results: dict[str, list[float]] = {"store acquire_async (baseline)": [], "lock_acquire": []}
    for _ in range(repeat):
        results["store acquire_async (baseline)"].append(await one(False))
        results["lock_acquire"].append(await one(True))
    return results


async def _ask(tools: LockTools, path: str, finished: dict[str, float]) -> None:
    outcome = await tools.acquire({"filepaths": [path], "timeout_seconds": 30})
    assert outcome.data is not None
    if "deadlock" in outcome.data:
        finished["victim"] = time.perf_counter()


async def deadlocks(repo: Path, lock_root: Path, repeat: int) -> list[float]:
    samples = []
    for round_ in range(repeat):
        coordinator = LockCoordinator(repo, lock_root / f"dl-{round_}")
        store, monitor = coordinator.store, coordinator.monitor
        for agent in ("alice", "bob"):
            monitor.register_agent(agent)
        alice = LockTools(store, "alice", monitor.handle_event, monitor)
        bob = LockTools(store, "bob", monitor.handle_event, monitor)
        await alice.acquire({"filepaths": ["a.py"]})
        await bob.acquire({"filepaths": ["b.py"]})
        finished: dict[str, float] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(_ask, alice, "b.py", finished)
            while not store.waiters("b.py"):  # noqa: ASYNC110 - the queue entry is on disk
                await anyio.sleep(0.001)
            start = time.perf_counter()
            group.start_soon(_ask, bob, "a.py", finished)
        samples.append(finished["victim"] - start)
        store.cleanup_agent_locks("alice")
        store.cleanup_agent_locks("bob")
    return samples


async def main(quick: bool) -> None:
    logging.disable(logging.WARNING)
    repeat = 200 if quick else 1000
    handoff_repeat = 50 if quick else 200
    deadlock_repeat = 20 if quick else 100
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        for name in ("a.py", "b.py"):
            (repo / name).write_text("")
        coordinator = LockCoordinator(repo, Path(tmp) / "locks")

        print(f"1. Uncontended lock + unlock of one file ({repeat} cycles, median)")
        rows = await uncontended(coordinator, repeat)
        base = statistics.median(next(iter(rows.values())))
        for label, samples in rows.items():
            ratio = statistics.median(samples) / base
            print(f"   {label:40s} {median_us(samples):9.1f} us   {ratio:6.1f}x")

        print(f"\n2. Handoff to a blocked waiter ({handoff_repeat} handoffs)")
        rows = await handoffs(coordinator, handoff_repeat)
        base = statistics.median(next(iter(rows.values())))
        for label, samples in rows.items():
            ratio = statistics.median(samples) / base
            print(
                f"   {label:40s} median {median_us(samples):8.1f} us  "
                f"p99 {p99_us(samples):8.1f} us   {ratio:6.1f}x"
            )

        print(f"\n3. Deadlock: cycle closed -> victim's lock_acquire returns ({deadlock_repeat})")
        samples = await deadlocks(repo, Path(tmp), deadlock_repeat)
        print(
            f"   {'2-agent cycle, soft resolution':40s} median {median_us(samples):8.1f} us  "
            f"p99 {p99_us(samples):8.1f} us"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    anyio.run(main, parser.parse_args().quick)
