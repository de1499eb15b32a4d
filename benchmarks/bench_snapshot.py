"""What a whole-directory read costs: `snapshot()` against `list_locks()` (its floor: the
snapshot is built from the same single pass), for 10, 100 and 500 held locks with a queued
waiter on every tenth, best of several runs, on a real lock directory.

    python3 scripts/uv run python benchmarks/bench_snapshot.py [--quick]

Printed as milliseconds and as the ratio snapshot / list_locks (1.0: no second pass).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from lockyard.infra.lockstore.lockdir.store import LockStore


def best_of(repeats: int, call: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


async def measure(root: Path, locks: int, repeats: int) -> tuple[float, float]:
    repo = root / f"repo{locks}"
    repo.mkdir()
    store = LockStore(str(repo), root / f"locks{locks}")
    names = [f"f{i}.py" for i in range(locks)]
    for name in names:
        assert store.try_lock(name, "holder")
    waited = names[::10]
    async with anyio.create_task_group() as group:
        for name in waited:
            group.start_soon(store.acquire_async, name, f"w-{name}", 600.0)
        while len(store.snapshot().waits) < len(waited):  # noqa: ASYNC110 - on disk
            await anyio.sleep(0.01)
        listing = best_of(repeats, store.list_locks)
        snapshot = best_of(repeats, store.snapshot)
        group.cancel_scope.cancel()
    return listing, snapshot


async def main(quick: bool) -> None:
    repeats = 5 if quick else 30
    print("whole-directory reads, best of runs (ms)")
    print(f"  {'locks':>6}{'list_locks':>12}{'snapshot':>12}{'ratio':>8}")
    with tempfile.TemporaryDirectory() as scratch:
        for locks in (10, 100, 500):
            listing, snapshot = await measure(Path(scratch), locks, repeats)
            print(
                f"  {locks:>6}{listing * 1e3:>12.2f}{snapshot * 1e3:>12.2f}"
                f"{snapshot / listing:>8.2f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    anyio.run(main, parser.parse_args().quick)
