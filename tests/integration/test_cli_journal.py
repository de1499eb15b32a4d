"""`lockyard log` and `lockyard stats`: the journal as an operator reads it, through the real
`lockyard` command."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from cli_support import LOCKYARD, lockyard

from lockyard.infra.lockstore.journal.files import JournalFiles, journal_dir
from lockyard.infra.lockstore.journal.record import CycleStep, JournalRecord, deadlock_record


def write(lock_dir: Path, *records: JournalRecord) -> None:
    lock_dir.mkdir(exist_ok=True)
    files = JournalFiles(journal_dir(lock_dir))
    for record in records:
        assert files.append(record)
    files.close()


def rec(now: float, ago: float, kind: str, agent: str, file: str, **more: object) -> JournalRecord:
    return JournalRecord(now - ago, kind, "ns", agent, file, "1.2", 77, "h", **more)  # type: ignore[arg-type]


def a_day(lock_dir: Path) -> None:
    """An afternoon's records, timed back from now: the tests' `--since` windows are relative
    to when the command runs, so the records must be too (not to when pytest imported this)."""
    now = time.time()
    write(
        lock_dir,
        rec(now, 3600, "grant", "codex-1", "src/models.py"),
        rec(now, 3500, "wait-begin", "claude-2", "src/models.py"),
        rec(now, 3300, "release", "codex-1", "src/models.py", held=300.0),
        rec(now, 3300, "hand-over", "claude-2", "src/models.py", other="codex-1"),
        rec(now, 3300, "wait-end", "claude-2", "src/models.py", outcome="granted", waited=200.0),
        rec(
            now, 600, "denied", "codex-1", "src/\x1b[2Jevil.py", guard="write", reason="not locked"
        ),
        deadlock_record(
            time=now - 60,
            namespace="ns",
            session="m",
            pid=1,
            host="h",
            cycle=[
                CycleStep("codex-1", "src/api.py", "claude-2"),
                CycleStep("claude-2", "src/models.py", "codex-1"),
            ],
            victim="claude-2",
            victim_waits_on="src/models.py",
            released=["src/api.py"],
            costs={"codex-1": 30.0, "claude-2": 12.0},
        ),
    )


def entries(shown: str) -> list[str]:
    """The record lines of `lockyard log`'s output, without the day lines between them."""
    return [line for line in shown.splitlines() if not line.startswith("-- ")]


def test_log_shows_the_last_records_and_filters_them(lock_dir: Path) -> None:
    a_day(lock_dir)
    shown = lockyard("log", "--lock-dir", str(lock_dir))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("-- ")  # the day, before its first record
    lines = entries(shown.stdout)  # (the hour before now may cross midnight: two days)
    assert len(lines) == 7
    assert "wait-end" in lines[4]
    assert "granted after 3m20s" in lines[4]
    assert "\x1b" not in shown.stdout
    assert "src/\\x1b[2Jevil.py" in shown.stdout
    assert "victim claude-2 released src/api.py" in lines[-1]
    only = lockyard("log", "--lock-dir", str(lock_dir), "--agent", "claude-2", "--kind",
                    "wait-end", "--kind", "deadlock")  # fmt: skip
    assert [line.split()[1] for line in entries(only.stdout)] == ["wait-end", "deadlock"]
    files = lockyard("log", "--lock-dir", str(lock_dir), "--file", "src/m*", "--since", "58m")
    assert [line.split()[1] for line in entries(files.stdout)] == [
        "release", "hand-over", "wait-end", "deadlock"
    ]  # fmt: skip
    last = lockyard("log", "--lock-dir", str(lock_dir), "-n", "1", "--json")
    record = json.loads(last.stdout)
    assert record["kind"] == "deadlock"
    assert record["costs"] == {"codex-1": 30.0, "claude-2": 12.0}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--kind", "grnat"], "unknown event kind 'grnat'"),
        (["--file", "["], "the '[' at character 1 is never closed"),
        (["--since", "yesterday-ish"], "is not a time lockyard understands"),
        (["--since", "10m", "--until", "20m"], "ends before it begins"),
    ],
)
def test_log_refuses_bad_filters_in_one_line(lock_dir: Path, args: list[str], says: str) -> None:
    a_day(lock_dir)
    refused = lockyard("log", "--lock-dir", str(lock_dir), *args)
    assert refused.returncode == 2
    assert says in refused.stderr
    assert "Traceback" not in refused.stderr


def test_log_of_a_lock_directory_that_does_not_exist_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    shown = lockyard("log", "--lock-dir", str(missing))
    assert shown.returncode == 0
    assert "does not exist yet" in shown.stdout
    assert not missing.exists()


def test_log_follow_prints_new_records_as_they_are_written(lock_dir: Path) -> None:
    a_day(lock_dir)
    follower = subprocess.Popen(
        [LOCKYARD, "log", "--lock-dir", str(lock_dir), "-f", "-n", "1", "--json"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert follower.stdout is not None
        assert json.loads(follower.stdout.readline())["kind"] == "deadlock"
        write(lock_dir, rec(time.time(), 0, "grant", "late-agent", "src/new.py"))
        assert json.loads(follower.stdout.readline())["agent"] == "late-agent"
    finally:
        follower.terminate()
        follower.wait(timeout=30)


def test_stats_shows_hot_files_agents_and_deadlock_costs(lock_dir: Path) -> None:
    a_day(lock_dir)
    shown = lockyard("stats", "--lock-dir", str(lock_dir))
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "7 records" in text
    assert "src/models.py" in text
    assert "Deadlocks: 1, costing 42s" in text
    assert "claude-2 12s" in text
    figures = json.loads(lockyard("stats", "--lock-dir", str(lock_dir), "--json").stdout)
    models = figures["files"]["src/models.py"]
    assert (models["holds"], models["waits"], models["waited"]) == (2, 1, 200.0)
    assert models["contention"] == 0.5
    assert models["held"] == 300.0
    assert figures["agents"]["claude-2"]["victim"] == 1
    assert figures["deadlock_cost"] == 42.0
    recent = json.loads(
        lockyard("stats", "--lock-dir", str(lock_dir), "--since", "15m", "--json").stdout
    )
    assert recent["records"] == 2
    assert recent["files"]["src/\x1b[2Jevil.py"]["denied"] == 1
    one = json.loads(
        lockyard("stats", "--lock-dir", str(lock_dir), "--agent", "codex-1", "--json").stdout
    )
    assert list(one["agents"]) == ["codex-1"]
    assert one["files"] == {}
