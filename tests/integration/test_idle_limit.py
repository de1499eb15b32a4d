"""The idle limit: a holder that stalls while another agent waits loses its locks, by policy.

A real `lockyard serve` agent holds a file and stops calling; the lock directory's limit is set
by a real `lockyard policy`; another agent queues; the deadlock leader (that very serve's
election, no monitor started by hand) revokes the stalled holder's locks: the waiter gets the
file, the guard refuses the holder's write, its next lock call tells it why, and the journal
names the policy. Old stamps are made by setting the stamp file's mtime back (no sleeping).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import psycopg
import pytest
from cli_support import (
    git_repo_with_a_py,
    guard_says,
    lockyard,
    stuck_holding_a_py,
    waiting_in_a_thread,
)
from mcp import Client
from test_activity import set_back
from test_journal_lockdir import journalled
from test_serve_stdio import serve_params

from lockyard.infra.agent_runtime import LockCoordinator
from lockyard.infra.crossproc.monitor_loop import CrossProcessMonitor
from lockyard.infra.crossproc.sources import monitor_source
from lockyard.infra.lockstore import LockStore
from pg_support import PgServer
from polling_support import wait_until

pytestmark = pytest.mark.anyio


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo_with_a_py(tmp_path)


async def test_a_stalled_serve_holder_loses_its_lock_to_a_waiter_by_the_lock_directorys_limit(
    repo: Path,
    lock_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = LockStore(repo, lock_dir)
    async with Client(serve_params("stuck", repo, lock_dir)) as client:
        taken = await client.call_tool("lock_acquire", {"filepaths": ["a.py"]})
        assert json.loads(taken.content[0].text)["all_acquired"] is True  # type: ignore[union-attr]
        assert guard_says(repo, lock_dir, "stuck", monkeypatch) == ""
        set_back(lock_dir, "stuck")  # then it stops calling: idle for 50 minutes
        done = lockyard("policy", "--lock-dir", str(lock_dir), "--idle-limit", "10m", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["idle_limit_seconds"] == 600
        assert store.holder("a.py") == "stuck"  # nobody waits: nothing is revoked

        carol = threading.Thread(
            target=store.acquire, args=("a.py", "carol"), kwargs={"timeout_seconds": 240}
        )
        carol.start()
        carol.join(timeout=300)  # granted when the leader's pass revokes stuck's lock
        assert store.holder("a.py") == "carol"

        # Until it is told, the guards say why its writes are refused: an Edit, a shell write.
        for denied in (
            guard_says(repo, lock_dir, "stuck", monkeypatch),
            guard_says(repo, lock_dir, "stuck", monkeypatch, command="echo x > a.py"),
        ):
            assert "revoked: lockyard's idle limit released it: idle" in denied
            assert "while carol waited" in denied

        told = await client.call_tool("lock_release", {"all": True})
        payload = json.loads(told.content[0].text)  # type: ignore[union-attr]
        [lost] = payload["lost_locks"]
        assert lost["filepath"] == "a.py"
        assert "idle limit" in lost["reason"]
        assert "past the lock directory's limit of 10m while carol waited" in lost["reason"]
        told_once = guard_says(repo, lock_dir, "stuck", monkeypatch)  # told: the usual words
        assert "revoked" not in told_once
        assert "locked by agent carol" in told_once

    [record] = journalled(lock_dir, kinds=["operator-release"])
    assert (record.file, record.agent) == ("a.py", "stuck")
    assert record.other is not None
    assert "idle limit" in record.other
    shown = lockyard("status", "--lock-dir", str(lock_dir), "--json")
    assert json.loads(shown.stdout)["idle_limit_seconds"] == 600
    assert store.release("a.py", "carol")


async def test_a_coordinators_limit_revokes_only_its_own_stalled_agents(
    repo: Path,
    lock_dir: Path,
) -> None:
    (repo / "b.py").write_text("b\n")
    other = LockStore(repo, lock_dir)
    assert other.try_lock("b.py", "outsider")  # another process's holder, as idle
    other.stamp_activity("outsider")
    set_back(lock_dir, "outsider")
    # Its own re-sync would revoke too: this test calls it by hand (resync_interval: never).
    async with LockCoordinator(repo, lock_dir, idle_limit=600, resync_interval=3600) as coordinator:
        stuck = coordinator.runtime("stuck")
        taken = await stuck.tools.call("lock_acquire", {"filepaths": ["a.py"]})  # stamps
        assert taken.data is not None
        assert taken.data["all_acquired"] is True
        assert coordinator.revoke_idle() == []  # idle, but nobody waits
        set_back(lock_dir, "stuck")
        waiters = [
            threading.Thread(target=other.acquire, args=(path, "carol"),
                             kwargs={"timeout_seconds": 240})
            for path in ("a.py", "b.py")
        ]  # fmt: skip
        for waiter in waiters:
            waiter.start()
        try:
            wait_until(lambda: len(other.waiters("a.py")) + len(other.waiters("b.py")) == 2)
            [revoked] = coordinator.revoke_idle()
        finally:
            waiters[0].join(timeout=300)
        assert revoked.stall.agent_id == "stuck"
        assert revoked.released == ("a.py",)
        assert other.holder("a.py") == "carol"
        assert other.holder("b.py") == "outsider"  # not this coordinator's agent
        told = (await stuck.tools.call("lock_release", {"all": True})).data
        assert told is not None
        [lost] = told["lost_locks"]
        assert "past its coordinator's limit of 10m while carol waited" in lost["reason"]
    assert other.release("b.py", "outsider")
    waiters[1].join(timeout=300)
    assert other.holder("b.py") == "carol"
    assert other.release("a.py", "carol")
    assert other.release("b.py", "carol")


def test_policy_refuses_a_duration_it_cannot_read_in_one_line(lock_dir: Path) -> None:
    done = lockyard("policy", "--lock-dir", str(lock_dir), "--idle-limit", "ten minutes")
    assert done.returncode == 2
    assert "is not a duration" in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2
    assert not lock_dir.exists()  # nothing was created


async def test_on_postgresql_a_stalled_holder_loses_its_lock_to_a_waiter_by_the_databases_limit(
    repo: Path,
    pg_server: PgServer,
    pg_schema: str,
) -> None:
    spec = pg_server.spec(pg_schema)
    async with stuck_holding_a_py(repo, spec) as (stuck, mine, theirs):
        assert theirs.idle_limit() is None  # off by default
        theirs.set_idle_limit(600)
        last = theirs.last_active("stuck")
        assert last is not None  # the tool call stamped it in the database
        with psycopg.connect(pg_server.dsn) as conn:  # then stuck stops: idle for 50 minutes
            conn.execute(
                f'UPDATE "{pg_schema}".activity SET at = at - 3000 WHERE agent_id = %s', ("stuck",)
            )
        monitor = CrossProcessMonitor(source=monitor_source(theirs))
        assert (await monitor.check_once()).revocations == []  # nobody waits yet
        with waiting_in_a_thread(theirs, "a.py"):
            [revoked] = (await monitor.check_once()).revocations  # the leader's pass
        assert revoked.stall.agent_id == "stuck"
        assert theirs.holder("a.py") == "carol"
        stale = mine.stale_grant("a.py", "stuck")  # what the guards in its process say
        assert stale is not None
        assert stale.startswith("revoked: lockyard's idle limit released it: idle")
        told = await stuck.call("lock_release", {"all": True})
        assert told.data is not None
        [lost] = told.data["lost_locks"]
        assert "past the database's limit of 10m while carol waited" in lost["reason"]
        theirs.set_idle_limit(None)
        assert theirs.idle_limit() is None
        assert theirs.release("a.py", "carol")
