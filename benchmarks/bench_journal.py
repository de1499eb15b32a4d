"""The journal's figures, each against its baseline measured in the same run.

    python3 scripts/uv run python benchmarks/bench_journal.py [--quick] [--only cost|scale]
                                                         [--records 1000000]
                                                         [--other CHECKOUT]

1. Cost: the uncontended cycle (`try_lock` + `release` of a free lock) with the journal on
   against the same cycle with it off, on both backends (on PostgreSQL, the server's CPU
   time per cycle too, from its sessions' schedstat when it runs here), the two taking turns in
   batches, between two stores of one lock (on PostgreSQL two sessions of one server) made
   with the journal on and with `LOCKYARD_JOURNAL=off`, as a user switches it. Target:
   within 1.3x.
2. Scale: a journal of N records (default 1,000,000) is built on each backend, then the
   `lockyard log` and `lockyard stats` commands a person would type are timed as whole
   processes (wall and CPU time, medians of three), beside `lockyard --version` (the
   interpreter and the command line alone); with `--other CHECKOUT`, that checkout's
   lockyard too, on the same journal (before/after in one run). Target: each answers
   within 1 s of CPU (wall time on a loaded machine is mostly waiting for a core). On the
   lock directory, `stats` is timed twice: cold (no segment summary yet: every record
   parsed, the summaries written) and warm (as the writers leave it: each sealed segment
   summarised when it is sealed). On PostgreSQL, the table is loaded by COPY and then given
   the housekeeping steps the writers' triggers run at each block's first id (naming and
   summing the finished blocks, which COPY, firing no trigger, does not); the first `stats`
   is timed alone (it sums the block the last step named), with the bytecode kept as an
   install keeps it (compiled by a `stats` of another journal first) where this
   environment would compile every module on every run.

The PostgreSQL server is `LOCKYARD_TEST_PG_DSN` when set, else a throwaway local cluster.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg

from lockyard.infra.lockstore import FileJournal, LockStore
from lockyard.infra.lockstore.journal.files import (
    SWITCH_ENV,
    JournalFiles,
    journal_dir,
    journal_enabled,
    sealed_segments,
)
from lockyard.infra.lockstore.journal.record import CycleStep, JournalRecord, deadlock_record
from lockyard.infra.lockstore.journal.summary import cached_summary, summary_path
from lockyard.infra.lockstore.postgres import PgLockStore, parse_spec
from lockyard.infra.lockstore.postgres.cluster import ThrowawayCluster
from lockyard.infra.lockstore.postgres.journal_schema import SUM_BLOCK

LOCKYARD = str(Path(sys.executable).parent / "lockyard")
TARGET_RATIO = 1.3
TARGET_SECONDS = 1.0


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def turns(on: Callable[[], None], off: Callable[[], None], run: Callable[[], None],
          rounds: int, batch: int,
          server_cpu: Callable[[bool], float] | None = None) -> tuple[float, ...]:  # fmt: skip
    """Median µs per run with `on()` then with `off()` in force, taking turns each round:
    wall time (on, off), then this thread's CPU time (on, off), which a loaded machine
    disturbs less (the journal's cost is CPU and one write(2) per record); with
    `server_cpu` (seconds of CPU the server has spent for the store on or off), the
    server's CPU time (on, off) too."""
    wall: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    server: dict[bool, list[float]] = {True: [], False: []}
    for warm in range(max(rounds // 10, 3) + rounds):
        for journal in (True, False) if warm % 2 else (False, True):
            (on if journal else off)()
            started, started_cpu = time.perf_counter(), time.thread_time()
            started_server = server_cpu(journal) if server_cpu else 0.0
            for _ in range(batch):
                run()
            if warm >= max(rounds // 10, 3):
                wall[journal].append((time.perf_counter() - started) / batch)
                cpu[journal].append((time.thread_time() - started_cpu) / batch)
                if server_cpu:
                    server[journal].append((server_cpu(journal) - started_server) / batch)
    figures = [statistics.median(wall[True]), statistics.median(wall[False]),
               statistics.median(cpu[True]), statistics.median(cpu[False])]  # fmt: skip
    if server_cpu:
        figures += [statistics.median(server[True]), statistics.median(server[False])]
    return tuple(figure * 1e6 for figure in figures)


def compared(ours: float, base: float, cpu_ours: float, cpu_base: float, digits: int) -> str:
    return (
        f"journal on {ours:.{digits}f} µs vs off {base:.{digits}f} µs ({ours / base:.2f}x); "
        f"CPU {cpu_ours:.{digits}f} vs {cpu_base:.{digits}f} µs ({cpu_ours / cpu_base:.2f}x); "
        f"target ≤ {TARGET_RATIO}x: wall {verdict(ours / base)}, CPU {verdict(cpu_ours / cpu_base)}"
    )


def verdict(ratio: float) -> str:
    return "MET" if ratio <= TARGET_RATIO else "MISSED"


def backend_cpu(store: PgLockStore) -> Callable[[], float] | None:
    """Seconds of CPU the server process of `store`'s session has run (its schedstat), when
    the server runs on this machine and lets us read it; None otherwise."""
    pid = store.session.run(lambda conn, me: conn.execute("SELECT pg_backend_pid()").fetchone())
    path = Path(f"/proc/{pid[0] if pid else 0}/schedstat")
    try:
        path.read_text()
    except OSError:
        return None
    return lambda: int(path.read_text().split()[0]) / 1e9


def cost_lockdir(rounds: int) -> None:
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        repo = Path(d) / "repo"
        repo.mkdir()
        assert journal_enabled(), "the journal is off: unset LOCKYARD_JOURNAL"
        with_journal = LockStore(repo, Path(d) / "locks")
        with journal_switched_off():  # read when a store is made
            without = LockStore(repo, Path(d) / "locks")
        store = with_journal

        def use(chosen: LockStore) -> Callable[[], None]:
            def choose() -> None:
                nonlocal store
                store = chosen

            return choose

        def cycle() -> None:
            store.try_lock("a.py", "alice")
            store.release("a.py", "alice")

        figures = turns(use(with_journal), use(without), cycle, rounds, batch=200)
        records = len(list(FileJournal(with_journal.lock_dir).records()))
        with_journal.close()
        without.close()
    print(f"lock directory, uncontended cycle: {compared(*figures, 1)} ({records} records)")


@contextlib.contextmanager
def journal_switched_off() -> Iterator[None]:
    """`LOCKYARD_JOURNAL=off` while the stores made inside are made, as a user sets it."""
    previous = os.environ.get(SWITCH_ENV)
    os.environ[SWITCH_ENV] = "off"
    try:
        yield
    finally:
        if previous is None:
            del os.environ[SWITCH_ENV]
        else:
            os.environ[SWITCH_ENV] = previous


def cost_postgres(dsn: str, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        with_journal = PgLockStore(d, dsn, namespace="bench").connect()
        with journal_switched_off():  # read when a store is made and when it connects
            without = PgLockStore(d, dsn, namespace="bench").connect()
        store = with_journal

        def use(chosen: PgLockStore) -> Callable[[], None]:
            def choose() -> None:
                nonlocal store
                store = chosen

            return choose

        def cycle() -> None:
            store.try_lock("a.py", "alice")
            store.release("a.py", "alice")

        on_clock, off_clock = backend_cpu(with_journal), backend_cpu(without)
        server = None
        if on_clock is not None and off_clock is not None:
            server = lambda journal: on_clock() if journal else off_clock()  # noqa: E731
        try:
            figures = turns(use(with_journal), use(without), cycle, rounds, 20, server)
            row = with_journal.session.run(
                lambda c, me: c.execute(f'SELECT count(*) FROM "{store.schema}".journal').fetchone()
            )
        finally:
            with_journal.close()
            without.close()
    written = row[0] if row else 0
    print(f"PostgreSQL, uncontended cycle: {compared(*figures[:4], 0)} ({written} records)")
    if len(figures) == 6:  # the server's share, which the client's CPU time does not see
        on, off = figures[4:]
        print(f"  server CPU per cycle (the sessions' schedstat): on {on:.0f} µs vs off "
              f"{off:.0f} µs ({on / off:.2f}x): {verdict(on / off)}")  # fmt: skip


# -- scale -------------------------------------------------------------------------------------

AGENTS = [f"agent-{n}" for n in range(40)]
FILES = [f"src/pkg{n % 20}/module_{n}.py" for n in range(500)]


def synthetic(count: int, start: float) -> list[JournalRecord]:
    """`count` records of a busy afternoon: grants, waits, releases, hand-overs, denials and
    a deadlock now and then, one every few milliseconds up to now."""
    rng = random.Random(7)
    step = (time.time() - start) / count
    records = []
    for i in range(count):
        t = start + i * step
        agent, file = rng.choice(AGENTS), rng.choice(FILES)
        roll = i % 10
        if roll < 3:
            records.append(JournalRecord(t, "grant", "bench", agent, file, "7.1", 7, "h"))
        elif roll < 6:
            records.append(JournalRecord(t, "release", "bench", agent, file, "7.1", 7, "h",
                                         held=rng.random() * 20))  # fmt: skip
        elif roll == 6:
            records.append(JournalRecord(t, "wait-begin", "bench", agent, file, "7.1", 7, "h"))
        elif roll == 7:
            records.append(JournalRecord(t, "wait-end", "bench", agent, file, "7.1", 7, "h",
                                         waited=rng.random() * 60, outcome="granted"))  # fmt: skip
        elif roll == 8:
            records.append(JournalRecord(t, "hand-over", "bench", agent, file, "7.1", 7, "h",
                                         other=rng.choice(AGENTS), fence=i))  # fmt: skip
        elif i % 1000 == 9:
            other = rng.choice(AGENTS)
            records.append(deadlock_record(
                time=t, namespace="bench", session="m", pid=1, host="h",
                cycle=[CycleStep(agent, file, other), CycleStep(other, FILES[0], agent)],
                victim=other, victim_waits_on=FILES[0], released=[file],
                costs={agent: rng.random() * 30, other: rng.random() * 30},
            ))  # fmt: skip
        else:
            records.append(JournalRecord(t, "denied", "bench", agent, file, "7.1", 7, "h",
                                         guard="write", reason="not locked"))  # fmt: skip
    return records


def timed_command(
    *args: str, lockyard: str = LOCKYARD, env: dict[str, str] | None = None
) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (user + system, the child's own) of
    `lockyard *args` over three runs (output discarded). CPU time is what a loaded machine
    disturbs least. With `env`, one untimed run first (it writes the bytecode)."""
    if env is not None:
        subprocess.run([lockyard, *args], stdout=subprocess.DEVNULL, check=True, env=env)
    walls, cpus = [], []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([lockyard, *args], stdout=subprocess.DEVNULL, check=True, env=env)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


KEPT_BYTECODE: dict[str, str] = {}
"""When this environment has Python compile every module on every run (PYTHONDONTWRITEBYTECODE
set, and uv installs no bytecode: this machine's case), the environment of a second timing
with the bytecode kept, as a normal install has it (in a directory of the bench's own)."""


def answer_verdict(wall: float, cpu: float) -> str:
    """Within the target in both wall and CPU time, in CPU time only (the wall time of a loaded
    machine is mostly waiting for a core), or not."""
    if max(wall, cpu) <= TARGET_SECONDS:
        return "MET"
    return "MET in CPU" if cpu <= TARGET_SECONDS else "MISSED"


QUERIES: list[tuple[str, list[str]]] = [
    ("log (last 50)", ["log"]),
    ("log --agent agent-7", ["log", "--agent", "agent-7"]),
    ("log --file 'src/pkg3/*'", ["log", "--file", "src/pkg3/*"]),
    ("log --kind deadlock", ["log", "--kind", "deadlock"]),
    ("log --since 5m", ["log", "--since", "5m", "-n", "100000"]),
    ("log --agent agent-7 --until 6h", ["log", "--agent", "agent-7", "--until", "6h"]),
    ("stats", ["stats"]),
    ("stats --since 1h", ["stats", "--since", "1h"]),
    ("stats --since 5h --until 3h", ["stats", "--since", "5h", "--until", "3h"]),
]


OTHER: list[str] = []
"""`--other CHECKOUT`: its lockyard, timed beside this one on the same journal."""


def report(name: str, *args: str) -> None:
    """The command's wall and CPU time against the target (and with the bytecode kept, and
    the other checkout's, when asked)."""
    wall, cpu = timed_command(*args)
    line = f"  {name:<34} wall {wall * 1000:5.0f} ms, CPU {cpu * 1000:5.0f} ms"
    line += f" ({answer_verdict(wall, cpu)})"
    if KEPT_BYTECODE:
        kept_wall, kept_cpu = timed_command(*args, env=KEPT_BYTECODE)
        line += f"; bytecode kept: wall {kept_wall * 1000:4.0f} ms, CPU {kept_cpu * 1000:4.0f} ms"
        line += f" ({answer_verdict(kept_wall, kept_cpu)})"
    for other in OTHER:
        other_wall, before = timed_command(*args, lockyard=other)
        line += (
            f"; other: wall {other_wall * 1000:6.0f} ms ({wall / other_wall:.2f}x), "
            f"CPU {before * 1000:5.0f} ms ({cpu / before:.2f}x)"
        )
    print(line)


def scale_lockdir(count: int, records: list[JournalRecord]) -> None:
    lock_dir = Path(tempfile.mkdtemp(prefix="lockyard-bench-journal-"))
    try:
        started = time.perf_counter()
        writer = JournalFiles(journal_dir(lock_dir), max_bytes=4 << 30)
        writer.segment_bytes = 4 << 20  # the default segment size
        for record in records:
            writer.append(record)
        writer.close()
        built = time.perf_counter() - started
        size = sum(p.stat().st_size for p in journal_dir(lock_dir).iterdir())
        segments = sealed_segments(journal_dir(lock_dir))
        print(
            f"lock directory: {count:,} records, {size / 2**20:.0f} MiB in {len(segments)} "
            f"sealed segments of 4 MiB (built in {built:.1f} s); load {load()}"
        )
        report("lockyard --version (the floor)", "--version")
        for segment in segments:
            summary_path(segment).unlink(missing_ok=True)
        started = time.perf_counter()
        subprocess.run([LOCKYARD, "stats", "--lock-dir", str(lock_dir)],
                       stdout=subprocess.DEVNULL, check=True)  # fmt: skip
        cold = time.perf_counter() - started
        print(f"  {'stats, cold (summaries made now)':<34} wall {cold * 1000:6.0f} ms")
        for segment in segments:  # as the writers leave them: summarised when sealed
            cached_summary(segment)
        for name, args in QUERIES:
            report(name, *args, "--lock-dir", str(lock_dir))
    finally:
        shutil.rmtree(lock_dir, ignore_errors=True)


def scale_postgres(dsn: str, count: int, records: list[JournalRecord]) -> None:
    spec = parse_spec(dsn)
    with tempfile.TemporaryDirectory() as d, PgLockStore(d, dsn, namespace="bench") as store:
        store.connect()
        started = time.perf_counter()
        with psycopg.connect(spec.conninfo, autocommit=True) as conn:
            table = f'"{spec.schema}".journal'
            columns = "t, kind, namespace, agent, file, session, pid, host, fence, waited, held, " \
                "outcome, other, reason, guard, detail"  # fmt: skip
            from lockyard.infra.lockstore.postgres.journal import insert_params

            with conn.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for record in records:
                    copy.write_row(insert_params(record))
            conn.execute(f"ANALYZE {table}")
            # COPY fires no trigger: run the housekeeping step the writers' triggers run at
            # each block's first id (it names the block before and sums what is finished), so
            # the table is as a million records written by agents leave it.
            for first_id in range(SUM_BLOCK, count + 1, SUM_BLOCK):
                conn.execute(
                    f'SELECT "{spec.schema}".journal_housekeeping(%s, %s)', (first_id, time.time())
                )
        built = time.perf_counter() - started
        print(f"PostgreSQL: {count:,} records (loaded in {built:.1f} s); load {load()}")
        report("lockyard --version (the floor)", "--version")
        if KEPT_BYTECODE:  # as an install has it: `stats` compiled once, on another journal
            warm = PgLockStore(d, f"{dsn}_warm", namespace="bench")
            warm.try_lock("a.py", "alice")
            warm.close()
            subprocess.run([LOCKYARD, "stats", "--backend", f"{dsn}_warm"],
                           stdout=subprocess.DEVNULL, check=True, env=KEPT_BYTECODE)  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([LOCKYARD, "stats", "--backend", dsn], stdout=subprocess.DEVNULL,
                       check=True, env=KEPT_BYTECODE or None)  # fmt: skip
        first = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        print(
            f"  {'stats, first' + (' (bytecode kept)' if KEPT_BYTECODE else ''):<34} "
            f"wall {first * 1000:5.0f} ms, CPU {cpu * 1000:5.0f} ms ({answer_verdict(first, cpu)})"
        )
        for name, args in QUERIES:
            report(name, *args, "--backend", dsn)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and records")
    parser.add_argument("--only", choices=["cost", "scale"])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--backend", choices=["lockdir", "postgres"])
    parser.add_argument(
        "--other", metavar="CHECKOUT", help="also time the log and stats of this checkout"
    )
    args = parser.parse_args()
    if args.other:
        OTHER.append(str(Path(args.other) / ".venv" / "bin" / "lockyard"))
    rounds = 20 if args.quick else 200
    count = 20_000 if args.quick else args.records
    cluster = None
    dsn = os.environ.get("LOCKYARD_TEST_PG_DSN", "").strip()
    wants_pg = args.backend in (None, "postgres")
    if wants_pg and not dsn:
        cluster = ThrowawayCluster().start()
        dsn = cluster.dsn
    if dsn:
        dsn = dsn + ("&" if "?" in dsn else "?") + f"lockyard_schema=bench_{os.getpid()}"
    bytecode_dir = None
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        bytecode_dir = tempfile.mkdtemp(prefix="lockyard-bench-bytecode-")
        KEPT_BYTECODE.update(os.environ, PYTHONPYCACHEPREFIX=bytecode_dir)
        del KEPT_BYTECODE["PYTHONDONTWRITEBYTECODE"]
    try:
        print(f"load {load()}")
        if args.only in (None, "cost"):
            if args.backend in (None, "lockdir"):
                cost_lockdir(rounds)
            if wants_pg:
                cost_postgres(dsn, rounds)
        if args.only in (None, "scale"):
            records = synthetic(count, time.time() - 8 * 3600)
            if args.backend in (None, "lockdir"):
                scale_lockdir(count, records)
            if wants_pg:
                scale_postgres(dsn, count, records)
    finally:
        if cluster is not None:
            cluster.destroy()
        if bytecode_dir is not None:
            shutil.rmtree(bytecode_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
