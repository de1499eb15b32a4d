"""Queues of real processes: waiters killed in line or in the middle of a handoff.

Every waiter here polls once a minute, so only push wake-ups (inotify, pidfds) can move the
queue before the test's patience runs out.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path

import pytest
from lockstore_support import expect_line, kill, spawn

from lockyard.infra.lockstore import LockStore
from polling_support import wait_until

PUSH_ONLY_MS = "60000"


def _queue(
    repo: Path, lock_dir: Path, log: Path, store: LockStore, agents: list[str]
) -> dict[str, subprocess.Popen[str]]:
    """Start one waiting process per agent, each queued before the next starts."""
    children = {}
    for agent in agents:
        children[agent] = spawn(repo, lock_dir, "a.py", agent, "wait", PUSH_ONLY_MS, str(log))
        expect_line(children[agent], "waiting")
        wait_until(lambda agent=agent: agent in [w.agent_id for w in store.waiters("a.py")])
    return children


def _granted(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_waiters_killed_in_line_are_passed_over_and_the_rest_keep_their_order(
    repo: Path, lock_dir: Path, tmp_path: Path
) -> None:
    store = LockStore(repo, lock_dir, liveness_interval=60)
    assert store.try_lock("a.py", "holder")
    log = tmp_path / "granted"
    children = _queue(repo, lock_dir, log, store, ["c0", "c1", "c2", "c3", "c4"])
    kill(children["c0"])  # the head
    kill(children["c2"])  # one in the middle
    assert store.release("a.py", "holder")
    for agent in ("c1", "c3", "c4"):
        expect_line(children[agent], "acquired")
        children[agent].wait(60)
    assert _granted(log) == ["c1", "c3", "c4"]
    assert store.waiters("a.py") == []
    assert store.holder("a.py") is None


@pytest.mark.parametrize("round_", range(3))
def test_a_head_killed_during_the_handoff_leaves_the_lock_to_its_successor(
    repo: Path, lock_dir: Path, tmp_path: Path, round_: int
) -> None:
    store = LockStore(repo, lock_dir, liveness_interval=60)
    assert store.try_lock("a.py", "holder")
    log = tmp_path / "granted"
    children = _queue(repo, lock_dir, log, store, ["head", "next"])
    children["head"].send_signal(signal.SIGSTOP)  # it must not finish its turn on its own
    assert store.release("a.py", "holder")
    if round_ == 1:  # the head may hold the lock or still wait when it dies: both happen
        children["head"].send_signal(signal.SIGCONT)
    kill(children["head"])
    expect_line(children["next"], "acquired")
    children["next"].wait(60)
    assert "next" in _granted(log)
    assert store.waiters("a.py") == []
    assert store.holder("a.py") is None


def test_a_waiter_whose_entry_is_ended_queues_again_without_waiting_for_a_recheck(
    repo: Path, lock_dir: Path
) -> None:
    store = LockStore(repo, lock_dir, liveness_interval=60)  # re-checks minutes apart
    assert store.try_lock("a.py", "holder")
    granted: dict[str, bool] = {}

    def wait(agent: str) -> None:
        granted[agent] = store.acquire("a.py", agent, 60, poll_interval_ms=60_000)

    threads = {
        agent: threading.Thread(target=wait, args=(agent,), daemon=True) for agent in ("A", "B")
    }
    for agent, thread in threads.items():
        thread.start()
        wait_until(lambda agent=agent: agent in [w.agent_id for w in store.waiters("a.py")])
    [ended] = LockStore(repo, lock_dir).end_waits("B")  # an operator, in this process
    wait_until(lambda: [w.agent_id for w in store.waiters("a.py")] == ["A", "B"])
    [again] = [w for w in store.waiters("a.py") if w.agent_id == "B"]
    assert again.token != ended.token  # a new wait, at the back
    assert store.release("a.py", "holder")
    threads["A"].join(60)
    assert store.release("a.py", "A")
    threads["B"].join(60)
    assert granted == {"A": True, "B": True}
