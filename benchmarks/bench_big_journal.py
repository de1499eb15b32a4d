"""A lock directory's journal of a gigabyte: do the page and `lockyard log` stay responsive?

    python3 scripts/uv run python benchmarks/bench_big_journal.py [--megabytes 1024]
                                                     [--hours 24] [--baseline-megabytes 64]
                                                     [--other CHECKOUT]

A journal this big is one a user asked for (`LOCKYARD_JOURNAL_MAX_MB=1024`: sealed segments
of 64 MiB, each summarised when sealed, as the writers leave them). The script builds it in
a temporary lock directory (records of a busy day, the newest now), starts `lockyard web` on
it and times, as a person meets them:

- the page's data: `/api/timeline` for the last hour (what the page loads first), the last
  5 minutes, and an hour chosen in the middle of the journal; `/api/board`; the page itself
  ("last" counts back from the journal's newest record, which is as old as the build and
  the summaries took: a gigabyte takes many minutes);
- `lockyard log`: the last records, the last 1,000, one agent's last records, and a
  one-minute window in the middle of the journal;

each the median of three, beside the same on a small journal (`--baseline-megabytes`) built
the same way in the same run: the ratio says what the size costs, whatever the machine's
load. Commands are timed as whole processes (wall time, and their CPU time). With `--other
CHECKOUT`, that checkout's lockyard is timed on the same big journal too (before and after a
change, in one run). Every file it builds is deleted at the end; it refuses to start without
room for them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench_journal import synthetic
from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.journal.files import (
    ACTIVE,
    SEALED_SUFFIX,
    journal_dir,
    sealed_segments,
)
from lockyard.infra.lockstore.journal.record import RECORD_START, encode
from lockyard.infra.lockstore.journal.summary import cached_summary
from processes import LOCKYARD, WebProcess, process_cpu

SEGMENT_BYTES = 64 << 20
"""What `LOCKYARD_JOURNAL_MAX_MB=1024` makes: a sixteenth of the journal."""


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def record_tails() -> list[bytes]:
    """The bytes after the time of a few thousand varied records: a record of any time is
    `{"t":TIME` and one of these (building a gigabyte of JournalRecords would take long)."""
    tails = []
    for record in synthetic(5000, time.time() - 3600):
        line = encode(record)
        tails.append(line[line.index(b",", len(RECORD_START)) :])
    return tails


@dataclass
class Journal:
    lock_dir: Path
    start: float
    end: float
    records: int
    size: int
    built: float
    summarised: float


def build(root: Path, megabytes: float, hours: float) -> Journal:
    """A journal of about `megabytes`, its records spread evenly over the last `hours`."""
    lock_dir = root / "locks"
    LockStore(None, lock_dir)  # a lock directory as lockyard makes it
    directory = journal_dir(lock_dir)
    directory.mkdir(exist_ok=True)
    tails = record_tails()
    average = statistics.mean(len(tail) for tail in tails) + 18
    count = int(megabytes * (1 << 20) / average)
    end = time.time()
    start = end - hours * 3600
    step = (end - start) / count
    started = time.perf_counter()
    number, size, written = 0, 0, 0
    while written < count:
        lines = []
        segment = 0
        while segment < SEGMENT_BYTES and written < count:
            line = b'{"t":%.6f' % (start + written * step) + tails[written % len(tails)]
            lines.append(line)
            segment += len(line)
            written += 1
        number += 1
        last = written >= count
        name = ACTIVE if last else f"{number:08d}{SEALED_SUFFIX}"
        (directory / name).write_bytes(b"".join(lines))
        size += segment
    built = time.perf_counter() - started
    started = time.perf_counter()
    for segment_path in sealed_segments(directory):  # as each writer does when it seals
        cached_summary(segment_path)
    return Journal(lock_dir, start, end, count, size, built, time.perf_counter() - started)


def median_of_three(run: Callable[[], None]) -> tuple[float, float]:
    """Median wall seconds of `run()`, and the median CPU seconds its child processes used."""
    walls, cpus = [], []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        run()
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def timed(web: WebProcess, path: str) -> tuple[float, float, bytes]:
    """Median wall seconds of GET `path`, the server's median CPU seconds, the body."""
    walls, cpus, body = [], [], b""
    for _ in range(3):
        cpu = process_cpu(web.process.pid)
        started = time.perf_counter()
        body = web.get(path)
        walls.append(time.perf_counter() - started)
        cpus.append(process_cpu(web.process.pid) - cpu)
    return statistics.median(walls), statistics.median(cpus), body


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def measure(journal: Journal, lockyard: str = LOCKYARD) -> dict[str, tuple[float, float, str]]:
    """name -> (wall seconds, CPU seconds, what it answered)."""
    figures: dict[str, tuple[float, float, str]] = {}
    web = WebProcess(journal.lock_dir, lockyard)
    try:
        figures["lockyard web: start until it serves"] = (web.started_in, 0.0, "")
        middle = journal.start + (journal.end - journal.start) / 2
        newest = journal.end
        for name, path in [
            ("page /", ""),
            ("/api/board", "api/board"),
            ("/api/timeline, last hour (page load)", f"api/timeline?from={newest - 3600:.3f}"),
            ("/api/timeline, last 5 minutes", f"api/timeline?from={newest - 300:.3f}"),
            ("/api/timeline, an hour mid-journal", f"api/timeline?from={middle:.3f}&to="
             f"{middle + 3600:.3f}"),
        ]:  # fmt: skip
            wall, cpu, body = timed(web, path)
            said = ""
            if path.startswith("api/timeline"):
                answer = json.loads(body)
                said = f"{len(answer['items'])} items" + (
                    " (the latest of the window)" if answer["truncated"] else ""
                )
            figures[name] = (wall, cpu, said)
    finally:
        web.close()
    where = ["--lock-dir", str(journal.lock_dir)]
    for name, args in [
        ("lockyard log (last 50)", ["log"]),
        ("lockyard log -n 1000", ["log", "-n", "1000"]),
        ("lockyard log --agent agent-7", ["log", "--agent", "agent-7"]),
        ("lockyard log, one minute mid-journal", ["log", "--all", "--since", iso(middle),
                                                  "--until", iso(middle + 60)]),
    ]:  # fmt: skip
        out: list[int] = []

        def run(args: list[str] = args, out: list[int] = out) -> None:
            done = subprocess.run(
                [lockyard, *args, *where], stdout=subprocess.PIPE, check=True, env=_env()
            )
            out.append(done.stdout.count(b"\n"))

        wall, cpu = median_of_three(run)
        figures[name] = (wall, cpu, f"{out[-1]} lines")
    return figures


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("LOCKYARD_LOCK_DIR", "COLUMNS")}


def describe(label: str, journal: Journal) -> str:
    return (
        f"{label}: {journal.size / 2**20:,.0f} MiB, {journal.records:,} records over "
        f"{(journal.end - journal.start) / 3600:.0f} h, "
        f"{len(sealed_segments(journal_dir(journal.lock_dir)))} sealed segments of "
        f"{SEGMENT_BYTES >> 20} MiB (written in {journal.built:.0f} s, summarised in "
        f"{journal.summarised:.0f} s)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=1024)
    parser.add_argument("--hours", type=float, default=24)
    parser.add_argument("--baseline-megabytes", type=float, default=64)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where to build")
    parser.add_argument(
        "--other", metavar="CHECKOUT", help="also time this checkout's lockyard on the big one"
    )
    args = parser.parse_args()
    free = shutil.disk_usage(args.dir).free
    needed = (args.megabytes + args.baseline_megabytes) * (1 << 20) * 1.2
    if free < needed + (2 << 30):
        print(
            f"{args.dir} has {free / 2**30:.1f} GiB free; this needs {needed / 2**30:.1f} GiB "
            "and 2 GiB to spare: pass --dir or fewer --megabytes"
        )
        return 2
    root = Path(tempfile.mkdtemp(prefix="lockyard-bench-big-journal-", dir=args.dir))
    try:
        print(f"load {load()}")
        # The baseline keeps the big journal's rate of records: its last hour is as full.
        small = build(root / "small", args.baseline_megabytes,
                      args.hours * args.baseline_megabytes / args.megabytes)  # fmt: skip
        big = build(root / "big", args.megabytes, args.hours)
        print(describe("baseline", small))
        print(describe("big", big))
        base = measure(small)
        ours = measure(big)
        other = {}
        if args.other:
            other = measure(big, str(Path(args.other) / ".venv" / "bin" / "lockyard"))
        print(f"load {load()}")
        print(f"{'':44} {'baseline':>10} {'big':>10} {'ratio':>6}  {'CPU big':>8}  answered")
        for name, (wall, cpu, said) in ours.items():
            before = base[name][0]
            ratio = f"{wall / before:5.1f}x" if before > 0 else ""
            print(f"{name:44} {before * 1000:8.0f}ms {wall * 1000:8.0f}ms {ratio:>6}  "
                  f"{cpu * 1000:6.0f}ms  {said}")  # fmt: skip
        if other:
            print(f"\nthe big journal, this checkout against {args.other}:")
            print(f"{'':44} {'wall':>10} {'other':>10} {'CPU':>8} {'other':>8} {'CPU ratio':>9}")
            for name, (wall, cpu, said) in ours.items():
                other_wall, other_cpu, other_said = other[name]
                ratio = f"{cpu / other_cpu:8.2f}x" if other_cpu > 0 else ""
                print(f"{name:44} {wall * 1000:8.0f}ms {other_wall * 1000:8.0f}ms "
                      f"{cpu * 1000:6.0f}ms {other_cpu * 1000:6.0f}ms {ratio:>9}  "
                      f"{said} / {other_said}")  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
