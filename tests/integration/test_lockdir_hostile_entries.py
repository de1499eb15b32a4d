"""Entries the store did not write, planted in a real lock directory: FIFOs where records,
queue entries or victim notices belong, stray `*.tmp-*` files, another user's queue. No
command blocks on them, none follows them, and each is reported instead of failing the work
around it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from lockstore_support import dead_pid, plant_holder

from lockyard.infra.crossproc.notices import VictimNoticeBoard, notice_file_name
from lockyard.infra.lockstore import LockDirError, LockStore
from lockyard.infra.lockstore.paths import lock_name

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> LockStore:
    return LockStore(repo, lock_dir)


def _name(store: LockStore, path: str) -> str:
    return lock_name(store.namespace, store.canonicalize(path))


def _lockyard(lock_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command as a real process; a hang fails the test through the timeout."""
    return subprocess.run(
        [LOCKYARD, *args, "--lock-dir", str(lock_dir)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def _fifo_in_place_of_the_record(store: LockStore, path: str) -> Path:
    lock = store.lock_dir / f"{_name(store, path)}.lock"
    lock.mkdir()
    os.mkfifo(lock / "token")
    return lock


def test_a_fifo_in_place_of_a_lock_record_blocks_nobody(store: LockStore) -> None:
    lock = _fifo_in_place_of_the_record(store, "a.py")
    assert not store.try_lock("a.py", "alice")  # never guessed free, never broken
    [info] = store.list_locks()
    assert info.problem is not None
    assert "FIFO" in info.problem
    assert store.reclaim_stale() == []
    for args in (("status",), ("status", "--json"), ("clean",), ("monitor", "--once")):
        done = _lockyard(store.lock_dir, *args)
        assert "Traceback" not in done.stderr, args
        assert done.returncode in (0, 5), (args, done.stderr)
    assert os.listdir(lock) == ["token"]  # reported, never removed


def test_a_fifo_in_place_of_a_queue_entry_is_skipped(store: LockStore) -> None:
    queue = store.lock_dir / f"{_name(store, 'a.py')}.q"
    queue.mkdir()
    os.mkfifo(queue / f"{1:020d}")
    assert store.waiters("a.py") == []
    assert store.try_lock("a.py", "alice")  # a FIFO is no waiter
    assert store.release("a.py", "alice")
    assert store.snapshot().waits == ()
    for args in (("status", "--json"), ("monitor", "--once"), ("clean",)):
        done = _lockyard(store.lock_dir, *args)
        assert done.returncode == 0, (args, done.stderr)


def test_a_waiter_queues_behind_a_fifo_entry_and_gets_the_lock(store: LockStore) -> None:
    queue = store.lock_dir / f"{_name(store, 'a.py')}.q"
    queue.mkdir()
    os.mkfifo(queue / f"{1:020d}")
    assert store.try_lock("a.py", "alice")
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(store.acquire("a.py", "bob", 30)))
    waiter.start()
    while not store.waiters("a.py"):
        waiter.join(0.005)
    assert store.release("a.py", "alice")
    waiter.join(30)
    assert results == [True]


def test_a_fifo_in_place_of_a_victim_notice_blocks_nobody(store: LockStore) -> None:
    board = VictimNoticeBoard(store.lock_dir)
    os.mkfifo(board.ensure() / notice_file_name("bob"))
    assert board.read("bob") is None
    assert board.notices() == []
    for args in (("status",), ("monitor", "--once")):
        done = _lockyard(store.lock_dir, *args)
        assert done.returncode == 0, (args, done.stderr)


def test_a_stray_staging_file_does_not_fail_clean_and_reclaimed_locks_are_reported(
    store: LockStore,
) -> None:
    plant_holder(store, "gone.py", "ghost", pid=dead_pid())
    (store.lock_dir / f"{_name(store, 'x.py')}.tmp-stray").write_text("not a directory")
    done = _lockyard(store.lock_dir, "clean", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [entry["agent_id"] for entry in report["released"]] == ["ghost"]
    assert store.holder("gone.py") is None
    assert (store.lock_dir / f"{_name(store, 'x.py')}.tmp-stray").exists()  # not ours to delete


def test_a_queue_symlink_is_never_followed_by_a_waiter(store: LockStore, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert store.try_lock("a.py", "alice")
    os.symlink(elsewhere, store.lock_dir / f"{_name(store, 'a.py')}.q")
    with pytest.raises(LockDirError, match="Remove it"):
        store.acquire("a.py", "bob", timeout_seconds=1)
    assert os.listdir(elsewhere) == []
    assert store.holder("a.py") == "alice"


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's directory needs root")
def test_another_users_queue_directory_is_refused_not_written(store: LockStore) -> None:
    assert store.try_lock("a.py", "alice")
    queue = store.lock_dir / f"{_name(store, 'a.py')}.q"
    queue.mkdir()
    os.chown(queue, 65534, 65534)
    with pytest.raises(LockDirError, match="belongs to uid 65534"):
        store.acquire("a.py", "bob", timeout_seconds=1)
    assert os.listdir(queue) == []
