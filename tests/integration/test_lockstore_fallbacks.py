"""What a waiter does when push wake-ups cannot follow it: a directory that cannot be watched
makes it poll; a queue entry that vanished makes it queue again and watch the new queue. And
a head woken through its doorbell alone, watching no directory.

Both waiters here run in a store whose backstop re-check is a minute away, and everything
that ends their wait happens in other processes that stay alive (no pidfd wake-up): only the
code under test can get them the lock before their timeout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from lockstore_support import expect_line, kill, spawn

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.lockdir import sleep
from lockyard.infra.lockstore.lockdir.sleep import process_hub
from lockyard.infra.lockstore.paths import lock_name
from polling_support import wait_until

BACKSTOP_SECONDS = 60.0
TIMEOUT_SECONDS = 60.0
PATIENCE_SECONDS = 10.0
"""How long the test waits for the grant: far beyond a poll or a wake-up, far below the
backstop and the timeout (a wait that times out also looks once more, and may succeed)."""


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> Iterator[LockStore]:
    if not process_hub().push_available:
        pytest.skip("no inotify here: these waiters poll anyway")
    with LockStore(repo, lock_dir, liveness_interval=BACKSTOP_SECONDS) as store:
        yield store


class Waiter:
    """`store.acquire` in a thread; `join()` gives [granted] once it returns, [] while it
    still waits after `PATIENCE_SECONDS`."""

    def __init__(self, store: LockStore, path: str, agent: str, poll_interval_ms: float) -> None:
        self.result: list[bool] = []
        self._thread = threading.Thread(
            target=lambda: self.result.append(
                store.acquire(path, agent, TIMEOUT_SECONDS, poll_interval_ms)
            ),
            daemon=True,  # a failing test must not keep the run alive until the timeout
        )
        self._thread.start()

    def join(self) -> list[bool]:
        self._thread.join(PATIENCE_SECONDS)
        return self.result


def agents_waiting(store: LockStore, path: str) -> list[str]:
    return [waiter.agent_id for waiter in store.waiters(path)]


class WatchLog:
    """What this process's hub is asked to watch through inotify from now on: directories
    and single entries (each still watched for real)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.directories: list[str] = []
        self.entries: list[str] = []
        hub = process_hub()
        watch, watch_entry = hub.watch, hub.watch_entry

        def directory(path: str) -> bool:
            self.directories.append(path)
            return watch(path)

        def entry(path: str) -> bool | None:
            self.entries.append(path)
            return watch_entry(path)

        monkeypatch.setattr(hub, "watch", directory)
        monkeypatch.setattr(hub, "watch_entry", entry)


def test_a_waiter_whose_directory_cannot_be_watched_falls_back_to_polling(
    store: LockStore, repo: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = spawn(repo, lock_dir, "a.py", "holder", "hold")
    expect_line(holder, "locked")
    refused: list[str] = []

    def out_of_watches(directory: str) -> bool:
        refused.append(directory)
        return False

    monkeypatch.setattr(process_hub(), "watch", out_of_watches)
    # No doorbell either (a file system without FIFOs): the head wants the lock directory.
    monkeypatch.setattr(sleep, "open_doorbell", lambda directory, name, token: None)
    waiter = Waiter(store, "a.py", "w", poll_interval_ms=20)
    wait_until(lambda: agents_waiting(store, "a.py") == ["w"] and refused)
    # Released by a third process: no in-process notification, no exit of the holder.
    releaser = spawn(repo, lock_dir, "a.py", "holder", "release")
    expect_line(releaser, "released")
    releaser.wait()
    assert waiter.join() == [True]
    assert refused == [os.path.realpath(lock_dir)]  # the head wanted the lock directory
    assert store.holder("a.py") == "w"
    kill(holder)


def test_a_head_is_woken_by_its_doorbell_without_watching_the_lock_directory(
    store: LockStore, repo: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = spawn(repo, lock_dir, "a.py", "holder", "hold")
    expect_line(holder, "locked")
    watches = WatchLog(monkeypatch)
    waiter = Waiter(store, "a.py", "w", poll_interval_ms=BACKSTOP_SECONDS * 1000)
    name = lock_name(store.namespace, store.canonicalize("a.py"))
    wait_until(lambda: any(".bell-" in entry.name for entry in lock_dir.iterdir()))
    # Released by a third process: no in-process notification, no exit of the holder, and
    # no inotify event reaches the head, which does not watch the lock directory.
    releaser = spawn(repo, lock_dir, "a.py", "holder", "release")
    expect_line(releaser, "released")
    releaser.wait()
    assert waiter.join() == [True]
    assert os.path.realpath(lock_dir) not in watches.directories
    assert store.holder("a.py") == "w"
    leftovers = [entry.name for entry in lock_dir.iterdir() if entry.name.startswith(name)]
    assert leftovers == [f"{name}.lock"]  # no doorbell, no staging, no queue left behind
    kill(holder)


def test_a_waiter_behind_another_process_is_woken_by_its_predecessors_entry_alone(
    store: LockStore, repo: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = spawn(repo, lock_dir, "a.py", "holder", "hold")
    expect_line(holder, "locked")
    first = spawn(repo, lock_dir, "a.py", "first", "wait-hold")
    expect_line(first, "waiting")
    wait_until(lambda: agents_waiting(store, "a.py") == ["first"])
    watches = WatchLog(monkeypatch)
    waiter = Waiter(store, "a.py", "w", poll_interval_ms=BACKSTOP_SECONDS * 1000)
    name = lock_name(store.namespace, store.canonicalize("a.py"))
    queue = os.path.join(os.path.realpath(lock_dir), f"{name}.q")
    wait_until(lambda: agents_waiting(store, "a.py") == ["first", "w"] and watches.entries)
    # The lock goes to `first` (released by a third process); its entry's end wakes `w`,
    # which becomes the head; `first`'s release then hands the lock over to it.
    releaser = spawn(repo, lock_dir, "a.py", "holder", "release")
    expect_line(releaser, "released")
    releaser.wait()
    expect_line(first, "acquired")
    assert first.stdin is not None
    first.stdin.write("\n")
    first.stdin.flush()
    expect_line(first, "released")
    assert waiter.join() == [True]
    assert store.holder("a.py") == "w"
    assert f"{queue}/00000000000000000001" in watches.entries  # first's, watched by itself
    assert queue not in watches.directories  # no process hears of every change in the queue
    assert store.release("a.py", "w")
    kill(first)
    kill(holder)


def test_waiters_of_one_process_queued_behind_each_other_need_no_inotify_for_the_queue(
    store: LockStore, repo: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = spawn(repo, lock_dir, "a.py", "holder", "hold")
    expect_line(holder, "locked")
    watches = WatchLog(monkeypatch)
    first = Waiter(store, "a.py", "first", poll_interval_ms=BACKSTOP_SECONDS * 1000)
    wait_until(lambda: agents_waiting(store, "a.py") == ["first"])
    second = Waiter(store, "a.py", "second", poll_interval_ms=BACKSTOP_SECONDS * 1000)
    wait_until(lambda: agents_waiting(store, "a.py") == ["first", "second"])
    releaser = spawn(repo, lock_dir, "a.py", "holder", "release")
    expect_line(releaser, "released")
    releaser.wait()
    assert first.join() == [True]
    assert store.release("a.py", "first")  # its entry went here: `second` is told directly
    assert second.join() == [True]
    assert store.holder("a.py") == "second"
    assert watches.entries == []
    assert watches.directories == []
    assert store.release("a.py", "second")
    kill(holder)


RELEASE_PAUSED_AFTER_ITS_LOOK = r"""
import os, sys, time
from lockyard.infra.lockstore.paths import lock_name
from lockyard.infra.lockstore import LockStore
repo, lock_dir = sys.argv[1:3]
store = LockStore(repo, lock_dir)
lock = os.path.join(lock_dir, lock_name(store.namespace, store.canonicalize("a.py")) + ".lock")
free = store.operations.free

def after_a_look_that_found_no_queue(name):
    # The grant is gone and the queue was looked at (nobody queued): pause before the lock
    # goes, until a waiter that came afterwards has taken it, as a slow release would.
    print("looked", flush=True)
    while not os.listdir(lock):
        time.sleep(0.01)
    free(name)

store.operations.free = after_a_look_that_found_no_queue
print("released" if store.release("a.py", "holder") else "not held", flush=True)
"""


def test_a_waiter_that_comes_after_the_releases_look_takes_the_lock_unrung(
    store: LockStore, repo: Path, lock_dir: Path
) -> None:
    """A release drops its grant before it looks for a queue, and rings nobody when it
    finds none: a waiter that comes after that look finds the lock empty, never held, and
    takes it (renamed onto the empty lock) instead of sleeping until its backstop; the
    release's removal of the lock then fails harmlessly."""
    holder = spawn(repo, lock_dir, "a.py", "holder", "hold")
    expect_line(holder, "locked")
    releaser = subprocess.Popen(
        [sys.executable, "-c", RELEASE_PAUSED_AFTER_ITS_LOOK, str(repo), str(lock_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )
    expect_line(releaser, "looked")
    waiter = Waiter(store, "a.py", "w", poll_interval_ms=BACKSTOP_SECONDS * 1000)
    expect_line(releaser, "released")
    releaser.wait()
    assert waiter.join() == [True]
    assert store.holder("a.py") == "w"
    kill(holder)


def test_a_waiter_whose_entry_vanished_queues_again_and_watches_the_new_queue(
    store: LockStore, repo: Path, lock_dir: Path
) -> None:
    holder = spawn(repo, lock_dir, "a.py", "H", "hold")
    expect_line(holder, "locked")
    first = spawn(repo, lock_dir, "a.py", "P1", "wait-hold")
    expect_line(first, "waiting")
    wait_until(lambda: agents_waiting(store, "a.py") == ["P1"])
    waiter = Waiter(store, "a.py", "W", poll_interval_ms=100)
    wait_until(lambda: agents_waiting(store, "a.py") == ["P1", "W"])
    # Swap the queue directory for a new one that holds only P1's entry: W's entry vanished,
    # and W's inotify watch now follows the old directory, where nothing will happen.
    name = lock_name(store.namespace, store.canonicalize("a.py"))
    queue, old = lock_dir / f"{name}.q", lock_dir / f"{name}.q-old"
    queued = store.directory.queues.read_queue(name)
    [p1_entry] = [entry for entry, record in queued if record.agent_id == "P1"]
    os.rename(queue, old)
    queue.mkdir(mode=0o700)
    os.rename(old / p1_entry, queue / p1_entry)
    try:
        wait_until(lambda: agents_waiting(store, "a.py") == ["P1", "W"])  # W queued again
        kill(holder)  # P1, the head, reclaims the lock and leaves the (new) queue...
        expect_line(first, "acquired")
        assert first.stdin is not None
        first.stdin.write("\n")
        first.stdin.flush()
        expect_line(first, "released")  # ...and releases it, staying alive
        assert waiter.join() == [True]  # W heard P1 leave the new queue, then the release
        assert store.holder("a.py") == "W"
    finally:
        kill(first)
        shutil.rmtree(old)


def test_a_head_whose_holder_cannot_be_followed_re_checks_at_the_plain_backstop(
    repo: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A holder whose exit no pidfd follows (none on this kernel, or none could be opened)
    is found dead by a re-check: at the store's backstop, not the ten times rarer one of a
    wait whose every ending is pushed to it."""
    backstop = PATIENCE_SECONDS / 4
    assert backstop * sleep.DEEP_BACKSTOP_FACTOR > 2 * PATIENCE_SECONDS
    monkeypatch.setattr(process_hub().exits, "watch", lambda pid: False)
    with LockStore(repo, lock_dir, liveness_interval=backstop) as store:
        holder = spawn(repo, lock_dir, "a.py", "holder", "hold")
        expect_line(holder, "locked")
        waiter = Waiter(store, "a.py", "w", poll_interval_ms=100)  # backstop: max(poll, liveness)
        wait_until(lambda: agents_waiting(store, "a.py") == ["w"])
        kill(holder)  # SIGKILL: nothing in the lock directory changes, nobody rings
        assert waiter.join() == [True]
        assert store.holder("a.py") == "w"
