"""Liveness and queue order across time and pid namespaces, with real `unshare` processes.

A process in another time namespace reads other start times shifted by its own boot-time
offset, and its monotonic clock runs elsewhere; a process in a pid namespace whose /proc was
not remounted has a pid that /proc does not know. None of that may cost a live holder its
lock, leave a dead holder's lock stuck, or reorder a queue.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lockstore_support import CHILD, expect_line

from lockyard.infra.lockstore import LockInfo, LockStore, Reclamation
from polling_support import wait_until

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="creating time and pid namespaces needs root and unshare(1)",
)

SHIFTED_BOOT = ["unshare", "--time", "--boottime", "100000"]
SHIFTED_MONOTONIC = ["unshare", "--time", "--monotonic", "100000"]
OWN_PID_NAMESPACE = ["unshare", "--pid", "--fork", "--kill-child"]


def spawn_in(
    prefix: list[str], repo: Path, lock_dir: Path, path: str, agent: str, mode: str, *extra: str
) -> subprocess.Popen[str]:
    """The lock store's test child, started inside `prefix` (an unshare command line)."""
    return subprocess.Popen(
        [*prefix, sys.executable, "-c", CHILD, str(repo), str(lock_dir), path, agent, mode, *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


# Namespaces a process can be in that make its clocks or its pid differ from the host's view.
ELSEWHERE = pytest.mark.parametrize(
    ("prefix", "agent"),
    [(SHIFTED_BOOT, "shifted"), (OWN_PID_NAMESPACE, "boxed")],
    ids=["another-boot-clock", "pid-namespace-without-its-proc"],
)


def stop(child: subprocess.Popen[str]) -> None:
    child.kill()
    child.wait()


def assert_held_by_a_live_holder(store: LockStore, agent: str) -> LockInfo:
    """`a.py` is `agent`'s, its holder counts as alive, and nobody else can take it."""
    assert not store.try_lock("a.py", "host")
    [info] = store.list_locks()
    assert info.liveness == "alive", info.liveness_reason
    assert store.holder("a.py") == agent
    return info


def test_a_holder_with_another_boot_clock_is_alive_and_its_lock_kept(
    repo: Path, lock_dir: Path
) -> None:
    holder = spawn_in(SHIFTED_BOOT, repo, lock_dir, "a.py", "shifted", "hold")
    try:
        expect_line(holder, "locked")
        store = LockStore(repo, lock_dir)
        assert_held_by_a_live_holder(store, "shifted")
        assert store.reclaim_stale() == []
        assert store.holder("a.py") == "shifted"
    finally:
        stop(holder)


def test_a_dead_holder_with_another_boot_clock_is_reclaimed(repo: Path, lock_dir: Path) -> None:
    holder = spawn_in(SHIFTED_BOOT, repo, lock_dir, "a.py", "shifted", "hold")
    expect_line(holder, "locked")
    stop(holder)  # unshare execs the child: this is the holder itself
    reports: list[Reclamation] = []
    store = LockStore(repo, lock_dir, on_reclaim=reports.append)
    assert store.try_lock("a.py", "host")
    assert [report.holder.agent_id for report in reports] == ["shifted"]


@ELSEWHERE
def test_a_process_in_another_namespace_keeps_off_a_live_hosts_lock(
    repo: Path, lock_dir: Path, prefix: list[str], agent: str
) -> None:
    store = LockStore(repo, lock_dir)
    assert store.try_lock("a.py", "host")
    grabber = spawn_in(prefix, repo, lock_dir, "a.py", agent, "grab")
    try:
        expect_line(grabber, "ready")
        assert grabber.stdin is not None
        grabber.stdin.write("go\n")
        grabber.stdin.flush()
        expect_line(grabber, "lost 0")
        assert store.holder("a.py") == "host"
    finally:
        stop(grabber)


def test_queue_order_is_arrival_order_whatever_a_waiters_clock_says(
    repo: Path, lock_dir: Path, tmp_path: Path
) -> None:
    """The first waiter's monotonic clock is far ahead; it still goes first."""
    log = tmp_path / "order"
    store = LockStore(repo, lock_dir)
    assert store.try_lock("a.py", "host")
    early = spawn_in(SHIFTED_MONOTONIC, repo, lock_dir, "a.py", "early", "wait", "100", str(log))
    late = None
    try:
        expect_line(early, "waiting")
        wait_until(lambda: [w.agent_id for w in store.waiters("a.py")] == ["early"])
        late = spawn_in([], repo, lock_dir, "a.py", "late", "wait", "100", str(log))
        expect_line(late, "waiting")
        wait_until(lambda: len(store.waiters("a.py")) == 2)
        assert [w.agent_id for w in store.waiters("a.py")] == ["early", "late"]
        assert store.release("a.py", "host")
        expect_line(early, "acquired")
        expect_line(late, "acquired")
        for child in (early, late):  # each writes the log while it holds the lock, then exits
            assert child.wait(60) == 0
        assert log.read_text().split() == ["early", "late"]
    finally:
        for child in (early, late):
            if child is not None:
                stop(child)


def test_a_holder_in_a_pid_namespace_without_its_own_proc_is_alive_then_reclaimed(
    repo: Path, lock_dir: Path
) -> None:
    """Its own pid (1) means another process to everyone else: it is known by /proc's pid."""
    holder = spawn_in(OWN_PID_NAMESPACE, repo, lock_dir, "a.py", "boxed", "hold")
    try:
        expect_line(holder, "locked")
        info = assert_held_by_a_live_holder(LockStore(repo, lock_dir), "boxed")
        assert info.holder is not None
        host_pid = info.holder.pid
        assert host_pid != 1
        assert Path(f"/proc/{host_pid}/cmdline").read_bytes().count(b"hold")
    finally:
        stop(holder)  # --kill-child: the holder dies with unshare
    reports: list[Reclamation] = []
    store = LockStore(repo, lock_dir, on_reclaim=reports.append)
    wait_until(lambda: store.list_locks()[0].liveness == "dead")  # killed with unshare
    assert store.try_lock("a.py", "host")
    assert [report.holder.agent_id for report in reports] == ["boxed"]
