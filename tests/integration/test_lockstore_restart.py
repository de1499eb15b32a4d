"""A restarted agent (same agent id, new process) never inherits its dead predecessor's lock.

The lock belongs to the agent id, but its liveness follows the process that took the grant:
keeping a dead predecessor's grant would let anyone reclaim the lock from under the new
process while it believes it holds it (two processes in the file at once).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from lockstore_support import expect_line, kill, spawn

from lockyard.infra.lockstore import LockStore, Reclamation
from polling_support import wait_until


def test_a_restarted_agent_takes_a_fresh_grant_and_others_cannot_reclaim_it(
    repo: Path, lock_dir: Path
) -> None:
    first = spawn(repo, lock_dir, "src/g.py", "bob", "hold")
    expect_line(first, "locked")
    kill(first)  # SIGKILL: bob's first process never released
    restarted = spawn(repo, lock_dir, "src/g.py", "bob", "hold")
    expect_line(restarted, "locked")
    store = LockStore(repo, lock_dir)
    record = store.holder_record("src/g.py")
    assert record is not None
    assert (record.agent_id, record.pid) == ("bob", restarted.pid)
    assert not store.try_lock("src/g.py", "alice")  # the live restarted bob holds it
    assert store.reclaim_stale() == []
    assert store.holder_record("src/g.py") == record
    kill(restarted)


def test_the_dead_predecessors_grant_is_reclaimed_by_token_and_reported(
    repo: Path, lock_dir: Path
) -> None:
    first = spawn(repo, lock_dir, "a.py", "bob", "hold")
    expect_line(first, "locked")
    dead = LockStore(repo, lock_dir).holder_record("a.py")
    assert dead is not None
    kill(first)
    reports: list[Reclamation] = []
    store = LockStore(repo, lock_dir, on_reclaim=reports.append)
    assert store.try_lock("a.py", "bob")
    [report] = reports
    assert report.holder == dead
    assert report.reclaimed_by_agent == "bob"
    assert "no longer exists" in report.reason
    fresh = store.holder_record("a.py")
    assert fresh is not None
    assert fresh.pid == os.getpid()
    assert fresh.token != dead.token
    assert store.try_lock("a.py", "bob")  # re-acquire by the live holder keeps the grant
    assert store.holder_record("a.py") == fresh
    assert reports == [report]
    assert store.release("a.py", "bob")
    assert store.holder("a.py") is None


def test_a_restarted_agent_still_queues_behind_a_live_waiter(
    repo: Path, lock_dir: Path, tmp_path: Path
) -> None:
    first = spawn(repo, lock_dir, "a.py", "bob", "hold")
    expect_line(first, "locked")
    log = tmp_path / "order.log"
    carol = spawn(repo, lock_dir, "a.py", "carol", "wait", "100", str(log))
    expect_line(carol, "waiting")
    store = LockStore(repo, lock_dir)
    wait_until(lambda: [w.agent_id for w in store.waiters("a.py")] == ["carol"])
    carol.send_signal(signal.SIGSTOP)  # alive but unable to react to bob's death
    try:
        kill(first)
        reports: list[Reclamation] = []
        restarted = LockStore(repo, lock_dir, on_reclaim=reports.append)
        assert not restarted.try_lock("a.py", "bob")  # carol came first
        assert [r.holder.agent_id for r in reports] == ["bob"]  # the dead grant is gone
        # ... freed for carol, first in line (or handed over to her, when she staged her
        # grant before she was stopped): hers to take or accept once she runs again
        assert restarted.holder("a.py") in (None, "carol")
        [info] = restarted.list_locks()
        assert "reserved for the first waiter carol" in info.liveness_reason
    finally:
        carol.send_signal(signal.SIGCONT)
    expect_line(carol, "acquired")
    carol.wait()
    assert log.read_text().split() == ["carol"]


def test_the_same_agent_id_in_another_live_process_shares_the_grant(
    repo: Path, lock_dir: Path
) -> None:
    other = spawn(repo, lock_dir, "a.py", "bob", "hold")
    expect_line(other, "locked")
    store = LockStore(repo, lock_dir)
    assert store.try_lock("a.py", "bob")  # the lock belongs to the agent id (see Limits)
    record = store.holder_record("a.py")
    assert record is not None
    assert record.pid == other.pid  # the grant, and its liveness, stay the first process's
    assert not store.try_lock("a.py", "alice")
    kill(other)
