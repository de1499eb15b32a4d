"""What crashes leave behind (staging directories, dead or planted queue entries) is cleaned
up or ignored, and never mistaken for a lock."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from lockyard.infra.lockstore import LockDirError, LockStore
from lockyard.infra.lockstore.liveness import current_process
from lockyard.infra.lockstore.lockdir import disk as lockdir
from lockyard.infra.lockstore.lockdir import sleep
from lockyard.infra.lockstore.paths import lock_name
from polling_support import wait_until


@pytest.fixture
def store(tmp_path: Path) -> LockStore:
    (tmp_path / "repo").mkdir()
    return LockStore(tmp_path / "repo", tmp_path / "locks")


def _record(store: LockStore, filepath: str, **override: object) -> str:
    me = current_process()
    record: dict[str, object] = {
        "agent_id": "crashed",
        "token": "tok",
        "pid": me.pid,
        "start_time": me.start_time,
        "host": me.host,
        "boot_id": me.boot_id,
        "pid_ns": me.pid_ns,
        "lock_path": store.canonicalize(filepath),
        "namespace": store.namespace,
        "acquired_at": time.time(),
    }
    record.update(override)
    return json.dumps(record)


def _staging(store: LockStore, filepath: str, token: str, record: str | None, age: float) -> Path:
    name = lock_name(store.namespace, store.canonicalize(filepath))
    staging = store.lock_dir / f"{name}.tmp-{token}"
    staging.mkdir()
    if record is not None:
        os.symlink(record, staging / token)
    old = time.time() - age
    os.utime(staging, (old, old))
    return staging


def test_reclaim_stale_removes_dead_and_old_empty_staging_and_keeps_live_writers_ones(
    store: LockStore,
) -> None:
    dead = _staging(store, "a.py", "t1", _record(store, "a.py", pid=1, start_time=-1), 0)
    empty_old = _staging(store, "b.py", "t2", None, 3600)
    empty_new = _staging(store, "c.py", "t3", None, 0)
    live_new = _staging(store, "d.py", "t4", _record(store, "d.py"), 0)
    live_old = _staging(store, "e.py", "t5", _record(store, "e.py"), 3600)
    corrupt = _staging(store, "f.py", "t6", "{oops", 3600)
    assert store.reclaim_stale() == []
    assert not dead.exists()
    assert not empty_old.exists()
    assert empty_new.exists()
    assert live_new.exists()
    assert live_old.exists()  # however old its clock makes it: its writer is alive
    assert corrupt.exists()
    assert store.list_locks() == []
    assert store.try_lock("a.py", "alice")


def test_corrupt_and_dead_queue_entries_are_ignored_then_dropped(store: LockStore) -> None:
    name = lock_name(store.namespace, store.canonicalize("a.py"))
    queue = store.lock_dir / f"{name}.q"
    (queue / f"{1:020d}").mkdir(parents=True)
    os.symlink("{garbage", queue / f"{1:020d}" / "x")
    record = json.loads(_record(store, "a.py", pid=1, start_time=-1))
    record.update(ticket=2, since=0.0)
    (queue / f"{2:020d}").mkdir()
    os.symlink(json.dumps(record), queue / f"{2:020d}" / record["token"])
    assert [w.agent_id for w in store.waiters("a.py")] == ["crashed"]
    assert store.snapshot().waits == ()
    assert store.try_lock("a.py", "alice")  # neither entry is a live waiter
    assert store.release("a.py", "alice")
    store.reclaim_stale()
    assert [entry.name for entry in queue.iterdir()] == [f"{1:020d}"]


def test_reclaim_stale_removes_the_entries_dead_waiters_left_half_built_or_half_removed(
    store: LockStore,
) -> None:
    # A waiter that died building its entry, and one emptied by a remover that died before
    # removing it, keep the queue (and every newcomer's slower look at it) until a clean-up.
    name = lock_name(store.namespace, store.canonicalize("a.py"))
    queue = store.lock_dir / f"{name}.q"
    waiter = json.loads(_record(store, "a.py", token="t1", pid=1, start_time=-1))
    waiter.update(ticket=1, since=0.0)
    (queue / ".new-t1").mkdir(parents=True)
    os.symlink(json.dumps(waiter), queue / ".new-t1" / "t1")
    os.symlink(json.dumps(waiter), queue / ".new-t1" / lockdir.RECORD_COPY)  # built whole
    (queue / f"{1:020d}").mkdir()  # emptied
    assert store.waiters("a.py") == []
    store.reclaim_stale()
    assert not queue.exists()
    live = json.loads(_record(store, "a.py", token="t2"))
    live.update(ticket=1, since=0.0)
    (queue / ".new-t2").mkdir(parents=True)
    os.symlink(json.dumps(live), queue / ".new-t2" / "t2")
    store.reclaim_stale()
    assert os.listdir(queue) == [".new-t2"]  # its waiter is alive: still building it


def test_a_planted_queue_symlink_is_skipped_by_scans(store: LockStore, tmp_path: Path) -> None:
    name = lock_name(store.namespace, store.canonicalize("a.py"))
    (tmp_path / "elsewhere").mkdir()
    assert store.try_lock("a.py", "alice")
    os.symlink(tmp_path / "elsewhere", store.lock_dir / f"{name}.q")
    assert store.release("a.py", "alice")
    with pytest.raises(LockDirError, match="Remove it"):
        store.try_lock("a.py", "bob")  # fairness cannot be judged: say so, take nothing
    assert store.try_lock("b.py", "alice")
    assert [info.waiters for info in store.list_locks()] == [()]
    assert store.snapshot().waits == ()
    assert store.reclaim_stale() == []
    assert os.listdir(tmp_path / "elsewhere") == []


def test_a_record_whose_token_disagrees_with_its_name_is_corrupt(store: LockStore) -> None:
    name = lock_name(store.namespace, store.canonicalize("a.py"))
    lock = store.lock_dir / f"{name}.lock"
    lock.mkdir()
    os.symlink(_record(store, "a.py", token="other"), lock / "tok")
    [info] = store.list_locks()
    assert info.problem is not None
    assert "records token other" in info.problem
    assert store.cleanup_agent_locks("crashed") == []
    assert store.reclaim_stale() == []


def test_a_planted_file_in_place_of_a_queue_is_refused_when_waiting(
    store: LockStore, tmp_path: Path
) -> None:
    assert store.try_lock("a.py", "alice")
    name = lock_name(store.namespace, store.canonicalize("a.py"))
    (store.lock_dir / f"{name}.q").write_text("planted")
    with pytest.raises(LockDirError, match="Remove it"):
        store.acquire("a.py", "bob", timeout_seconds=1)
    assert store.holder("a.py") == "alice"
    assert (store.lock_dir / f"{name}.q").read_text() == "planted"


def test_a_publish_whose_staging_was_reaped_reports_not_taken(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = store.directory
    original = lockdir.write_record

    def reaped_meanwhile(dir_fd: int, entry: str, record: str) -> None:
        original(dir_fd, entry, record)
        if "/" in entry:  # the grant's record in its staging, not the holder card
            staging, token = entry.split("/")
            directory.stagings.discard_staging(staging, token)  # reclaim_stale got there first

    monkeypatch.setattr(lockdir, "write_record", reaped_meanwhile)
    assert store.try_lock("a.py", "alice") is False
    monkeypatch.undo()
    assert store.try_lock("a.py", "alice") is True
    assert [n for n in os.listdir(store.lock_dir) if ".tmp-" in n] == []


def test_long_waiter_records_are_written_whole(store: LockStore, tmp_path: Path) -> None:
    deep = "/".join(["w" * 200] * 18) + "/file.py"
    assert store.try_lock(deep, "alice")
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(store.acquire(deep, "bob", 20)))
    thread.start()
    wait_until(lambda: store.waiters(deep), "bob queued for the deep file")
    [waiter] = store.waiters(deep)
    assert waiter.agent_id == "bob"
    assert waiter.lock_path == deep
    store.release(deep, "alice")
    thread.join(20)
    assert result == [True]


def test_reclaim_stale_removes_old_doorbells_nobody_listens_to_and_keeps_live_ones(
    store: LockStore,
) -> None:
    name = lock_name(store.namespace, store.canonicalize("a.py"))
    listened = _opened(store, name, "live")
    os.close(_opened(store, name, "young"))  # its waiter is about to open it, or just left
    os.close(_opened(store, name, "dead"))  # its waiter died: nobody reads it
    old = time.time() - 3600
    for token in ("live", "dead"):
        os.utime(store.lock_dir / f"{name}.bell-{token}", (old, old))
    store.reclaim_stale()
    left = sorted(entry.name for entry in store.lock_dir.iterdir() if ".bell-" in entry.name)
    assert left == [f"{name}.bell-live", f"{name}.bell-young"]
    sleep.ring(store.directory, name, "live")  # a release rings it: the waiter can read the ring
    assert os.read(listened, 16) == b"\0"
    sleep.close_doorbell(store.directory, name, "live", listened)
    assert not (store.lock_dir / f"{name}.bell-live").exists()


def _opened(store: LockStore, name: str, token: str) -> int:
    fd = sleep.open_doorbell(store.directory, name, token)
    assert fd is not None
    return fd
