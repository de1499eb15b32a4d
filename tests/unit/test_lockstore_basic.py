"""The lock store's basic contract on a real lock directory."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from lockyard.infra.lockstore import LockStore


def test_lock_is_exclusive_and_reacquire_succeeds(store: LockStore) -> None:
    assert store.try_lock("a.py", "alice")
    assert not store.try_lock("a.py", "bob")
    assert store.try_lock("a.py", "alice")
    assert store.holder("a.py") == "alice"
    assert store.is_locked("a.py")


def test_only_the_holder_releases(store: LockStore) -> None:
    assert store.try_lock("a.py", "alice")
    assert not store.release("a.py", "bob")
    assert store.holder("a.py") == "alice"
    assert store.release("a.py", "alice")
    assert not store.release("a.py", "alice")
    assert store.holder("a.py") is None
    assert not store.is_locked("a.py")
    assert store.try_lock("a.py", "bob")


def test_holder_record_names_agent_process_and_key(store: LockStore, repo: Path) -> None:
    assert store.try_lock("src/../a.py", "alice")
    record = store.holder_record("a.py")
    assert record is not None
    assert record.agent_id == "alice"
    assert record.pid == os.getpid()
    assert record.lock_path == "a.py"
    assert record.namespace == str(repo)
    assert record.checkout == str(repo)  # where the holder's checkout is
    assert record.token
    assert record.boot_id


def test_list_locks_and_snapshot(store: LockStore, repo: Path) -> None:
    store.try_lock("a.py", "alice")
    store.try_lock("b.py", "bob")
    infos = store.list_locks()
    assert [(info.lock_path, info.holder and info.holder.agent_id) for info in infos] == [
        ("a.py", "alice"),
        ("b.py", "bob"),
    ]
    assert all(info.liveness == "alive" for info in infos)
    snapshot = store.snapshot()
    assert snapshot.holds == {"a.py": "alice", "b.py": "bob"}
    assert snapshot.waits == ()
    assert snapshot.model_dump(mode="json")["holds"]


def test_cleanup_releases_only_that_agent(store: LockStore, repo: Path) -> None:
    store.try_lock("a.py", "alice")
    store.try_lock("b.py", "alice")
    store.try_lock("c.py", "bob")
    assert store.cleanup_agent_locks("alice") == ["a.py", "b.py"]
    assert store.holder("a.py") is None
    assert store.holder("c.py") == "bob"
    assert store.cleanup_agent_locks("alice") == []


def test_a_reader_never_sees_a_half_written_holder(store: LockStore, repo: Path) -> None:
    stop = threading.Event()
    seen = {None: 0, "writer": 0}
    problems: list[BaseException] = []

    def read() -> None:
        reader = LockStore(repo, store.lock_dir)  # another "process" reading the directory
        while not stop.is_set():
            try:
                record = reader.holder_record("a.py")
            except BaseException as error:  # pragma: no cover - the failure being tested
                problems.append(error)
                return
            seen[None if record is None else record.agent_id] += 1
            time.sleep(0)  # hand the GIL to the writer

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for _ in range(20_000):
            if min(seen.values()) >= 20:
                break
            assert store.try_lock("a.py", "writer")
            assert store.release("a.py", "writer")
    finally:
        stop.set()
        thread.join()
    assert problems == []
    assert set(seen) == {None, "writer"}
    assert min(seen.values()) >= 20
