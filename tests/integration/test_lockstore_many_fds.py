"""Blocking waits in a busy process: more than 1024 file descriptors open."""

from __future__ import annotations

import os
import resource
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockyard.infra.lockstore import LockStore, wait_for_lock
from lockyard.infra.lockstore.wakeup import Waker
from polling_support import wait_until

FD_SETSIZE = 1024  # the highest descriptor select() takes, plus one


@pytest.fixture
def many_open_fds() -> Iterator[int]:
    """Open /dev/null until the next descriptor the process gets is above FD_SETSIZE."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = FD_SETSIZE + 200
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, max(hard, wanted)))
    opened: list[int] = []
    try:
        while not opened or opened[-1] < FD_SETSIZE + 76:
            opened.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
        yield len(opened)
    finally:
        for fd in opened:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_waker_numbered_above_fd_setsize_waits_and_wakes(many_open_fds: int) -> None:
    waker = Waker()
    try:
        assert waker.fileno() >= FD_SETSIZE
        assert waker.wait(0.01) is False
        waker.wake()
        assert waker.wait(5) is True
    finally:
        waker.close()


def test_a_contended_blocking_acquire_works_with_over_1024_fds_open(
    repo: Path, lock_dir: Path, many_open_fds: int
) -> None:
    store = LockStore(repo, lock_dir)
    assert store.try_lock("a.py", "alice")
    assert store.acquire("a.py", "bob", timeout_seconds=0.05) is False  # waited, timed out
    assert store.waiters("a.py") == []

    outcome: list[object] = []

    def bob() -> None:
        try:
            outcome.append(store.acquire("a.py", "bob", timeout_seconds=60))
        except Exception as error:  # pragma: no cover - reported by the assertion below
            outcome.append(error)

    waiter = threading.Thread(target=bob)
    waiter.start()
    wait_until(lambda: bool(store.waiters("a.py")) or bool(outcome))
    assert store.release("a.py", "alice")
    waiter.join(60)
    assert outcome == [True]
    assert store.holder("a.py") == "bob"


def test_wait_for_lock_works_with_over_1024_fds_open(
    repo: Path, lock_dir: Path, many_open_fds: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKYARD_LOCK_DIR", str(lock_dir))
    store = LockStore(repo, lock_dir)
    assert store.try_lock("b.py", "alice")
    assert wait_for_lock("b.py", "bob", str(repo), timeout_seconds=0.05) is False
    assert store.holder("b.py") == "alice"
