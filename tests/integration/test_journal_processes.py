"""Many processes write one journal at once: records never interleave, sealing is safe, and
a writer killed at any moment leaves at most one torn record, which readers skip."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from lockyard.infra.lockstore import FileJournal
from lockyard.infra.lockstore.journal.files import journal_dir, sealed_segments
from lockyard.infra.lockstore.journal.scan import parse_line

WRITER = """
import os, sys, time
from pathlib import Path
from lockyard.infra.lockstore.journal.files import JournalFiles, journal_dir
from lockyard.infra.lockstore.journal.record import JournalRecord
lock_dir, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = JournalFiles(journal_dir(lock_dir), max_bytes=64 << 20)
files.segment_bytes = 256 * 1024  # seal often, keep everything
print("ready", flush=True)
i = 0
while count < 0 or i < count:
    files.append(JournalRecord(time=time.time(), kind="grant", namespace="ns", agent=name,
        file=f"src/{i}.py", session=str(os.getpid()), pid=os.getpid(), host="h",
        reason="x" * (i % 700)))
    i += 1
"""


def start_writer(lock_dir: Path, name: str, count: int) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(lock_dir), name, str(count)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


def all_lines(lock_dir: Path) -> list[bytes]:
    directory = journal_dir(lock_dir)
    # No current.jsonl when a writer was killed between sealing it and starting the next.
    paths = [*sealed_segments(directory), directory / "current.jsonl"]
    paths = [path for path in paths if path.exists()]
    return [line for path in paths for line in path.read_bytes().split(b"\n") if line]


def test_records_of_concurrent_processes_never_interleave(lock_dir: Path) -> None:
    lock_dir.mkdir()
    writers = [start_writer(lock_dir, f"w{n}", 1500) for n in range(4)]
    for writer in writers:
        assert writer.wait(timeout=300) == 0
    lines = all_lines(lock_dir)
    assert len(lines) == 6000
    records = [parse_line(line) for line in lines]
    assert all(record is not None for record in records)
    per_writer: dict[str, list[str]] = {}
    for record in records:
        assert record is not None
        per_writer.setdefault(record.agent, []).append(record.file)
    for files in per_writer.values():  # each writer's records, all there, in its order
        assert files == [f"src/{i}.py" for i in range(1500)]
    assert len(sealed_segments(journal_dir(lock_dir))) >= 4


def test_a_writer_killed_at_any_moment_leaves_at_most_one_torn_record(lock_dir: Path) -> None:
    lock_dir.mkdir()
    steady = start_writer(lock_dir, "steady", -1)
    kills = 0
    for round_ in range(4):
        doomed = start_writer(lock_dir, f"doomed{round_}", -1)
        time.sleep(0.05 * (round_ + 1))
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        kills += 1
    steady.send_signal(signal.SIGKILL)
    steady.wait()
    kills += 1
    lines = all_lines(lock_dir)
    torn = [line for line in lines if parse_line(line) is None]
    assert len(torn) <= kills
    readable = list(FileJournal(lock_dir).records())
    assert len(readable) == len(lines) - len(torn)
    assert {r.agent for r in readable} >= {"steady", "doomed0"}
