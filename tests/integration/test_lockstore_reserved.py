"""A free lock that only a queued waiter blocks is visible: `list_locks` lists it as reserved
for that waiter, while `snapshot()` keeps reporting only real holds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from lockstore_support import dead_pid, expect_line, spawn, wait_until

from lockyard.infra.lockstore.liveness import ProcessIdentity, current_process, new_token
from lockyard.infra.lockstore.paths import lock_name
from lockyard.infra.lockstore.records import encode_waiter
from lockyard.infra.tools.locking import LockStore


@pytest.fixture
def stalled_waiter(repo: Path, lock_dir: Path, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A holds f.py; B (a live process) queues for it and is SIGSTOPped; A releases."""
    store = LockStore(repo, lock_dir)
    assert store.try_lock("f.py", "A")
    waiter = spawn(repo, lock_dir, "f.py", "B", "wait", "100", str(tmp_path / "log"))
    expect_line(waiter, "waiting")
    wait_until(lambda: [w.agent_id for w in store.waiters("f.py")] == ["B"])
    waiter.send_signal(signal.SIGSTOP)
    assert store.release("f.py", "A")
    yield waiter
    waiter.send_signal(signal.SIGCONT)
    waiter.kill()
    waiter.wait()


def test_a_lock_blocked_only_by_a_stalled_waiter_is_listed_as_reserved(
    repo: Path, lock_dir: Path, stalled_waiter: subprocess.Popen[str]
) -> None:
    store = LockStore(repo, lock_dir)
    assert not store.try_lock("f.py", "C")  # B is the live head: C may not jump the queue
    [info] = store.list_locks()
    assert info.lock_path == str(repo / "f.py")
    assert info.namespace == str(repo)
    assert info.holder is None
    assert info.problem is None
    assert info.liveness == "alive"
    assert "reserved for the first waiter B" in info.liveness_reason
    assert [(w.agent_id, w.pid) for w in info.waiters] == [("B", stalled_waiter.pid)]
    snapshot = store.snapshot()
    assert snapshot.holds == {}  # reserved is not held: no hold, no wait-for edge to anyone
    assert snapshot.waits == (("B", str(repo / "f.py")),)
    assert snapshot.locks == (info,)


def test_lockyard_status_shows_the_lock_as_free_and_reserved_for_the_waiter(
    repo: Path, lock_dir: Path, stalled_waiter: subprocess.Popen[str]
) -> None:
    lockyard = str(Path(sys.executable).parent / "lockyard")
    wide = os.environ | {"COLUMNS": "200"}
    shown = subprocess.run(
        [lockyard, "status", "--lock-dir", str(lock_dir)], capture_output=True, text=True, env=wide
    )
    assert shown.returncode == 0, shown.stderr
    assert "No locks" not in shown.stdout
    [row] = [line for line in shown.stdout.splitlines() if "f.py" in line]
    assert "free, reserved for B" in row
    assert "unreadable" not in shown.stdout
    payload = subprocess.run(
        [lockyard, "status", "--lock-dir", str(lock_dir), "--json"], capture_output=True, text=True
    )
    assert payload.returncode == 0, payload.stderr
    [lock] = json.loads(payload.stdout)["locks"]
    assert lock["holder"] is None
    assert lock["problem"] is None
    assert [w["agent_id"] for w in lock["waiters"]] == ["B"]
    assert "reserved for the first waiter B" in lock["liveness_reason"]
    assert json.loads(payload.stdout)["deadlocks"] == []


def test_a_queue_of_dead_waiters_reserves_nothing(repo: Path, lock_dir: Path) -> None:
    store = LockStore(repo, lock_dir)
    key = store.canonicalize("f.py")
    me = current_process()
    ghost = ProcessIdentity(dead_pid(), None, me.host, me.boot_id, me.pid_ns)
    token = new_token()
    store._dir.enqueue(
        lock_name(store.namespace, key),
        lambda ticket: encode_waiter(ghost, "ghost", token, ticket, key, store.namespace),
    )
    assert [w.agent_id for w in store.waiters("f.py")] == ["ghost"]
    assert store.list_locks() == []
    assert store.try_lock("f.py", "C")  # and the dead entry does not block either
    [info] = store.list_locks()
    assert info.holder is not None
    assert info.holder.agent_id == "C"


def test_a_held_lock_with_waiters_is_listed_once(repo: Path, lock_dir: Path) -> None:
    store = LockStore(repo, lock_dir)
    assert store.try_lock("f.py", "A")
    waiter = spawn(repo, lock_dir, "f.py", "B", "wait", "100", str(lock_dir.parent / "log"))
    try:
        expect_line(waiter, "waiting")
        wait_until(lambda: [w.agent_id for w in store.waiters("f.py")] == ["B"])
        [info] = store.list_locks()
        assert info.holder is not None
        assert info.holder.agent_id == "A"
        assert [w.agent_id for w in info.waiters] == ["B"]
    finally:
        assert store.release("f.py", "A")
        expect_line(waiter, "acquired")
        waiter.wait()
