"""lockyard beside its peers: kernel flock, raw mkdir, fasteners and filelock.

Every figure is printed as a ratio against a baseline measured in the same run, with its
target and MET / MISSED.

    python3 scripts/uv run python benchmarks/bench_peers.py \
        [--quick] [--only SECTION] [--duration S]

Sections (`--only` takes one of these names):

1. uncontended: acquire + release medians of raw mkdir+rmdir, kernel flock, `LockStore`
   (try_lock + release), the contract API (`lockyard.infra.tools.locking` try_lock +
   release_lock), fasteners and filelock; in wall-clock time, and again in the thread's CPU
   time (what the cycle costs whatever else runs on the machine; blocking waits left out).
   Also the system calls of `LockStore`'s cycle alone, made in a row by plain `os` calls:
   the bound no Python around them can beat, against fasteners and against `LockStore`.
2. handoff: a holder in one process releases while a waiter blocked in another process waits;
   release -> grant on CLOCK_MONOTONIC (perf_counter_ns is the same clock in every process).
   The holder releases only once every thread of the waiter is asleep, at a uniformly random
   moment of a 100 ms window, so a polling waiter is caught at a random phase of its period.
   Also two anyio tasks in one process against an `anyio.Event` handoff.
3. queues: cost per handoff with 1 waiter vs N waiters on one lock (tasks in one process, and
   spread over many processes), and agents each waiting on 3 of many files in one process:
   time to drain, and process CPU while every lock is held and nobody moves. Each run gives
   up after `--cap` seconds and prints "collapsed", so the benchmark always ends.
4. throughput: P processes each doing acquire / read-increment-write of a counter file /
   release on 1 and on 64 locks for `--duration` seconds: grants per second, min/max grants
   per process (fairness), and the counters' sum against the number of grants.

Sections 1, 2 and 4 run on the lock directory's file system (the default lock directory's),
on an ext4 directory when that one is a memory file system, and on /dev/shm; section 3 on the
first of them. fasteners (`InterProcessLock`) and filelock (`FileLock`) wait by polling with
their default periods (10 ms growing to 100 ms; 50 ms); flock and lockyard are woken.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import itertools
import multiprocessing
import multiprocessing.context
import multiprocessing.synchronize
import os
import queue
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.lowlevel
import fasteners
import filelock

from lockyard.infra.lockstore import LockStore, default_lock_dir
from lockyard.infra.lockstore.lockdir.keys import is_plain_file
from lockyard.infra.lockstore.paths import lock_name
from lockyard.infra.tools import locking

KEY = "shared.py"
WAIT_TIMEOUT = 120.0  # seconds; no wait in this benchmark should come near it
RELEASE_WINDOW = 0.1  # the longest poll period among the peers (fasteners' max_delay)
SECTIONS = ("uncontended", "handoff", "queues", "throughput")
LOCKYARD_KINDS = ("lockyard sync", "lockyard async", "contract sync", "contract async")
HANDOFF_KINDS = ("flock", *LOCKYARD_KINDS, "fasteners", "filelock")
THROUGHPUT_KINDS = ("flock", "lockyard", "fasteners", "filelock")


# -- the locks under test, behind one small interface ---------------------------------------


class Lock(Protocol):
    def try_acquire(self) -> bool: ...
    async def acquire(self) -> None: ...
    def release(self) -> None: ...


class MkdirLock:
    """The floor of a directory lock: one mkdir, one rmdir, nothing recorded."""

    def __init__(self, path: str) -> None:
        self._path = path

    def try_acquire(self) -> bool:
        try:
            os.mkdir(self._path)
        except FileExistsError:
            return False
        return True

    async def acquire(self) -> None:
        raise NotImplementedError("a bare mkdir lock has no way to wait")

    def release(self) -> None:
        os.rmdir(self._path)


class FlockLock:
    """Kernel flock on a file kept open: the waiter sleeps in the kernel and is handed the
    lock by it (the handoff baseline)."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def try_acquire(self) -> bool:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    async def acquire(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)  # blocks the event loop on purpose: nothing else runs

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)


class StoreLock:
    """`LockStore` try_lock / acquire (sync) or acquire_async / release."""

    def __init__(self, store: LockStore, key: str, agent: str, *, use_async: bool) -> None:
        self._store, self._key, self._agent, self._async = store, key, agent, use_async

    def try_acquire(self) -> bool:
        return self._store.try_lock(self._key, self._agent)

    async def acquire(self) -> None:
        if self._async:
            got = await self._store.acquire_async(self._key, self._agent, WAIT_TIMEOUT)
        else:
            got = self._store.acquire(self._key, self._agent, WAIT_TIMEOUT)
        if not got:
            raise TimeoutError(f"{self._agent} waited {WAIT_TIMEOUT} s for {self._key}")

    def release(self) -> None:
        if not self._store.release(self._key, self._agent):
            raise RuntimeError(f"{self._agent} did not hold {self._key}")


class BareCallsLock:
    """The system calls of an uncontended `LockStore` cycle (try_lock + release), in the
    same order on the same names, with no Python around them beyond the calls: what the
    cycle cannot go below (see docs/lock-store.md, "The lean lock path")."""

    def __init__(self, store: LockStore, key: str) -> None:
        self._fd = store.directory.fd
        self._file = os.fsencode(os.path.join(store.root, key))
        name = lock_name(store.namespace, store.canonicalize(key))
        self._queue, self._lock = f"{name}.q", f"{name}.lock"
        self._staging = f"{name}.tmp-"
        self._record = "@" + "0" * 24 + ":" + repr(time.time())  # a grant record's length
        self._tokens = (f"{n:013x}" for n in itertools.count())
        self._token = ""

    def try_acquire(self) -> bool:
        fd, token = self._fd, next(self._tokens)
        is_plain_file(self._file)
        os.access(self._queue, os.F_OK, dir_fd=fd, follow_symlinks=False)
        os.mkdir(self._staging + token, 0o700, dir_fd=fd)
        os.symlink(self._record, f"{self._staging}{token}/{token}", dir_fd=fd)
        os.rename(self._staging + token, self._lock, src_dir_fd=fd, dst_dir_fd=fd)
        self._token = token
        return True

    async def acquire(self) -> None:
        raise NotImplementedError("bare calls measure the uncontended cycle only")

    def release(self) -> None:
        fd = self._fd
        os.unlink(f"{self._lock}/{self._token}", dir_fd=fd)
        os.access(self._queue, os.F_OK, dir_fd=fd, follow_symlinks=False)
        os.rmdir(self._lock, dir_fd=fd)


class ContractLock:
    """The contract API of `lockyard.infra.tools.locking` (cached store per checkout)."""

    def __init__(self, repo: str, key: str, agent: str, *, use_async: bool) -> None:
        self._repo, self._key, self._agent, self._async = repo, key, agent, use_async

    def try_acquire(self) -> bool:
        return locking.try_lock(self._key, self._agent, self._repo)

    async def acquire(self) -> None:
        if self._async:
            got = await locking.wait_for_lock_async(
                self._key, self._agent, self._repo, timeout_seconds=WAIT_TIMEOUT
            )
        else:
            got = locking.wait_for_lock(
                self._key, self._agent, self._repo, timeout_seconds=WAIT_TIMEOUT
            )
        if not got:
            raise TimeoutError(f"{self._agent} waited {WAIT_TIMEOUT} s for {self._key}")

    def release(self) -> None:
        if not locking.release_lock(self._key, self._agent, self._repo):
            raise RuntimeError(f"{self._agent} did not hold {self._key}")


class FastenersLock:
    """fasteners.InterProcessLock with its default wait (polls: 10 ms growing to 100 ms)."""

    def __init__(self, path: str) -> None:
        self._lock = fasteners.InterProcessLock(path)

    def try_acquire(self) -> bool:
        return bool(self._lock.acquire(blocking=False))

    async def acquire(self) -> None:
        self._lock.acquire()

    def release(self) -> None:
        self._lock.release()


class FileLockLock:
    """filelock.FileLock with its default wait (polls every 50 ms)."""

    def __init__(self, path: str) -> None:
        self._lock = filelock.FileLock(path)

    def try_acquire(self) -> bool:
        try:
            self._lock.acquire(blocking=False)
        except filelock.Timeout:
            return False
        return True

    async def acquire(self) -> None:
        self._lock.acquire()

    def release(self) -> None:
        self._lock.release()


@dataclass
class Place:
    """One benchmark directory: a checkout (`repo`), lockyard's lock directory (`locks`) and
    a directory for the peers' lock files and the counters (`files`)."""

    base: str
    stores: dict[str, LockStore] = field(default_factory=dict)

    @property
    def repo(self) -> str:
        return f"{self.base}/repo"

    @property
    def locks(self) -> str:
        return f"{self.base}/locks"

    @property
    def files(self) -> str:
        return f"{self.base}/files"

    def prepare(self) -> Place:
        for directory in (self.repo, self.locks, self.files):
            os.makedirs(directory, exist_ok=True)
        return self

    def store(self) -> LockStore:
        """This process's store (one per process, as an agent host has)."""
        store = self.stores.get(self.locks)
        if store is None:
            store = self.stores[self.locks] = LockStore(self.repo, self.locks)
        return store

    def lock(self, kind: str, key: str, agent: str) -> Lock:
        file = f"{self.files}/{key}.lock"
        if kind == "mkdir":
            return MkdirLock(f"{self.files}/{key}.dir")
        if kind == "flock":
            return FlockLock(file)
        if kind == "bare calls":
            return BareCallsLock(self.store(), key)
        if kind in ("lockyard", "lockyard sync", "lockyard async"):
            return StoreLock(self.store(), key, agent, use_async=kind == "lockyard async")
        if kind in ("contract sync", "contract async"):
            # The contract API finds its lock directory the way agents do: LOCKYARD_LOCK_DIR.
            os.environ["LOCKYARD_LOCK_DIR"] = self.locks
            return ContractLock(self.repo, key, agent, use_async=kind == "contract async")
        if kind == "fasteners":
            return FastenersLock(file)
        if kind == "filelock":
            return FileLockLock(file)
        raise ValueError(f"unknown lock kind {kind!r}")


# -- helpers ----------------------------------------------------------------------------------


def mp_context() -> multiprocessing.context.ForkServerContext:
    """Children forked from a clean server that imported this module and the locks once:
    cheap to start, and none inherits a thread (lockyard's wake-up reader) from the parent."""
    context = multiprocessing.get_context("forkserver")
    main = sys.modules["__main__"]
    here = "__main__" if getattr(main, "__file__", None) == __file__ else __name__
    context.set_forkserver_preload([here, "lockyard.infra.lockstore.lockdir.store", "anyio"])
    return context


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def thread_states(pid: int) -> list[str]:
    states = []
    with contextlib.suppress(FileNotFoundError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            stat = f"/proc/{pid}/task/{tid}/stat"
            with contextlib.suppress(FileNotFoundError, ProcessLookupError), open(stat) as file:
                states.append(file.read().rpartition(")")[2].split()[0])
    return states


def wait_until_asleep(pid: int, limit: float = 10.0) -> None:
    """Until every thread of `pid` sleeps, twice in a row 1 ms apart (blocked in its wait, not
    merely descheduled). Gives up after `limit` seconds: a measurement must not hang."""
    deadline = time.monotonic() + limit
    streak = 0
    while streak < 2 and time.monotonic() < deadline:
        states = thread_states(pid)
        streak = streak + 1 if states and all(state == "S" for state in states) else 0
        time.sleep(0.001)


def fs_label(directory: str) -> str:
    """`tmpfs /dev/shm`: the type of the file system holding `directory`, and the directory."""
    real = os.path.realpath(directory)
    best, kind = "", "?"
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            point = fields[1].replace("\\040", " ")
            inside = real == point or real.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best):
                best, kind = point, fields[2]
    return f"{kind} {directory}"


def default_dirs() -> list[str]:
    """The lock directory's parent; an ext4 directory when that is a memory file system;
    /dev/shm: each file system once."""
    lock_parent = str(default_lock_dir().parent)
    candidates = [lock_parent]
    if fs_label(lock_parent).split()[0] in ("tmpfs", "ramfs"):
        candidates.append("/var/tmp")
    candidates.append("/dev/shm")
    chosen: list[str] = []
    devices: set[int] = set()
    for directory in candidates:
        with contextlib.suppress(OSError):
            device = os.stat(directory).st_dev
            if device not in devices:
                devices.add(device)
                chosen.append(directory)
    return chosen


@contextlib.contextmanager
def place_in(directory: str) -> Iterator[Place]:
    before = os.environ.get("LOCKYARD_LOCK_DIR")
    with tempfile.TemporaryDirectory(dir=directory, prefix="lockyard-peers-") as tmp:
        place = Place(tmp).prepare()
        try:
            yield place
        finally:
            for store in place.stores.values():
                store.close()
            # The contract locks point LOCKYARD_LOCK_DIR at this place's lock directory.
            if before is None:
                os.environ.pop("LOCKYARD_LOCK_DIR", None)
            else:
                os.environ["LOCKYARD_LOCK_DIR"] = before


def raise_fd_limit() -> None:
    """Thousands of waiters hold an eventfd each."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@dataclass
class Row:
    figure: str
    where: str
    value: str
    ratio: float | None = None
    target: str = ""
    met: bool | None = None


def verdict(met: bool | None) -> str:
    return "" if met is None else ("MET" if met else "MISSED")


def print_table(title: str, rows: list[Row]) -> None:
    print(f"\n{title}\n")
    print("| figure | where | value | ratio | target | |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        ratio = "" if row.ratio is None else f"{row.ratio:.2f}x"
        print(
            f"| {row.figure} | {row.where} | {row.value} | {ratio} | {row.target} "
            f"| {verdict(row.met)} |"
        )
    sys.stdout.flush()


def us(ns: float) -> str:
    return f"{ns / 1000:.1f} µs"


def ms(ns: float) -> str:
    return f"{ns / 1e6:.2f} ms"


# -- 1. uncontended ---------------------------------------------------------------------------

UNCONTENDED_KINDS = (
    "mkdir",
    "flock",
    "bare calls",
    "lockyard",
    "contract sync",
    "fasteners",
    "filelock",
)


def uncontended(
    place: Place, batches: int, per_batch: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Medians over `batches` of the mean ns per try-acquire + release cycle of each kind, in
    wall-clock time and in the thread's CPU time; the kinds take turns batch by batch, so the
    machine's load falls on all of them alike. CPU time leaves out the time the thread is
    preempted (on a loaded machine a longer batch is preempted more often, which wall-clock
    ratios then count against it) and the time it blocks (on a journalled disk, waits for
    the journal, which are part of the cost): read the two together."""
    Path(place.repo, KEY).touch()  # agents lock files that exist
    locks = {kind: place.lock(kind, KEY, "bench") for kind in UNCONTENDED_KINDS}
    wall: dict[str, list[float]] = {kind: [] for kind in UNCONTENDED_KINDS}
    cpu: dict[str, list[float]] = {kind: [] for kind in UNCONTENDED_KINDS}
    for _ in range(batches):
        for kind, lock in locks.items():
            start, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
            for _ in range(per_batch):
                if not lock.try_acquire():
                    raise RuntimeError(f"{kind}: an uncontended lock was refused")
                lock.release()
            cpu[kind].append((time.thread_time_ns() - start_cpu) / per_batch)
            wall[kind].append((time.perf_counter_ns() - start) / per_batch)
    return (
        {kind: statistics.median(values) for kind, values in wall.items()},
        {kind: statistics.median(values) for kind, values in cpu.items()},
    )


def uncontended_rows(where: str, figures: dict[str, float], clock: str = "") -> list[Row]:
    """The rows of one file system; `clock` labels figures that are not wall-clock time."""
    store = figures["lockyard"]
    floor_target = 5.0 if where.startswith(("tmpfs", "ramfs")) else 2.0
    label = f", {clock}" if clock else ""
    rows = [
        Row(f"raw mkdir + rmdir (floor){label}", where, us(figures["mkdir"])),
        Row(f"kernel flock LOCK_EX + LOCK_UN{label}", where, us(figures["flock"])),
        Row(
            f"LockStore try_lock + release vs the floor{label}",
            where,
            us(store),
            store / figures["mkdir"],
            f"<= {floor_target:g}x",
            store / figures["mkdir"] <= floor_target,
        ),
        Row(
            f"contract try_lock + release_lock vs LockStore{label}",
            where,
            us(figures["contract sync"]),
            figures["contract sync"] / store,
            "<= 1.15x",
            figures["contract sync"] / store <= 1.15,
        ),
    ]
    bare = figures["bare calls"]
    rows.append(
        Row(
            f"LockStore's system calls alone vs fasteners (the bound){label}",
            where,
            us(bare),
            bare / figures["fasteners"],
            "",
            None,
        )
    )
    rows.append(
        Row(
            f"LockStore vs its system calls alone (the Python around them){label}",
            where,
            us(store),
            store / bare,
            "",
            None,
        )
    )
    for peer in ("fasteners", "filelock"):
        rows.append(
            Row(
                f"LockStore vs {peer} acquire + release ({us(figures[peer])}){label}",
                where,
                us(store),
                store / figures[peer],
                "< 1x (faster)",
                store < figures[peer],
            )
        )
    return rows


# -- 2. handoff -------------------------------------------------------------------------------


async def _play_handoff(
    lock: Lock,
    me: int,
    pids: Any,
    asking: Any,
    rounds: int,
    ready: multiprocessing.synchronize.Barrier,
    granted: list[multiprocessing.synchronize.Semaphore],
) -> tuple[list[int], list[int]]:
    """Pass the lock back and forth `rounds` times. The releaser asks for the lock again
    only once the other has it: flock is not FIFO, and the releaser would win it back."""
    releases: list[int] = []
    grants: list[int] = []
    holding = me == 0
    if holding and not lock.try_acquire():
        raise RuntimeError("the first holder could not take the lock")
    ready.wait()
    other = pids[1 - me]
    rng = random.Random(me)
    for _ in range(rounds):
        if holding:
            releases.append(_release_when_asleep(lock, rng, lambda: bool(asking[1 - me]), other))
            granted[1 - me].acquire()
        else:
            asking[me] = 1
            await lock.acquire()
            grants.append(time.perf_counter_ns())
            asking[me] = 0
            granted[me].release()
        holding = not holding
    if holding:
        lock.release()
    return releases, grants


def _release_when_asleep(
    lock: Lock, rng: random.Random, other_asks: Callable[[], bool], other: int
) -> int:
    """Release at a random moment of the window once the other player sleeps in its wait (a
    blocking sleep: the event loop must not run anything meanwhile); the release's time."""
    time.sleep(0.002 + rng.random() * RELEASE_WINDOW)
    while not other_asks():
        time.sleep(0.001)
    wait_until_asleep(other)
    released = time.perf_counter_ns()
    lock.release()
    return released


def _handoff_player(
    base: str,
    kind: str,
    me: int,
    pids: Any,
    asking: Any,
    rounds: int,
    ready: multiprocessing.synchronize.Barrier,
    granted: list[multiprocessing.synchronize.Semaphore],
    results: multiprocessing.Queue[tuple[int, list[int], list[int]]],
) -> None:
    lock = Place(base).lock(kind, KEY, f"player-{me}")
    releases, grants = anyio.run(_play_handoff, lock, me, pids, asking, rounds, ready, granted)
    results.put((me, releases, grants))


def handoff_cross_process(place: Place, kind: str, rounds: int) -> list[float]:
    """Release -> grant latencies in ns between two processes passing one lock `rounds` times."""
    Path(place.repo, KEY).touch()
    context = mp_context()
    pids = context.Array("i", 2)
    asking = context.Array("i", 2, lock=False)  # 1: this player is (about to be) waiting
    ready = context.Barrier(3)
    granted = [context.Semaphore(0), context.Semaphore(0)]
    results: multiprocessing.Queue[tuple[int, list[int], list[int]]] = context.Queue()
    players = [
        context.Process(
            target=_handoff_player,
            args=(place.base, kind, me, pids, asking, rounds, ready, granted, results),
        )
        for me in (0, 1)
    ]
    for player in players:
        player.start()
    for me, player in enumerate(players):
        pids[me] = player.pid or 0
    try:
        ready.wait(timeout=120)
        outcome = {me: (rel, acq) for me, rel, acq in (results.get(timeout=600) for _ in players)}
    finally:
        for player in players:
            player.join(timeout=10)
            if player.is_alive():
                player.kill()
    # Player 0 holds first: its releases pair with player 1's grants, and the other way round.
    latencies = [g - r for r, g in zip(outcome[0][0], outcome[1][1], strict=True)]
    latencies += [g - r for r, g in zip(outcome[1][0], outcome[0][1], strict=True)]
    return [float(value) for value in latencies]


def handoff_in_process(place: Place, rounds: int) -> tuple[list[float], list[float]]:
    """(lockyard, anyio.Event): release -> grant latencies in ns between two tasks."""
    Path(place.repo, KEY).touch()
    store = place.store()
    lockyard: list[float] = []
    event_latencies: list[float] = []

    async def main() -> None:
        for _ in range(rounds):
            released_at = [0]
            assert store.try_lock(KEY, "holder")

            async def waiter(stamp: list[int] = released_at) -> None:
                assert await store.acquire_async(KEY, "waiter", WAIT_TIMEOUT)
                lockyard.append(float(time.perf_counter_ns() - stamp[0]))
                store.release(KEY, "waiter")

            async with anyio.create_task_group() as group:
                group.start_soon(waiter)
                while not store.waiters(KEY):
                    await anyio.lowlevel.checkpoint()
                for _ in range(3):  # let the waiter settle into its wait
                    await anyio.lowlevel.checkpoint()
                released_at[0] = time.perf_counter_ns()
                store.release(KEY, "holder")

            event = anyio.Event()
            set_at = [0]
            parked = [False]

            async def event_waiter(
                stamp: list[int] = set_at, parked: list[bool] = parked, event: anyio.Event = event
            ) -> None:
                parked[0] = True
                await event.wait()
                event_latencies.append(float(time.perf_counter_ns() - stamp[0]))

            async with anyio.create_task_group() as group:
                group.start_soon(event_waiter)
                while not parked[0]:
                    await anyio.lowlevel.checkpoint()
                for _ in range(3):
                    await anyio.lowlevel.checkpoint()
                set_at[0] = time.perf_counter_ns()
                event.set()

    anyio.run(main)
    return lockyard, event_latencies


def handoff_rows(where: str, latencies: dict[str, list[float]]) -> list[Row]:
    flock = latencies["flock"]
    flock_median, flock_p99 = statistics.median(flock), percentile(flock, 0.99)
    rows = [
        Row(
            f"flock handoff median / p99 (n={len(flock)})",
            where,
            f"{ms(flock_median)} / {ms(flock_p99)}",
        )
    ]
    for kind, values in latencies.items():
        if kind == "flock":
            continue
        median, p99 = statistics.median(values), percentile(values, 0.99)
        ours = kind in LOCKYARD_KINDS
        rows.append(
            Row(
                f"{kind} handoff median vs flock",
                where,
                ms(median),
                median / flock_median,
                "<= 3x" if ours else "(peer)",
                median / flock_median <= 3 if ours else None,
            )
        )
        rows.append(
            Row(
                f"{kind} handoff p99 vs flock",
                where,
                ms(p99),
                p99 / flock_p99,
                "<= 10x" if ours else "(peer)",
                p99 / flock_p99 <= 10 if ours else None,
            )
        )
    return rows


def in_process_rows(where: str, lockyard: list[float], event: list[float]) -> list[Row]:
    ratio = statistics.median(lockyard) / statistics.median(event)
    return [
        Row(f"anyio.Event handoff median (n={len(event)})", where, us(statistics.median(event))),
        Row(
            "in-process task handoff median vs anyio.Event",
            where,
            us(statistics.median(lockyard)),
            ratio,
            "<= 10x",
            ratio <= 10,
        ),
    ]


# -- 3. queues --------------------------------------------------------------------------------


async def _until(condition: Callable[[], bool], period: float = 0.05) -> None:
    while True:  # a store has no event for "this many queued": look every `period`
        if condition():
            return
        await anyio.sleep(period)


def drain_in_process(place: Place, waiters: int, cap: float) -> float | None:
    """ns per handoff for `waiters` tasks queued on one lock, each releasing at once when
    granted; None when it did not finish within `cap` seconds (collapsed)."""
    Path(place.repo, KEY).touch()
    store = place.store()
    grants: list[int] = []
    outcome: list[float] = []

    async def one(agent: str) -> None:
        if await store.acquire_async(KEY, agent, WAIT_TIMEOUT):
            grants.append(time.perf_counter_ns())
            store.release(KEY, agent)

    async def main() -> None:
        assert store.try_lock(KEY, "holder")
        try:
            with anyio.move_on_after(cap):
                async with anyio.create_task_group() as group:
                    for index in range(waiters):
                        group.start_soon(one, f"waiter-{index}")
                    await _until(lambda: len(store.waiters(KEY)) >= waiters)
                    await anyio.sleep(0.05)
                    start = time.perf_counter_ns()
                    store.release(KEY, "holder")
                if len(grants) == waiters:
                    outcome.append((max(grants) - start) / waiters)
        finally:
            store.release(KEY, "holder")

    anyio.run(main)
    return outcome[0] if outcome else None


def _drain_worker(
    base: str,
    first: int,
    count: int,
    results: multiprocessing.Queue[tuple[int, int]],
) -> None:
    store = Place(base).store()
    grants: list[int] = []

    async def one(agent: str) -> None:
        if await store.acquire_async(KEY, agent, WAIT_TIMEOUT):
            grants.append(time.perf_counter_ns())
            store.release(KEY, agent)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for index in range(first, first + count):
                group.start_soon(one, f"waiter-{index}")

    anyio.run(main)
    results.put((len(grants), max(grants, default=0)))


def drain_processes(place: Place, waiters: int, processes: int, cap: float) -> float | None:
    """ns per handoff for `waiters` waiters spread over `processes` processes, queued on one
    lock this process holds; None when it did not finish within `cap` seconds."""
    Path(place.repo, KEY).touch()
    store = place.store()
    assert store.try_lock(KEY, "holder")
    context = mp_context()
    results: multiprocessing.Queue[tuple[int, int]] = context.Queue()
    shares = [waiters // processes + (i < waiters % processes) for i in range(processes)]
    starts = [sum(shares[:i]) for i in range(processes)]
    workers = [
        context.Process(target=_drain_worker, args=(place.base, start, share, results))
        for start, share in zip(starts, shares, strict=True)
        if share
    ]
    deadline = time.monotonic() + cap
    for worker in workers:
        worker.start()
    try:
        while len(store.waiters(KEY)) < waiters:
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)
        time.sleep(0.05)
        start = time.perf_counter_ns()
        store.release(KEY, "holder")
        granted, last = 0, 0
        for _ in workers:
            try:
                count, latest = results.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                return None
            granted, last = granted + count, max(last, latest)
        return (last - start) / waiters if granted == waiters else None
    finally:
        store.release(KEY, "holder")
        for worker in workers:
            if worker.is_alive():
                worker.kill()
            worker.join()


@dataclass
class ManyFiles:
    enqueue_seconds: float | None
    quiet_cpu_fraction: float | None  # process CPU seconds per wall second while all wait
    drain_seconds: float | None


def many_files(place: Place, agents: int, files: int, quiet: float, cap: float) -> ManyFiles:
    """`agents` agents each waiting on 3 of `files` files (all held by one holder) in one
    process; each grant is released at once. Cut short after `cap` seconds."""
    rng = random.Random(7)
    keys = [f"f{index}.py" for index in range(files)]
    for key in keys:
        Path(place.repo, key).touch()
    store = place.store()
    wanted = [rng.sample(keys, 3) for _ in range(agents)]
    result = ManyFiles(None, None, None)
    done = [0]

    async def one(agent: str, key: str) -> None:
        if await store.acquire_async(key, agent, WAIT_TIMEOUT):
            store.release(key, agent)
            done[0] += 1

    def queued() -> int:
        return sum(len(store.waiters(key)) for key in keys)

    async def main() -> None:
        for key in keys:
            assert store.try_lock(key, "holder")
        try:
            with anyio.move_on_after(cap):
                async with anyio.create_task_group() as group:
                    began = time.monotonic()
                    for index, chosen in enumerate(wanted):
                        for key in chosen:
                            group.start_soon(one, f"agent-{index}", key)
                    await _until(lambda: queued() >= 3 * agents, period=0.25)
                    result.enqueue_seconds = time.monotonic() - began
                    wall, cpu = time.monotonic(), time.process_time()
                    await anyio.sleep(quiet)
                    result.quiet_cpu_fraction = (time.process_time() - cpu) / (
                        time.monotonic() - wall
                    )
                    began = time.monotonic()
                    for key in keys:
                        store.release(key, "holder")
                if done[0] == 3 * agents:
                    result.drain_seconds = time.monotonic() - began
        finally:
            for key in keys:
                store.release(key, "holder")

    anyio.run(main)
    return result


def queue_rows(
    where: str,
    one: float | None,
    many: float | None,
    waiters: int,
    one_cross: float | None,
    many_cross: float | None,
    processes: int,
    spread: ManyFiles,
    agents: int,
    files: int,
) -> list[Row]:
    def per(value: float | None) -> str:
        return "collapsed" if value is None else ms(value)

    def ratio_row(figure: str, base: float | None, value: float | None) -> Row:
        if base is None or value is None:
            return Row(figure, where, per(value), None, "<= 2x", False)
        return Row(figure, where, per(value), value / base, "<= 2x", value / base <= 2)

    quiet = spread.quiet_cpu_fraction
    return [
        Row("per handoff, 1 waiter (tasks, one process)", where, per(one)),
        ratio_row(f"per handoff, {waiters:,} waiters vs 1 (one process)", one, many),
        Row("per handoff, 1 waiter in another process", where, per(one_cross)),
        ratio_row(
            f"per handoff, {waiters:,} waiters in {processes} processes vs 1", one_cross, many_cross
        ),
        Row(
            f"{agents:,} agents x 3 of {files} files: all queued after",
            where,
            "collapsed" if spread.enqueue_seconds is None else f"{spread.enqueue_seconds:.2f} s",
            None,
            "no collapse",
            spread.enqueue_seconds is not None,
        ),
        Row(
            "  CPU while all wait and nobody moves (cores busy)",
            where,
            "n/a" if quiet is None else f"{quiet:.3f}",
            None,
            "<= 0.05 (near zero)",
            quiet is not None and quiet <= 0.05,
        ),
        Row(
            f"  all {3 * agents:,} grants after the release, in",
            where,
            "collapsed" if spread.drain_seconds is None else f"{spread.drain_seconds:.2f} s",
            None,
            "no collapse",
            spread.drain_seconds is not None,
        ),
    ]


# -- 4. throughput ----------------------------------------------------------------------------


def increment(counter_path: str) -> None:
    """Read, increment, write back: lost updates show when the lock does not exclude."""
    with open(counter_path, "r+") as counter:
        value = int(counter.read())
        counter.seek(0)
        counter.write(str(value + 1))
        counter.truncate()


def _throughput_worker(
    base: str,
    kind: str,
    index: int,
    locks: int,
    seconds: float,
    ready: multiprocessing.synchronize.Barrier,
    results: multiprocessing.Queue[tuple[int, int, int, int]],
) -> None:
    place = Place(base)
    handles = [place.lock(kind, f"c{i}.py", f"worker-{index}") for i in range(locks)]
    counters = [f"{place.files}/c{i}.count" for i in range(locks)]
    rng = random.Random(index)
    grants = [0]

    async def run() -> None:
        end = time.perf_counter_ns() + int(seconds * 1e9)
        while time.perf_counter_ns() < end:
            chosen = rng.randrange(locks)
            await handles[chosen].acquire()
            increment(counters[chosen])
            handles[chosen].release()
            grants[0] += 1

    ready.wait()
    began = time.perf_counter_ns()
    anyio.run(run)
    results.put((index, grants[0], began, time.perf_counter_ns()))


@dataclass
class Throughput:
    grants_per_second: float
    per_process: list[int]
    counted: int

    @property
    def granted(self) -> int:
        return sum(self.per_process)


def throughput(place: Place, kind: str, processes: int, locks: int, seconds: float) -> Throughput:
    for i in range(locks):
        Path(place.repo, f"c{i}.py").touch()
        Path(place.files, f"c{i}.count").write_text("0")
    context = mp_context()
    ready = context.Barrier(processes)
    results: multiprocessing.Queue[tuple[int, int, int, int]] = context.Queue()
    workers = [
        context.Process(
            target=_throughput_worker,
            args=(place.base, kind, index, locks, seconds, ready, results),
        )
        for index in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        outcome = [results.get(timeout=seconds + 300) for _ in workers]
    finally:
        for worker in workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.kill()
    per_process = [grants for _index, grants, _began, _ended in sorted(outcome)]
    elapsed = (max(o[3] for o in outcome) - min(o[2] for o in outcome)) / 1e9
    counted = sum(int(Path(place.files, f"c{i}.count").read_text()) for i in range(locks))
    return Throughput(sum(per_process) / elapsed, per_process, counted)


def throughput_rows(
    where: str, processes: int, locks: int, figures: dict[str, Throughput]
) -> list[Row]:
    ours = figures.get("lockyard")
    rows = []
    for kind, figure in figures.items():
        fairness = f"{min(figure.per_process)}/{max(figure.per_process)}"
        check = "OK" if figure.counted == figure.granted else "MISMATCH"
        label = f"{processes} procs x {locks} lock{'s' if locks > 1 else ''}: {kind}"
        value = f"{figure.grants_per_second:,.0f}/s, min/max {fairness}, counter {check}"
        if kind in ("fasteners", "filelock") and ours is not None:
            ratio = ours.grants_per_second / figure.grants_per_second
            rows.append(
                Row(f"{label} (ratio: lockyard / {kind})", where, value, ratio, ">= 1x", ratio >= 1)
            )
        else:
            rows.append(
                Row(label, where, value, None, "counter OK", figure.counted == figure.granted)
            )
    return rows


# -- the run ----------------------------------------------------------------------------------


@dataclass
class Sizes:
    batches: int
    per_batch: int
    rounds: int
    in_process_rounds: int
    waiters: int
    processes: int
    single_runs: int
    agents: int
    files: int
    quiet: float
    duration: float
    workers: int = 8
    crowded_runs: int = 5  # drains of the long queue in one process (median)
    crowded_process_runs: int = 3  # the same across processes (each spawns them anew)


QUICK = Sizes(15, 100, 20, 200, 200, 10, 5, 200, 100, 1.0, 1.0)
FULL = Sizes(41, 400, 150, 1000, 1000, 50, 15, 1000, 500, 3.0, 5.0)


def run_uncontended(dirs: list[str], sizes: Sizes) -> None:
    rows: list[Row] = []
    for directory in dirs:
        with place_in(directory) as place:
            wall, cpu = uncontended(place, sizes.batches, sizes.per_batch)
            rows += uncontended_rows(fs_label(directory), wall)
            rows += uncontended_rows(fs_label(directory), cpu, "CPU time")
    print_table("1. uncontended acquire + release (median)", rows)


def run_handoff(dirs: list[str], sizes: Sizes) -> None:
    rows: list[Row] = []
    for directory in dirs:
        where = fs_label(directory)
        latencies = {}
        for kind in HANDOFF_KINDS:
            with place_in(directory) as place:
                latencies[kind] = handoff_cross_process(place, kind, sizes.rounds)
        rows += handoff_rows(where, latencies)
    with place_in(dirs[0]) as place:
        in_process = handoff_in_process(place, sizes.in_process_rounds)
    rows += in_process_rows(fs_label(dirs[0]), *in_process)
    print_table("2. handoff: release -> grant (at a random moment once the waiter sleeps)", rows)


def run_queues(dirs: list[str], sizes: Sizes, cap: float) -> None:
    directory = dirs[0]

    def fresh(measure: Callable[[Place], float | None]) -> float | None:
        with place_in(directory) as place:
            return measure(place)

    def median_of(runs: list[float | None]) -> float | None:
        done = [run for run in runs if run is not None]
        return statistics.median(done) if len(done) == len(runs) else None

    def taking_turns(
        alone: Callable[[Place], float | None],
        crowded: Callable[[Place], float | None],
        crowded_runs: int,
    ) -> tuple[float | None, float | None]:
        """Medians of both, run in turns: a single run of the crowded queue beside a median
        of lone waiters would put all of a load burst on one side."""
        lone: list[float | None] = []
        crowd: list[float | None] = []
        for index in range(max(sizes.single_runs, crowded_runs)):
            if index < sizes.single_runs:
                lone.append(fresh(alone))
            if index < crowded_runs:
                crowd.append(fresh(crowded))
        return median_of(lone), median_of(crowd)

    one, many = taking_turns(
        lambda p: drain_in_process(p, 1, cap),
        lambda p: drain_in_process(p, sizes.waiters, cap),
        sizes.crowded_runs,
    )
    one_cross, many_cross = taking_turns(
        lambda p: drain_processes(p, 1, 1, cap),
        lambda p: drain_processes(p, sizes.waiters, sizes.processes, cap),
        sizes.crowded_process_runs,
    )
    with place_in(directory) as place:
        spread = many_files(place, sizes.agents, sizes.files, sizes.quiet, cap)
    rows = queue_rows(
        fs_label(directory),
        one,
        many,
        sizes.waiters,
        one_cross,
        many_cross,
        sizes.processes,
        spread,
        sizes.agents,
        sizes.files,
    )
    print_table(f"3. flat queues (each run capped at {cap:g} s)", rows)


def run_throughput(dirs: list[str], sizes: Sizes) -> None:
    rows: list[Row] = []
    for directory in dirs:
        for locks in (1, 64):
            figures = {}
            for kind in THROUGHPUT_KINDS:
                with place_in(directory) as place:
                    figures[kind] = throughput(place, kind, sizes.workers, locks, sizes.duration)
            rows += throughput_rows(fs_label(directory), sizes.workers, locks, figures)
    print_table(
        f"4. throughput: {sizes.workers} processes, acquire / read-increment-write / release "
        f"for {sizes.duration:g} s",
        rows,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, short runs (~2 min)")
    parser.add_argument("--only", choices=SECTIONS, help="run one section")
    parser.add_argument("--duration", type=float, help="seconds per throughput run")
    parser.add_argument("--cap", type=float, help="seconds before a queue run counts as collapsed")
    parser.add_argument(
        "--dirs", nargs="+", help="directories to measure in (default: see the description)"
    )
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.duration:
        sizes.duration = args.duration
    cap = args.cap or (20.0 if args.quick else 60.0)
    dirs = args.dirs or default_dirs()
    raise_fd_limit()
    load = "/".join(f"{value:.2f}" for value in os.getloadavg())
    print(
        f"lockyard beside its peers ({'--quick' if args.quick else 'full run'}); python "
        f"{sys.version.split()[0]}, {os.cpu_count()} cpus, load average {load} (1/5/15 min)"
    )
    print("file systems: " + ", ".join(fs_label(directory) for directory in dirs))
    started = time.monotonic()
    chosen = [args.only] if args.only else list(SECTIONS)
    if "uncontended" in chosen:
        run_uncontended(dirs, sizes)
    if "handoff" in chosen:
        run_handoff(dirs, sizes)
    if "queues" in chosen:
        run_queues(dirs, sizes, cap)
    if "throughput" in chosen:
        run_throughput(dirs, sizes)
    load = "/".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"\ndone in {time.monotonic() - started:.0f} s; load average now {load}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
