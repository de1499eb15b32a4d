"""What each wake-up mechanism of the lock directory buys, on the figure it was built for.

Every figure is measured with every mechanism on and again with one mechanism switched off,
in fresh processes (the switch is applied in the measuring process and in every process it
starts), runs of all switches interleaved, repeated; printed as the median over the repeats
of each run's ratio against the all-on run next to it. A ratio of 1.30x means the figure is
30% worse without the mechanism: that is what it buys.

    python3 scripts/uv run python benchmarks/bench_wakeups.py \
        [--repeats N] [--quick] [--only FIGURE] [--every-figure] [--dir DIR]

Figures (lower is better):
- inproc: release -> grant median, two anyio tasks of one process (bench_peers' handoff);
- inqueue: wall time per handoff while N tasks of one process drain one lock (bench_peers);
- queues: wall time per handoff while N waiters in 50 processes drain one lock (bench_peers'
  long queue across processes, the figure entry watches were built for);
- crossproc: release -> grant median, two processes (bench_peers' handoff, `lockyard async`);
- reclaim: SIGKILL of a holder in another process -> grant to the waiter (head) here, median;
- drain: CPU (user + system) the waiting processes spend per handoff while N waiters, two a
  process, drain one lock, each releasing at once;
- idle: CPU per second of N waiters spread over M processes asleep behind a lock nobody
  releases (nobody moves: their re-checks are all they cost).

Switches (`--off NAME` in a measuring process): `topics` (no in-process notification: every
waiter follows others of its process as it follows other processes), `accept` (a release
does not accept for a head asleep in its process), `doorbells`, `entry-watches` (waiters watch
the queue directory, not their predecessor's entry), `inotify` (LOCKYARD_NO_INOTIFY=1: no
inotify, no pidfds: polling), `pidfds`, `deep-backstops` (every pushed waiter re-checks at the
backstop), `stamp-shortcut` (a stamped turn does not tell a waiter that everyone ahead left).
The last two were once judged on short queues (24 waiters), where they bought under 20%, and
removed; `bench_peers --only queues` (1,000 waiters) then regressed 10-19x. What they buy
grows with the queue's length: `inqueue` and `queues` are measured with 1,000 waiters for that.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import multiprocessing.context
import multiprocessing.synchronize
import os
import queue
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

import bench_peers
from bench_peers import KEY, WAIT_TIMEOUT, Place

OFF_ENV = "LOCKYARD_BENCH_WAKEUPS_OFF"
"""The switch of the measuring process, inherited by every process it starts."""

JUDGED = {
    "topics": ("inproc", "inqueue"),
    "accept": ("inproc",),
    "doorbells": ("crossproc",),
    "inotify": ("crossproc",),
    "pidfds": ("reclaim",),
    "entry-watches": ("drain", "queues"),
    "stamp-shortcut": ("drain", "inqueue", "queues"),
    "deep-backstops": ("idle",),
}
"""Each mechanism's figures: what it was built for (see docs/lock-store.md)."""
FIGURES = ("inproc", "inqueue", "queues", "crossproc", "reclaim", "drain", "idle")
WORTH = 1.20
"""A mechanism earns its place when its figure is at least 20% worse without it."""


# -- switches ---------------------------------------------------------------------------------


def switch_off(name: str) -> None:
    """Switch mechanism `name` off in this process (and in the processes it forks)."""
    from lockyard.infra.lockstore.lockdir import line, operations, sleep

    hub = sleep.WakeHub
    if name == "topics":
        operations.DiskOperations.lock_changed = lambda self, name: None  # type: ignore[method-assign]
        operations.DiskOperations.entry_gone = lambda self, name, entry: None  # type: ignore[method-assign]
        sleep.is_this_process = lambda pid, start_time: False  # type: ignore[assignment]
        sleep.AsleepHeads.is_asleep = lambda self, token: False  # type: ignore[method-assign]
    elif name == "accept":
        sleep.AsleepHeads.claim = lambda self, token: None  # type: ignore[method-assign]
    elif name == "doorbells":
        sleep.open_doorbell = lambda directory, name, token: None  # type: ignore[assignment]
    elif name == "entry-watches":
        hub.watch_entry = lambda self, path: False  # type: ignore[method-assign]
    elif name == "inotify":
        assert os.environ.get("LOCKYARD_NO_INOTIFY") == "1", "set before lockyard is imported"
    elif name == "pidfds":
        hub.watch_process = lambda self, pid: False  # type: ignore[method-assign]
    elif name == "deep-backstops":
        sleep.DEEP_BACKSTOP_FACTOR = 1  # type: ignore[misc]
    elif name == "stamp-shortcut":
        line._in_line = _in_line_without_shortcut  # type: ignore[assignment]
    elif name != "none":
        raise SystemExit(f"bench_wakeups: unknown switch {name!r}; one of {', '.join(JUDGED)}")


def _in_line_without_shortcut(ops: Any, place: Any) -> Any:
    """line._in_line without `ahead.clear()` on a changed turn stamp: the entries ahead are
    then found gone one read at a time."""
    if not place.entry:
        return False
    return bool((yield ops.bears, place.name, place.entry, place.token))


def mp_context() -> multiprocessing.context.ForkServerContext:
    """bench_peers' forkserver, preloading this script so that the switch reaches its
    children too."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["__main__", "lockyard.infra.lockstore.lockdir.store", "anyio"])
    return context


# -- the figures ------------------------------------------------------------------------------


def inproc(place: Place, size: int) -> float:
    latencies, _event = bench_peers.handoff_in_process(place, size)
    return statistics.median(latencies)


def inqueue(place: Place, size: int) -> float:
    per_handoff = bench_peers.drain_in_process(place, size, 600.0)
    if per_handoff is None:
        raise SystemExit("bench_wakeups: the in-process drain did not finish in 10 minutes")
    return per_handoff


def queues(place: Place, size: int) -> float:
    """Wall time per hand-off, `size` waiters in 50 processes (bench_peers' long queue)."""
    per_handoff = bench_peers.drain_processes(place, size, 50, 600.0)
    if per_handoff is None:
        raise SystemExit("bench_wakeups: the drain across processes did not finish in 10 minutes")
    return per_handoff


def crossproc(place: Place, size: int) -> float:
    return statistics.median(bench_peers.handoff_cross_process(place, "lockyard async", size))


def _hold_until_killed(base: str, held: multiprocessing.synchronize.Event) -> None:
    store = Place(base).store()
    assert store.try_lock(KEY, "holder")
    held.set()
    while True:
        time.sleep(60)


def reclaim(place: Place, size: int) -> float:
    """Median ns from a SIGKILL of the holder (another process) to the waiter's grant."""
    Path(place.repo, KEY).touch()
    store = place.store()
    context = mp_context()
    rng = random.Random(0)
    delays: list[float] = []
    for _ in range(size):
        held = context.Event()
        holder = context.Process(target=_hold_until_killed, args=(place.base, held))
        holder.start()
        assert held.wait(60)
        granted: list[int] = []

        def wait(granted: list[int] = granted) -> None:
            if store.acquire(KEY, "waiter", WAIT_TIMEOUT):
                granted.append(time.perf_counter_ns())

        waiter = threading.Thread(target=wait)
        waiter.start()
        while not store.waiters(KEY):
            time.sleep(0.001)
        # At a random phase of the waiter's re-checks (the backstop is 0.5 s).
        time.sleep(0.05 + rng.random() * 0.5)
        killed = time.perf_counter_ns()
        os.kill(holder.pid or 0, signal.SIGKILL)
        holder.join()  # reaped at once, as a parent of an agent would
        waiter.join()
        assert granted, "the waiter did not get the lock"
        delays.append(float(granted[0] - killed))
        store.release(KEY, "waiter")
    return statistics.median(delays)


def _queue_worker(
    base: str,
    first: int,
    count: int,
    go: multiprocessing.synchronize.Event,
    results: multiprocessing.Queue[tuple[int, float]],
) -> None:
    """`count` tasks wait on the lock, each releasing at once when granted; reports how many
    got it and this process's CPU seconds (from its start: the queueing is the same for
    every switch)."""
    store = Place(base).store()
    grants = [0]

    async def one(agent: str) -> None:
        if await store.acquire_async(KEY, agent, WAIT_TIMEOUT):
            grants[0] += 1
            store.release(KEY, agent)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for index in range(first, first + count):
                group.start_soon(one, f"waiter-{index}")

    go.wait()
    anyio.run(main)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    results.put((grants[0], usage.ru_utime + usage.ru_stime))


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as file:
        fields = file.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _queued(place: Place, waiters: int, processes: int, quiet: float) -> tuple[float, float]:
    """`waiters` waiters in `processes` processes queue on a lock held here; after `quiet`
    seconds of everyone asleep (their CPU per second over it measured, from /proc), the lock
    is released and they drain it: (idle CPU seconds per second, drain CPU seconds per
    handoff)."""
    Path(place.repo, KEY).touch()
    store = place.store()
    assert store.try_lock(KEY, "holder")
    context = mp_context()
    go = context.Event()
    results: multiprocessing.Queue[tuple[int, float]] = context.Queue()
    shares = [waiters // processes + (i < waiters % processes) for i in range(processes)]
    workers = [
        context.Process(
            target=_queue_worker, args=(place.base, sum(shares[:i]), share, go, results)
        )
        for i, share in enumerate(shares)
    ]
    for worker in workers:
        worker.start()
    try:
        go.set()
        while len(store.waiters(KEY)) < waiters:
            time.sleep(0.05)
        time.sleep(1.0)  # every waiter settled into its sleep
        pids = [worker.pid or 0 for worker in workers]
        before, started = sum(map(_cpu_seconds, pids)), time.monotonic()
        time.sleep(quiet)
        idle_cpu = sum(map(_cpu_seconds, pids)) - before
        quiet_seconds = time.monotonic() - started
        store.release(KEY, "holder")
        outcome = [results.get(timeout=600) for _ in workers]
        assert sum(count for count, _cpu in outcome) == waiters
        # /proc counts CPU in clock ticks: an idle figure under one tick reads as one tick,
        # so two unmeasurably small figures compare as 1.00x instead of dividing by zero.
        tick = 1 / os.sysconf("SC_CLK_TCK")
        return max(idle_cpu, tick) / quiet_seconds, sum(cpu for _count, cpu in outcome) / waiters
    except queue.Empty:
        raise SystemExit("bench_wakeups: the drain did not finish in 10 minutes") from None
    finally:
        store.release(KEY, "holder")
        for worker in workers:
            worker.join(timeout=10)
            if worker.is_alive():
                worker.kill()


def drain(place: Place, size: int) -> float:
    # Two waiters a process: as agents are, mostly one process each, with some company.
    return _queued(place, size, max(size // 2, 1), 0.0)[1]


def idle(place: Place, size: int) -> float:
    # Longer than the deep backstop (0.5 s x 10): every waiter re-checks at least once.
    return _queued(place, size, 4, 6.0)[0]


MEASURES: dict[str, Callable[[Place, int], float]] = {
    "inproc": inproc,
    "inqueue": inqueue,
    "queues": queues,
    "crossproc": crossproc,
    "reclaim": reclaim,
    "drain": drain,
    "idle": idle,
}
SIZES = {
    "inproc": 200,
    "inqueue": 1000,
    "queues": 1000,
    "crossproc": 60,
    "reclaim": 9,
    "drain": 24,
    "idle": 200,
}
QUICK = {
    "inproc": 60,
    "inqueue": 20,
    "queues": 100,
    "crossproc": 20,
    "reclaim": 3,
    "drain": 16,
    "idle": 40,
}


def measure(figure: str, size: int, directory: str | None) -> float:
    with tempfile.TemporaryDirectory(dir=directory) as base:
        return MEASURES[figure](Place(base).prepare(), size)


# -- the runs, interleaved --------------------------------------------------------------------


def run_one(figure: str, off: str, size: int, directory: str | None) -> float:
    """One figure in a fresh process with `off` switched off."""
    env = {**os.environ, OFF_ENV: off}
    if off == "inotify":
        env["LOCKYARD_NO_INOTIFY"] = "1"
    command = [sys.executable, __file__, "--measure", figure, "--size", str(size)]
    if directory:
        command += ["--dir", directory]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_wakeups: {figure} with {off} off failed:\n{done.stderr}")
    return float(json.loads(done.stdout)["value"])


def show(figure: str, value: float) -> str:
    if figure in ("drain", "idle"):
        return f"{value * 1e3:8.2f} ms CPU" + ("/s" if figure == "idle" else "")
    return f"{value / 1e6:8.3f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--only", choices=FIGURES, help="measure one figure")
    parser.add_argument(
        "--every-figure", action="store_true", help="every switch on every figure, not only its own"
    )
    parser.add_argument("--dir", help="where the lock directories go (default: the temp dir)")
    parser.add_argument("--measure", choices=FIGURES, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        bench_peers.mp_context = mp_context  # its players get the switch too
        print(json.dumps({"value": measure(args.measure, args.size, args.dir)}))
        return 0
    sizes = QUICK if args.quick else SIZES
    figures = [args.only] if args.only else list(FIGURES)
    plan = [
        (figure, off)
        for figure in figures
        for off in ("none", *(m for m, f in JUDGED.items() if args.every_figure or figure in f))
    ]
    values: dict[tuple[str, str], list[float]] = {key: [] for key in plan}
    for repeat in range(args.repeats):
        # Each switch's run sits next to the all-on run of its figure, in an order that
        # turns round every repeat: a drift of the machine's load falls on every switch.
        order = plan[repeat % len(plan) :] + plan[: repeat % len(plan)]
        for figure, off in order:
            values[figure, off].append(run_one(figure, off, sizes[figure], args.dir))
        print(f"repeat {repeat + 1}/{args.repeats} done", file=sys.stderr)
    print(f"{'figure':10} {'switched off':15} {'median':>16}  ratio vs all-on  buys")
    for figure in figures:
        on = values[figure, "none"]
        print(f"{figure:10} {'(all on)':15} {show(figure, statistics.median(on)):>16}")
        for off in (o for f, o in plan if f == figure and o != "none"):
            ratios = [mine / base for mine, base in zip(values[figure, off], on, strict=True)]
            ratio = statistics.median(ratios)
            judged = figure in JUDGED[off]
            verdict = (
                ("earns it" if ratio >= WORTH else "UNDER 20%") if judged else "(not its figure)"
            )
            spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
            print(
                f"{'':10} {off:15} {show(figure, statistics.median(values[figure, off])):>16}"
                f"  {ratio:5.2f}x ({spread})  {verdict}"
            )
    return 0


if OFF_ENV in os.environ:  # the measuring process, and the forkserver it starts
    switch_off(os.environ[OFF_ENV])

if __name__ == "__main__":
    sys.exit(main())
