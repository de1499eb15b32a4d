"""Cross-process figures, each as a ratio against a baseline measured in the same run.

    python3 scripts/uv run python benchmarks/bench_crossproc.py [--quick]

1. Deadlock resolution through the lock directory: from the call that closes a two-agent
   cycle to the victim's lock_acquire returning the `deadlock` result, with the monitor
   (`CrossProcessMonitor.run`) and the victim's `FileVictimNotices` woken by inotify, against
   the same with inotify disabled (polling every 0.5 s, the monitor's default fallback).
   Everything goes through the disk exactly as across processes; the agents and the monitor
   share one process only to keep the clock common.
2. A lock_acquire + lock_release round trip through `lockyard serve` (stdio MCP, a separate
   process) against the same two calls through the in-process server (MCP in memory).
3. The cost of one monitor pass (read, rebuild, search; no deadlock) for 10, 100 and 500 held
   locks with a waiter on every tenth, against the floor: the store's own `snapshot()`.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from lockyard.infra.crossproc.monitor_loop import CrossProcessMonitor
from lockyard.infra.crossproc.notices import FileVictimNotices
from lockyard.infra.crossproc.state import WaitForReader
from lockyard.infra.lockstore.lockdir.store import LockStore
from lockyard.infra.tools.lock_tools import LockTools
from lockyard.infra.transports.sdk.server import create_locking_mcp_server

POLL_SECONDS = 0.5
LOCKYARD = str(Path(sys.executable).parent / "lockyard")


async def one_deadlock(root: Path, round_no: int) -> float:
    repo = root / f"repo{round_no}"
    repo.mkdir()
    lock_dir = root / f"locks{round_no}"
    store = LockStore(str(repo), lock_dir)
    state = WaitForReader(store)
    a, b = (
        LockTools(
            store,
            name,
            victim_notices=FileVictimNotices(
                lock_dir, state.still_waiting, poll_interval=POLL_SECONDS
            ),
        )
        for name in ("a", "b")
    )
    await a.acquire({"filepaths": ["f1"]})
    await b.acquire({"filepaths": ["f2"]})
    monitor = CrossProcessMonitor(lock_dir)
    elapsed = 0.0
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: monitor.run(lambda _r: None, poll_interval=POLL_SECONDS))
        group.start_soon(a.acquire, {"filepaths": ["f2"], "timeout_seconds": 30})
        while not store.waiters("f2"):  # noqa: ASYNC110 - a is queued on disk, no event
            await anyio.sleep(0.001)
        await anyio.sleep(0.05)  # let the monitor settle: only the closing call is timed
        start = time.perf_counter()
        outcome = await b.acquire({"filepaths": ["f1"], "timeout_seconds": 30})
        elapsed = time.perf_counter() - start
        assert "deadlock" in outcome.text, outcome.text
        group.cancel_scope.cancel()
    store.close()
    return elapsed


async def deadlock_latencies(rounds: int, polling: bool) -> list[float]:
    if polling:
        os.environ["LOCKYARD_NO_INOTIFY"] = "1"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            await one_deadlock(Path(tmp), -1)  # warm-up: imports, first inotify instances
            return [await one_deadlock(Path(tmp), i) for i in range(rounds)]
    finally:
        os.environ.pop("LOCKYARD_NO_INOTIFY", None)


async def round_trips(client: Client, rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        await client.call_tool("lock_acquire", {"filepaths": ["f"], "timeout_seconds": 0})
        await client.call_tool("lock_release", {"all": True})
        times.append(time.perf_counter() - start)
    return times


async def serve_latencies(rounds: int) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        local = create_locking_mcp_server("a", str(repo), lock_dir=Path(tmp) / "l1")
        async with Client(local["instance"], mode="legacy") as client:
            in_process = await round_trips(client, rounds)
        params = StdioServerParameters(
            command=LOCKYARD,
            args=["serve", "--agent-id", "a", "--repo", str(repo), "--log-level", "ERROR"],
            env={"LOCKYARD_LOCK_DIR": str(Path(tmp) / "l2"), "PATH": os.environ["PATH"]},
        )
        async with Client(params) as client:
            stdio = await round_trips(client, rounds)
    return in_process, stdio


async def pass_costs(lock_counts: tuple[int, ...], repeats: int) -> list[tuple[int, float, float]]:
    rows = []
    for count in lock_counts:
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "repo"
            repo.mkdir()
            store = LockStore(str(repo), Path(tmp) / "locks")
            for i in range(count):
                store.try_lock(f"f{i}", f"agent{i % 50}")
            waits = [(f"f{i}", f"agent{(i + 1) % 50}") for i in range(0, count, 10)]
            async with anyio.create_task_group() as group:
                for path, agent in waits:
                    group.start_soon(store.acquire_async, path, agent, 60)
                while len(store.snapshot().waits) < len(waits):  # noqa: ASYNC110 - on disk
                    await anyio.sleep(0.01)
                monitor = CrossProcessMonitor(Path(tmp) / "locks", resolve=False)
                await monitor.check_once()
                floor = best_of(repeats, store.snapshot)
                pass_time: list[float] = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    await monitor.check_once()
                    pass_time.append(time.perf_counter() - start)
                rows.append((count, floor, min(pass_time)))
                group.cancel_scope.cancel()
            store.close()
    return rows


def best_of(repeats: int, run: object) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()  # type: ignore[operator]
        best = min(best, time.perf_counter() - start)
    return best


def ms(values: list[float], q: float = 0.5) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def main(quick: bool) -> None:
    logging.getLogger("lockyard").setLevel(logging.ERROR)  # the monitor logs each deadlock
    push = await deadlock_latencies(5 if quick else 20, polling=False)
    poll = await deadlock_latencies(3 if quick else 8, polling=True)
    print("deadlock resolution through the lock directory (cycle closed -> victim told)")
    print(f"  {'':24}{'median':>10}{'p90':>10}{'n':>5}")
    for name, values in (("push (inotify)", push), (f"polling {POLL_SECONDS:g} s", poll)):
        print(f"  {name:24}{ms(values):>8.1f}ms{ms(values, 0.9):>8.1f}ms{len(values):>5}")
    print(f"  push is {statistics.median(poll) / statistics.median(push):.0f}x faster (median)")

    in_process, stdio = await serve_latencies(50 if quick else 300)
    print("\nlock_acquire + lock_release round trip")
    for name, values in (("in-process MCP", in_process), ("lockyard serve (stdio)", stdio)):
        print(f"  {name:24}{ms(values):>8.2f}ms{ms(values, 0.9):>8.2f}ms{len(values):>5}")
    ratio = statistics.median(stdio) / statistics.median(in_process)
    print(f"  stdio costs {ratio:.1f}x the in-process round trip (median)")

    print("\nmonitor pass (no deadlock), best of runs, against store.snapshot()")
    print(f"  {'locks':>6}{'snapshot':>12}{'pass':>12}{'ratio':>8}")
    for count, floor, pass_time in await pass_costs((10, 100, 500), 3 if quick else 10):
        print(f"  {count:>6}{floor * 1000:>10.2f}ms{pass_time * 1000:>10.2f}ms"
              f"{pass_time / floor:>7.2f}x")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    anyio.run(main, parser.parse_args().quick)
