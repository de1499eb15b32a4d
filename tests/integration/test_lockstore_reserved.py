"""A free lock that only a queued waiter blocks is visible: `list_locks` lists it as reserved
for that waiter, while `snapshot()` keeps reporting only real holds."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lockstore_support import dead_pid, expect_line, kill, spawn

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.liveness import (
    ProcessIdentity,
    current_process,
    new_token,
    read_proc_stat,
)
from lockyard.infra.lockstore.lockdir import line
from lockyard.infra.lockstore.lockdir.disk import TICKET_DIGITS
from lockyard.infra.lockstore.lockdir.operations import run
from lockyard.infra.lockstore.paths import lock_name
from lockyard.infra.lockstore.records import encode_waiter
from polling_support import wait_until


@contextlib.contextmanager
def queued_then_stopped(store: LockStore, agent: str, log: Path) -> Iterator[subprocess.Popen[str]]:
    """A live process `agent` that queued for f.py, then was SIGSTOPped: it holds its place
    in the queue but cannot act until SIGCONT. Killed on exit."""
    waiter = spawn(Path(store.root), store.lock_dir, "f.py", agent, "wait", "100", str(log))
    try:
        expect_line(waiter, "waiting")
        wait_until(lambda: [w.agent_id for w in store.waiters("f.py")] == [agent])
        waiter.send_signal(signal.SIGSTOP)
        wait_until(lambda: _state(waiter.pid) == "T")  # a signal is delivered, not instant
        yield waiter
    finally:
        waiter.send_signal(signal.SIGCONT)
        kill(waiter)


@pytest.fixture
def stalled_waiter(repo: Path, lock_dir: Path, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A holds f.py; B (a live process) queues for it and is SIGSTOPped; A releases."""
    store = LockStore(repo, lock_dir)
    assert store.try_lock("f.py", "A")
    with queued_then_stopped(store, "B", tmp_path / "log") as waiter:
        assert store.release("f.py", "A")
        yield waiter


def test_a_lock_blocked_only_by_a_stalled_waiter_is_listed_as_reserved(
    repo: Path, lock_dir: Path, stalled_waiter: subprocess.Popen[str]
) -> None:
    store = LockStore(repo, lock_dir)
    _age_turn(store, "f.py", -3600)  # B's turn stays current, however slow this machine is
    assert not store.try_lock("f.py", "C")  # B is the live head: C may not jump the queue
    [info] = store.list_locks()
    assert info.lock_path == "f.py"
    assert info.namespace == str(repo)
    assert info.holder is None
    assert info.problem is None
    assert info.liveness == "alive"
    assert "reserved for the first waiter B" in info.liveness_reason
    assert [(w.agent_id, w.pid) for w in info.waiters] == [("B", stalled_waiter.pid)]
    snapshot = store.snapshot()
    assert snapshot.holds == {}  # reserved is not held: no hold, no wait-for edge to anyone
    assert snapshot.waits == (("B", "f.py"),)
    [listed] = snapshot.locks  # the same lock; only the turn's age has grown since
    assert listed.model_copy(update={"age_seconds": None}) == info.model_copy(
        update={"age_seconds": None}
    )


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
    [row] = [line for line in shown.stdout.splitlines() if "free, reserved for B" in line]
    assert "f.py" in row
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
    store.directory.queues.enqueue(
        lock_name(store.namespace, key),
        token,
        lambda ticket: encode_waiter(
            ghost, "ghost", token, ticket, key, store.namespace, store.root
        ),
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


def _state(pid: int) -> str | None:
    stat = read_proc_stat(pid)
    return None if stat is None else stat[0]


def _turn_entry(store: LockStore, filepath: str) -> str:
    """The path (inside the lock dir) of the first queue entry of `filepath`."""
    name = lock_name(store.namespace, store.canonicalize(filepath))
    [first, *_rest] = store.directory.queues.queue_order(name)
    return f"{store.lock_dir}/{name}.q/{first}/{store.directory.queues.entry_token(name, first)}"


def _age_turn(store: LockStore, filepath: str, seconds: float) -> None:
    """Make the first waiter's turn look `seconds` old (the turn start is the entry's mtime)."""
    entry = _turn_entry(store, filepath)
    then = time.time() - seconds
    os.utime(entry, (then, then), follow_symlinks=False)


def test_a_release_starts_the_first_waiters_turn(
    repo: Path, lock_dir: Path, tmp_path: Path
) -> None:
    store = LockStore(repo, lock_dir)
    assert store.try_lock("f.py", "A")
    with queued_then_stopped(store, "B", tmp_path / "log"):
        _age_turn(store, "f.py", 3600)  # queued an hour ago, behind A
        assert store.release("f.py", "A")
        turn_started = os.lstat(_turn_entry(store, "f.py")).st_mtime
        assert time.time() - turn_started < 600  # the release started B's turn
        [info] = store.list_locks()
        assert info.age_seconds is not None
        assert info.age_seconds < 600
        assert "is stopped" in info.liveness_reason  # the waiter's process is SIGSTOPped


def test_a_first_waiter_that_leaves_a_free_lock_untaken_is_passed_over(
    repo: Path, lock_dir: Path, stalled_waiter: subprocess.Popen[str]
) -> None:
    store = LockStore(repo, lock_dir)
    _age_turn(store, "f.py", -3600)  # B's turn is current: nobody passes it over
    assert not store.try_lock("f.py", "C")
    _age_turn(store, "f.py", store.turn_timeout + 1)
    [info] = store.list_locks()
    assert "has not taken its turn" in info.liveness_reason
    assert store.try_lock("f.py", "C")  # B stopped: C does not wait for it forever
    assert store.waiters("f.py") == []
    assert store.holder("f.py") == "C"


def test_a_queued_waiter_passes_over_a_stalled_first_waiter(
    repo: Path, lock_dir: Path, stalled_waiter: subprocess.Popen[str], tmp_path: Path
) -> None:
    store = LockStore(repo, lock_dir, liveness_interval=0.05)
    results: list[bool] = []
    waiter = threading.Thread(
        target=lambda: results.append(store.acquire("f.py", "C", timeout_seconds=60))
    )
    waiter.start()
    wait_until(lambda: [w.agent_id for w in store.waiters("f.py")] == ["B", "C"])
    _age_turn(store, "f.py", store.turn_timeout + 1)
    waiter.join()
    assert results == [True]
    assert store.holder("f.py") == "C"
    # B resumes, finds its entry gone, queues again at the back and gets the lock in turn.
    stalled_waiter.send_signal(signal.SIGCONT)
    wait_until(lambda: [w.agent_id for w in store.waiters("f.py")] == ["B"])
    assert store.release("f.py", "C")
    expect_line(stalled_waiter, "acquired")
    log = tmp_path / "log"
    wait_until(lambda: log.exists() and log.read_text() == "B\n")


def test_a_held_lock_is_never_taken_from_its_holder_however_old_the_waiters_turn(
    repo: Path, lock_dir: Path
) -> None:
    store = LockStore(repo, lock_dir)
    assert store.try_lock("f.py", "A")
    waiter = spawn(repo, lock_dir, "f.py", "B", "wait", "100", str(lock_dir.parent / "log"))
    try:
        expect_line(waiter, "waiting")
        wait_until(lambda: [w.agent_id for w in store.waiters("f.py")] == ["B"])
        _age_turn(store, "f.py", store.turn_timeout + 60)
        assert not store.try_lock("f.py", "C")
        assert store.holder("f.py") == "A"
        assert [w.agent_id for w in store.waiters("f.py")] == ["B"]
        assert store.end_stalled_waits() == []  # B waits for a held lock: not stalled
    finally:
        assert store.release("f.py", "A")
        expect_line(waiter, "acquired")
        waiter.wait()


def test_the_next_waiters_turn_starts_when_the_first_leaves(repo: Path, lock_dir: Path) -> None:
    store = LockStore(repo, lock_dir)
    key = store.canonicalize("f.py")
    name = lock_name(store.namespace, key)
    me = current_process()

    def queue(agent: str) -> tuple[str, str]:
        token = new_token()
        entry = store.directory.queues.enqueue(
            name,
            token,
            lambda ticket: encode_waiter(
                me, agent, token, ticket, key, store.namespace, store.root
            ),
        )
        return entry, token

    def age(entry: tuple[str, str]) -> None:
        ticket, token = entry
        os.utime(f"{lock_dir}/{name}.q/{ticket}/{token}", (long_ago,) * 2, follow_symlinks=False)

    long_ago = time.time() - 3600
    first, second = queue("B"), queue("C")
    age(first)
    age(second)
    run(line.drop(store.operations, name, *second))  # the second leaving starts nobody's turn
    assert store.directory.queues.turn_started(name, *first) == pytest.approx(long_ago)
    second = queue("C")
    age(second)
    run(line.drop(store.operations, name, *first))  # the first leaving starts the second's turn
    started = store.directory.queues.turn_started(name, *second)
    assert started is not None
    assert time.time() - started < 600
    assert not store.try_lock("f.py", "D")  # C (this live process) now has a fresh turn


def _lockyard(*args: str) -> subprocess.CompletedProcess[str]:
    lockyard = str(Path(sys.executable).parent / "lockyard")
    wide = os.environ | {"COLUMNS": "200"}
    return subprocess.run([lockyard, *args], capture_output=True, text=True, env=wide)


def test_status_says_how_long_a_stopped_waiter_has_left_its_turn_untaken(
    repo: Path, lock_dir: Path, stalled_waiter: subprocess.Popen[str]
) -> None:
    _age_turn(LockStore(repo, lock_dir), "f.py", 3600)
    shown = _lockyard("status", "--lock-dir", str(lock_dir))
    assert shown.returncode == 0, shown.stderr
    [row] = [line for line in shown.stdout.splitlines() if "free, reserved for B" in line]
    assert "1h00m" in row  # how long B has left its turn untaken
    note = " ".join(shown.stdout.split())
    assert "is stopped" in note
    assert "passes it over" in note


@pytest.mark.parametrize(
    "options",
    [pytest.param((), id="stale"), ("--agent", "B"), ("--all", "--yes")],
)
def test_clean_ends_a_stuck_wait_and_frees_the_lock(
    repo: Path, lock_dir: Path, stalled_waiter: subprocess.Popen[str], options: tuple[str, ...]
) -> None:
    store = LockStore(repo, lock_dir)
    if not options:  # a plain clean ends only waits whose turn is over
        _age_turn(store, "f.py", -3600)  # B's turn is current
        kept = _lockyard("clean", "--lock-dir", str(lock_dir), "--json")
        assert json.loads(kept.stdout)["ended_waits"] == []
        assert [w.agent_id for w in store.waiters("f.py")] == ["B"]
        _age_turn(store, "f.py", store.turn_timeout + 1)
    cleaned = _lockyard("clean", "--lock-dir", str(lock_dir), *options)
    assert cleaned.returncode == 0, cleaned.stderr
    assert "Nothing to release" not in cleaned.stdout
    assert f"ended the wait of B (pid {stalled_waiter.pid}) for f.py" in cleaned.stdout
    assert store.waiters("f.py") == []
    assert store.try_lock("f.py", "C")


def test_a_waiter_whose_wait_was_ended_never_takes_a_newcomers_reused_ticket(
    repo: Path, lock_dir: Path, tmp_path: Path
) -> None:
    holder = LockStore(repo, lock_dir)
    assert holder.try_lock("f.py", "A")
    # W is a process held stopped while its wait is ended and its ticket is reused, so the
    # interleaving is forced: W cannot queue again before the newcomer takes the ticket.
    with queued_then_stopped(holder, "W", tmp_path / "log") as waiter:
        [ended] = holder.end_waits("W")  # the queue empties; its ticket is free again
        assert ended.agent_id == "W"
        key = holder.canonicalize("f.py")
        name = lock_name(holder.namespace, key)
        me, token = current_process(), new_token()
        newcomer = holder.directory.queues.enqueue(
            name,
            token,
            lambda ticket: encode_waiter(
                me, "X", token, ticket, key, holder.namespace, holder.root
            ),
        )
        assert newcomer == ended_entry_name(ended.ticket)  # the same name W had
        waiter.send_signal(signal.SIGCONT)
        assert holder.release("f.py", "A")  # wakes W, which must see that entry is not its
        wait_until(lambda: [w.agent_id for w in holder.waiters("f.py")] == ["X", "W"])
        assert holder.holder("f.py") is None  # free, X's turn: W did not take it
        run(line.drop(holder.operations, name, newcomer, token))
        expect_line(waiter, "acquired")
        assert waiter.wait(timeout=60) == 0


def ended_entry_name(ticket: int) -> str:
    return f"{ticket:0{TICKET_DIGITS}d}"
