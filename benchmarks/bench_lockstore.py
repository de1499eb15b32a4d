"""Lock store figures, each as a ratio against a baseline measured in the same run.

    python3 scripts/uv run python benchmarks/bench_lockstore.py [--quick] [--lock-dir DIR]

1. Uncontended acquire+release cycle (public API, path canonicalisation included) against the
   floor, raw os.mkdir+os.rmdir, and against filelock.FileLock. The lock key's computation
   (repository-relative `src/module.py`) and the cycle are also measured against the same
   store keyed by absolute paths (`/…/repo/src/module.py`, how keys were computed before
   they were repository-relative), as a ratio in the same run.
2. Cross-process handoff latency: one process releases, the queued waiter in another process
   acquires (push: inotify) against a waiter that polls every 100 ms (the ancestor's design).
   The holder releases only once the waiter sleeps in its wait, and, against the poller, at a
   uniformly random moment of its period (about half a period of waiting, as in real use).
3. In-process handoff latency: release in one task to acquire in a waiting task.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import filelock

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.errors import InvalidPathError, PathOutsideRepoError
from lockyard.infra.lockstore.lockdir.disk import default_lock_dir
from lockyard.infra.lockstore.paths import (
    MAX_PATH_CHARS,
    is_literal_key,
    resolve_entry,
    unescape_dollars,
    validate_path_text,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_peers import wait_until_asleep


def absolute_key(filepath: str, namespace: str) -> str:
    """The key computation of the absolute-path design: the resolved absolute path inside
    the repository directory (the baseline the repository-relative key is measured against)."""
    text = validate_path_text(filepath)
    if text.startswith("__") and is_literal_key(text):
        return text
    if text.startswith("/"):
        joined = text
    elif namespace.endswith("/"):
        joined = namespace + text
    else:
        joined = f"{namespace}/{text}"
    key, is_dir = resolve_entry(unescape_dollars(joined))
    if not (key == namespace or key.startswith(namespace.rstrip("/") + "/")):
        raise PathOutsideRepoError(f"{text!r} is outside {namespace!r}")
    if is_dir:
        raise InvalidPathError(f"{text!r} is a directory")
    if len(key) > MAX_PATH_CHARS:
        raise InvalidPathError(f"{text!r} is too long")
    return key


class AbsoluteKeyStore(LockStore):
    """The same store with absolute-path keys: the cycle's baseline."""

    def canonicalize(self, filepath: str) -> str:
        return absolute_key(filepath, self.root)


def per_op_us(run: Callable[[int], None], iterations: int, repeats: int = 5) -> float:
    """Best-of-`repeats` mean microseconds per iteration (the machine is shared and noisy)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run(iterations)
        best = min(best, (time.perf_counter() - start) / iterations * 1e6)
    return best


def bench_cycle(base: Path, iterations: int) -> list[tuple[str, float]]:
    repo = base / "repo"
    (repo / "src").mkdir(parents=True, exist_ok=True)
    (repo / "src" / "module.py").touch()  # agents lock files that exist
    store = LockStore(repo, base / "locks")
    absolute = AbsoluteKeyStore(repo, base / "locks")
    raw = str(base / "locks" / "raw.lock")
    file_lock = filelock.FileLock(str(base / "locks" / "flock.lock"))

    def raw_cycle(n: int) -> None:
        for _ in range(n):
            os.mkdir(raw)
            os.rmdir(raw)

    def store_cycle(n: int) -> None:
        for _ in range(n):
            store.try_lock("src/module.py", "bench")
            store.release("src/module.py", "bench")

    def filelock_cycle(n: int) -> None:
        for _ in range(n):
            file_lock.acquire()
            file_lock.release()

    def absolute_cycle(n: int) -> None:
        for _ in range(n):
            absolute.try_lock("src/module.py", "bench")
            absolute.release("src/module.py", "bench")

    def canonicalize_only(n: int) -> None:
        for _ in range(n):
            store.canonicalize("src/module.py")

    def absolute_key_only(n: int) -> None:
        root = store.root
        for _ in range(n):
            absolute_key("src/module.py", root)

    assert store.canonicalize("src/module.py") == "src/module.py"
    assert absolute.canonicalize("src/module.py") == f"{store.root}/src/module.py"
    floor = per_op_us(raw_cycle, iterations)
    return [
        ("raw os.mkdir + os.rmdir (floor)", floor),
        ("LockStore try_lock + release", per_op_us(store_cycle, iterations)),
        ("  the same, keyed by absolute paths", per_op_us(absolute_cycle, iterations)),
        ("  of which path canonicalisation x2", 2 * per_op_us(canonicalize_only, iterations)),
        ("  absolute-path key x2 (before)", 2 * per_op_us(absolute_key_only, iterations)),
        ("filelock.FileLock acquire + release", per_op_us(filelock_cycle, iterations)),
    ]


def _player(
    repo: str,
    lock_dir: str,
    me: str,
    other: str,
    starts_holding: bool,
    rounds: int,
    push: bool,
    poll_ms: float,
    pids: Any,
    ready: multiprocessing.synchronize.Barrier,
    results: multiprocessing.queues.Queue[tuple[str, list[int], list[int]]],
) -> None:
    store = LockStore(repo, lock_dir, use_inotify=push)
    path = "shared.py"
    if starts_holding:
        assert store.try_lock(path, me)
    ready.wait()
    other_pid = pids[1] if me == "a" else pids[0]
    rng = random.Random(me)
    releases: list[int] = []
    acquires: list[int] = []
    holding = starts_holding
    for _ in range(rounds):
        if holding:
            while not any(w.agent_id == other for w in store.waiters(path)):
                time.sleep(0.0002)
            # Released the moment the waiter queued, a poller would find the lock free at its
            # first look, before it ever sleeps: release once it sleeps in its wait, and
            # against a poller at a random moment of its period, as a real release falls.
            wait_until_asleep(other_pid)
            if not push:
                time.sleep(rng.random() * poll_ms / 1000)
            releases.append(time.monotonic_ns())
            store.release(path, me)
            holding = False
        else:
            assert store.acquire(path, me, timeout_seconds=60, poll_interval_ms=poll_ms)
            acquires.append(time.monotonic_ns())
            holding = True
    if holding:
        store.release(path, me)
    results.put((me, releases, acquires))


def bench_cross_process(base: Path, rounds: int, *, push: bool, poll_ms: float) -> list[float]:
    """Handoff latencies in microseconds (release in one process -> acquire in the other)."""
    context = multiprocessing.get_context("spawn")
    repo = base / "repo"
    repo.mkdir(exist_ok=True)
    lock_dir = base / ("locks-push" if push else "locks-poll")
    pids = context.Array("i", 2)
    ready = context.Barrier(3)
    results: multiprocessing.queues.Queue[tuple[str, list[int], list[int]]] = context.Queue()
    players = [
        context.Process(
            target=_player,
            args=(
                str(repo),
                str(lock_dir),
                me,
                other,
                me == "a",
                rounds,
                push,
                poll_ms,
                pids,
                ready,
                results,
            ),
        )
        for me, other in (("a", "b"), ("b", "a"))
    ]
    for player in players:
        player.start()
    for index, player in enumerate(players):
        pids[index] = player.pid or 0
    ready.wait()
    outcome = {me: (rel, acq) for me, rel, acq in (results.get() for _ in players)}
    for player in players:
        player.join()
    # Round r: a releases and b acquires when r is even; b releases and a acquires when odd.
    a_rel, a_acq = outcome["a"]
    b_rel, b_acq = outcome["b"]
    latencies = [(acq - rel) / 1000 for rel, acq in zip(a_rel, b_acq, strict=False)]
    latencies += [(acq - rel) / 1000 for rel, acq in zip(b_rel, a_acq, strict=False)]
    return latencies


def bench_in_process(base: Path, rounds: int) -> list[float]:
    repo = base / "repo"
    repo.mkdir(exist_ok=True)
    store = LockStore(repo, base / "locks-inproc")
    latencies: list[float] = []

    async def main() -> None:
        released_at = [0.0]

        async def waiter() -> None:
            assert await store.acquire_async("f.py", "waiter", timeout_seconds=10)
            latencies.append((time.perf_counter() - released_at[0]) * 1e6)
            store.release("f.py", "waiter")

        for _ in range(rounds):
            assert store.try_lock("f.py", "holder")

            async with anyio.create_task_group() as group:
                group.start_soon(waiter)
                while not store.waiters("f.py"):
                    await anyio.lowlevel.checkpoint()
                released_at[0] = time.perf_counter()
                store.release("f.py", "holder")

    anyio.run(main)
    return latencies


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    parser.add_argument(
        "--lock-dir",
        help="parent directory for the run (default: beside the default lock directory, so the "
        "figures are for the file system lockyard really uses)",
    )
    args = parser.parse_args()
    cycles, rounds, poll_rounds = (2000, 200, 10) if args.quick else (20000, 1000, 40)
    parent = args.lock_dir or str(default_lock_dir().parent)
    with tempfile.TemporaryDirectory(dir=parent, prefix="lockyard-bench-") as tmp:
        base = Path(tmp)
        python = sys.version.split()[0]
        print(f"lock store benchmark in {base} (python {python}, {os.cpu_count()} cpus)")
        print("\n1. uncontended cycle (best of 5 runs)")
        rows = bench_cycle(base, cycles)
        floor = rows[0][1]
        for label, value in rows:
            print(f"   {label:<40} {value:8.1f} us   {value / floor:5.2f}x floor")
        figures = dict(rows)
        key_ratio = (
            figures["  of which path canonicalisation x2"]
            / figures["  absolute-path key x2 (before)"]
        )
        cycle_ratio = (
            figures["LockStore try_lock + release"] / figures["  the same, keyed by absolute paths"]
        )
        print(f"   repository-relative key vs absolute-path key: {key_ratio:.2f}x (target <= 1.2x)")
        print(f"   cycle with relative keys vs absolute keys:    {cycle_ratio:.2f}x (target <= 1x)")
        print("\n2. cross-process handoff (release -> acquire in another process)")
        push = bench_cross_process(base, rounds, push=True, poll_ms=100)
        poll = bench_cross_process(base, poll_rounds, push=False, poll_ms=100)
        for label, values in (("push (inotify)", push), ("polling every 100 ms", poll)):
            print(
                f"   {label:<24} median {statistics.median(values):9.1f} us"
                f"   p99 {p99(values):9.1f} us   (n={len(values)})"
            )
        print(
            f"   push is {statistics.median(poll) / statistics.median(push):.0f}x faster"
            " than polling (median)"
        )
        print("\n3. in-process handoff (release -> acquire_async in another task)")
        inproc = bench_in_process(base, rounds)
        print(
            f"   median {statistics.median(inproc):7.1f} us   p99 {p99(inproc):7.1f} us"
            f"   (n={len(inproc)})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
