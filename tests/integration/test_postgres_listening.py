"""A process LISTENs on its namespace's channel only around its waits (and a short while
after), since PostgreSQL wakes every LISTENing server process at every NOTIFY; no push is
lost when a wait starts as the channel goes idle."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from lockyard.infra.lockstore.postgres import PgLockStore
from lockyard.infra.lockstore.postgres import listener as listener_module
from lockyard.infra.lockstore.postgres.schema import namespace_channel
from polling_support import wait_until

NO_RECHECK = 3600.0
"""A liveness interval no test outlives: only a push can end these waits in time."""


def handed_over(holder: PgLockStore, waiter: PgLockStore) -> bool:
    """The holder releases while the waiter waits; whether the waiter got it (by push)."""
    granted: list[bool] = []
    thread = threading.Thread(
        target=lambda: granted.append(waiter.acquire("a.py", "bob", timeout_seconds=20))
    )
    thread.start()
    wait_until(lambda: bool(holder.waiters("a.py")), "bob queued for a.py")
    assert holder.release("a.py", "alice")
    thread.join(60)
    return granted == [True] and waiter.release("a.py", "bob")


def test_a_process_listens_only_around_its_waits(
    repo: Path, pg_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listener_module, "IDLE_CHANNEL_SECONDS", 0.2)
    with (
        PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK) as holder,
        PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK) as waiter,
    ):
        listener = waiter.listener()
        channel = namespace_channel(waiter.schema, waiter.namespace)
        for _ in range(2):  # the second wait finds the channel dropped, and LISTENs again
            assert holder.try_lock("a.py", "alice")
            assert handed_over(holder, waiter)
            assert channel in listener.listening, "kept a while after the wait"
            wait_until(lambda: channel not in listener.listening, "the idle channel dropped")


def test_waits_starting_as_the_channel_goes_idle_lose_no_push(
    repo: Path, pg_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listener_module, "IDLE_CHANNEL_SECONDS", 0.01)
    rng = random.Random(7)
    with (
        PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK) as holder,
        PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK) as waiter,
    ):
        for round_ in range(25):
            assert holder.try_lock("a.py", "alice")
            assert handed_over(holder, waiter), f"round {round_}: the push was lost"
            threading.Event().wait(rng.uniform(0, 0.03))  # around the channel's idle moment
