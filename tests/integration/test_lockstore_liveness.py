"""Stale locks: reclaimed only on proof that the holder is dead, exactly once, and reported."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from lockstore_support import dead_pid, expect_line, kill, plant_holder, spawn

from lockyard.infra.lockstore import LockStore, Reclamation
from lockyard.infra.lockstore.liveness import Liveness, liveness_of, read_proc_stat
from polling_support import wait_until


def test_a_killed_holders_lock_is_reclaimed_by_the_next_acquirer_and_reported(
    repo: Path, lock_dir: Path
) -> None:
    holder = spawn(repo, lock_dir, "a.py", "crasher", "hold")
    expect_line(holder, "locked")
    reports: list[Reclamation] = []
    store = LockStore(repo, lock_dir, on_reclaim=reports.append)
    assert not store.try_lock("a.py", "bob")
    kill(holder)
    [info] = store.list_locks()
    assert info.liveness == "dead"
    assert info.holder is not None
    assert info.holder.pid == holder.pid
    assert store.try_lock("a.py", "bob")
    [report] = reports
    assert report.holder.agent_id == "crasher"
    assert report.lock_path == "a.py"
    assert report.reclaimed_by_agent == "bob"
    assert report.reclaimed_by_pid == os.getpid()
    assert "no longer exists" in report.reason
    assert store.holder("a.py") == "bob"


def test_reclaim_stale_reports_who_which_and_whose(repo: Path, lock_dir: Path) -> None:
    holders = [spawn(repo, lock_dir, f"{n}.py", f"agent-{n}", "hold") for n in range(2)]
    live = spawn(repo, lock_dir, "live.py", "survivor", "hold")
    for child in [*holders, live]:
        expect_line(child, "locked")
    for child in holders:
        kill(child)
    store = LockStore(repo, lock_dir)
    reclaimed = store.reclaim_stale()
    assert sorted((r.holder.agent_id, r.lock_path) for r in reclaimed) == [
        ("agent-0", "0.py"),
        ("agent-1", "1.py"),
    ]
    assert all(r.reclaimed_by_agent is None for r in reclaimed)
    assert store.reclaim_stale() == []
    assert store.holder("live.py") == "survivor"
    kill(live)


def test_a_live_holder_is_never_broken(repo: Path, lock_dir: Path) -> None:
    holder = spawn(repo, lock_dir, "a.py", "alive", "hold")
    expect_line(holder, "locked")
    store = LockStore(repo, lock_dir)
    assert not store.try_lock("a.py", "bob")
    assert store.reclaim_stale() == []
    [info] = store.list_locks()
    assert info.liveness == "alive"
    assert store.holder("a.py") == "alive"
    kill(holder)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"host": "elsewhere.example"}, "unknown"),
        ({"boot_id": "another-boot"}, "unknown"),
        ({"boot_id": None}, "unknown"),
        ({"pid_ns": "pid:[1]"}, "unknown"),
        ({"pid": 1, "start_time": 123456789}, "dead"),
    ],
)
def test_liveness_needs_proof(
    repo: Path, lock_dir: Path, override: dict[str, object], expected: str
) -> None:
    store = LockStore(repo, lock_dir)
    plant_holder(store, "a.py", "ghost", **override)
    [info] = store.list_locks()
    assert info.liveness == expected
    assert store.try_lock("a.py", "bob") == (expected == "dead")
    assert (store.holder("a.py") == "bob") == (expected == "dead")


def test_a_gone_pid_is_dead_and_a_zombie_is_dead(repo: Path, lock_dir: Path) -> None:
    store = LockStore(repo, lock_dir)
    plant_holder(store, "gone.py", "ghost", pid=dead_pid())
    assert store.list_locks()[0].liveness == "dead"
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_until(lambda: (read_proc_stat(zombie.pid) or ("Z",))[0] == "Z")
    stat = read_proc_stat(zombie.pid)
    assert stat is not None
    me = store.list_locks()[0].holder
    assert me is not None
    assert liveness_of(zombie.pid, stat[1], me.host, me.boot_id, me.pid_ns)[0] is Liveness.DEAD
    zombie.wait()


def test_concurrent_reclaimers_reclaim_exactly_once(repo: Path, lock_dir: Path) -> None:
    holder = spawn(repo, lock_dir, "a.py", "crasher", "hold")
    expect_line(holder, "locked")
    grabbers = [spawn(repo, lock_dir, "a.py", f"grabber-{n}", "grab", "stay") for n in range(4)]
    for child in grabbers:
        expect_line(child, "ready")
    kill(holder)
    for child in grabbers:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    outcomes = [expect_line(child, "").split() for child in grabbers]
    for child in grabbers:  # all four stay alive until every one has tried
        child.stdin.write("done\n")
        child.stdin.flush()
        child.wait()
    assert sorted(word for word, _count in outcomes) == ["lost", "lost", "lost", "won"]
    assert sum(int(count) for _word, count in outcomes) == 1


@pytest.mark.anyio
async def test_a_waiter_reclaims_when_the_holder_dies_during_the_wait(
    repo: Path, lock_dir: Path
) -> None:
    holder = spawn(repo, lock_dir, "a.py", "crasher", "hold")
    expect_line(holder, "locked")
    reports: list[Reclamation] = []
    store = LockStore(repo, lock_dir, liveness_interval=0.05, on_reclaim=reports.append)
    async with anyio.create_task_group() as group:
        group.start_soon(anyio.to_thread.run_sync, kill, holder)
        assert await store.acquire_async("a.py", "bob", timeout_seconds=30)
    assert [r.holder.agent_id for r in reports] == ["crasher"]


def test_a_dead_waiter_is_skipped_and_its_entry_removed(
    repo: Path, lock_dir: Path, tmp_path: Path
) -> None:
    store = LockStore(repo, lock_dir, liveness_interval=0.05)
    assert store.try_lock("a.py", "holder")
    log = tmp_path / "order.log"
    doomed = spawn(repo, lock_dir, "a.py", "doomed", "wait", "100", str(log))
    expect_line(doomed, "waiting")
    wait_until(lambda: [w.agent_id for w in store.waiters("a.py")] == ["doomed"])
    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    assert [w.agent_id for w in store.waiters("a.py")] == ["doomed"]  # still on disk...
    assert store.snapshot().waits == ()  # ...but a dead waiter waits for nothing
    patient = spawn(repo, lock_dir, "a.py", "patient", "wait", "100", str(log))
    expect_line(patient, "waiting")
    # The patient drops the dead entry ahead of it, then waits as the head.
    wait_until(lambda: [w.agent_id for w in store.waiters("a.py")] == ["patient"])
    assert store.snapshot().waits == (("patient", "a.py"),)
    assert store.release("a.py", "holder")
    expect_line(patient, "acquired")
    patient.wait()
    assert log.read_text().split() == ["patient"]
    assert store.waiters("a.py") == []
