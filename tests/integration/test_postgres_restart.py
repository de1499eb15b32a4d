"""A PostgreSQL server restarted under running agents: waiters resume, holders are told,
and no lock has two holders. Runs on a private throwaway server (it is restarted)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockyard.infra.lockstore.postgres import PgLockStore
from lockyard.infra.lockstore.postgres.cluster import ThrowawayCluster
from lockyard.infra.lockstore.postgres.listener import close_listeners
from polling_support import wait_until


@pytest.fixture
def private_server() -> Iterator[ThrowawayCluster]:
    with ThrowawayCluster(max_connections=20) as cluster:
        try:
            yield cluster
        finally:
            # This process's listener threads would otherwise dial the removed server's port
            # for the rest of the session, and any server that later gets that port.
            close_listeners()


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_a_restart_hands_the_lock_to_the_waiter_and_tells_the_holder(
    repo: Path, private_server: ThrowawayCluster, mode: str
) -> None:
    with (
        PgLockStore(repo, private_server.dsn) as holder,
        PgLockStore(repo, private_server.dsn) as waiter,
    ):
        assert holder.try_lock("a.py", "alice")
        granted: list[bool] = []
        wait = threading.Thread(
            target=lambda: granted.append(waiter.acquire("a.py", "bob", timeout_seconds=120))
        )
        wait.start()

        def bob_queued() -> bool:
            assert wait.is_alive()
            return [w.agent_id for w in holder.waiters("a.py")] == ["bob"]

        wait_until(bob_queued, "bob queued for a.py")
        private_server.restart(mode)  # every session ends: alice's lock with hers
        wait.join(120)
        assert granted == [True], "the waiter resumed on a new session and got the lock"
        assert holder.holder("a.py") == "bob"
        lost = holder.take_lost_locks("alice")
        assert [item.filepath for item in lost] == [holder.canonicalize("a.py")]
        assert "session" in lost[0].reason
        assert not holder.try_lock("a.py", "alice"), "no second holder after the restart"
        assert holder.stale_grant("a.py", "alice") is None
        assert waiter.release("a.py", "bob")
        assert holder.try_lock("a.py", "alice")


def test_a_watching_monitor_stops_with_the_backend_exit_code_when_the_server_goes(
    private_server: ThrowawayCluster,
) -> None:
    lockyard = str(Path(sys.executable).parent / "lockyard")
    # Only --backend chooses the store: a LOCKYARD_LOCK_DIR of the caller's would be refused.
    env = {key: value for key, value in os.environ.items() if not key.startswith("LOCKYARD_")}
    monitor = subprocess.Popen(
        [lockyard, "monitor", "--backend", private_server.dsn],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert monitor.stdout is not None
        assert monitor.stderr is not None
        first = monitor.stdout.readline()
        assert first.startswith("watching postgresql://"), (
            first or f"exit {monitor.wait(60)}: {monitor.stderr.read()}"
        )
        private_server.stop("fast")
        _out, err = monitor.communicate(timeout=120)
    finally:
        monitor.kill()
    assert monitor.returncode == 7, err
    assert "stopped watching postgresql://" in err
    assert "PostgreSQL server is up" in err  # the hint names the server, not a lock directory
    assert private_server.password not in err
