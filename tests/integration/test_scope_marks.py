"""The marks of directory and glob locks go away with the locks (`lockdir/scope_marks.py`),
and a file grant that finds none never overlaps a directory lock: real processes race a
directory lock's take and release against file grants under it, each checking that it holds
alone; a SIGKILLed holder's mark is pruned with its lock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from lockstore_support import expect_line, kill, spawn

from lock_dir_listing import lock_dir_entries
from lockyard.infra.lockstore import LockStore

RACER = r"""
import os, sys
from lockyard.infra.lockstore import LockStore
repo, lock_dir, path, agent, rounds, seen = sys.argv[1:7]
store = LockStore(repo, lock_dir, liveness_interval=0.05)
mine = os.path.join(seen, agent)
for _ in range(int(rounds)):
    assert store.acquire(path, agent, timeout_seconds=60, poll_interval_ms=5)
    # Holding: say so, then look for a conflicting holder that says so too (each says
    # before it looks, so of two overlapping holders at least one sees the other).
    os.close(os.open(mine, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    others = [n for n in os.listdir(seen) if n != agent and (n == "dir") != (agent == "dir")]
    if others:
        print("overlap", agent, others, flush=True)
        sys.exit(1)
    os.unlink(mine)
    assert store.release(path, agent)
print("done", flush=True)
"""


@pytest.fixture
def tree(repo: Path) -> Path:
    (repo / "src" / "api").mkdir(parents=True)
    return repo


def racer(
    tree: Path, lock_dir: Path, path: str, agent: str, rounds: int, seen: Path
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            RACER,
            str(tree),
            str(lock_dir),
            path,
            agent,
            str(rounds),
            str(seen),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_file_grants_racing_a_directory_lock_taken_and_released_never_overlap_it(
    tree: Path, lock_dir: Path, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    racers = [
        racer(tree, lock_dir, "src/", "dir", 100, seen),
        racer(tree, lock_dir, "src/a.py", "ann", 200, seen),
        racer(tree, lock_dir, "src/api/b.py", "bob", 200, seen),
    ]
    outputs = [process.communicate(timeout=600)[0] for process in racers]
    assert [process.returncode for process in racers] == [0, 0, 0], outputs
    assert lock_dir_entries(lock_dir) == [
        e for e in lock_dir_entries(lock_dir) if e.endswith(".card")
    ]


def test_a_sigkilled_holders_marks_are_pruned_with_its_locks(tree: Path, lock_dir: Path) -> None:
    holders = [spawn(tree, lock_dir, key, "ann", "hold") for key in ("src/", "docs/**/*.md")]
    for holder in holders:
        expect_line(holder, "locked")
    assert len(os.listdir(lock_dir / "scopes")) == 2
    assert len(os.listdir(lock_dir / "globs")) == 1
    store = LockStore(tree, lock_dir)
    assert not store.try_lock("src/a.py", "bob")  # the marks are there: it looks above
    for holder in holders:
        kill(holder)
    assert len(store.reclaim_stale()) == 2
    left = lock_dir_entries(lock_dir)
    assert "scopes" not in left, left
    assert "globs" not in left, left
    assert store.try_lock("src/a.py", "bob")
    assert store.try_lock("docs/x.md", "bob")


def test_a_revoked_directory_locks_mark_goes_when_its_holder_is_told(
    tree: Path, lock_dir: Path
) -> None:
    """An operator's store revokes ann's src/ (its process released it); the mark ann's store
    left goes when ann's store hears of it, so file grants stop looking above at once."""
    mine, operators = LockStore(tree, lock_dir), LockStore(tree, lock_dir)
    assert mine.try_lock("src/", "ann")
    assert operators.revoke("ann", "stalled") == ["src/"]
    assert "scopes" in os.listdir(lock_dir)  # another process's mark: not the operator's
    [lost] = mine.take_lost_locks("ann")
    assert (lost.filepath, lost.reason) == ("src/", "stalled")
    assert "scopes" not in os.listdir(lock_dir)
