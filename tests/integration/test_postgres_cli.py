"""The `lockyard` commands on the PostgreSQL backend, through the entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from lockyard.infra.lockstore.postgres import PgLockStore
from pg_support import PgServer
from polling_support import wait_until_async

LOCKYARD = str(Path(sys.executable).parent / "lockyard")
BACKEND_UNAVAILABLE = 7
DEADLOCK_FOUND = 6


def lockyard(
    *args: str, env_backend: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKYARD_")} | (env or {})
    if env_backend is not None:
        env["LOCKYARD_BACKEND"] = env_backend
    return subprocess.run([LOCKYARD, *args], capture_output=True, text=True, timeout=240, env=env)


def password_of(pg_server: PgServer) -> str:
    assert pg_server.cluster is not None or ":" in pg_server.dsn.split("@")[0]
    return pg_server.dsn.split("@")[0].rsplit(":", 1)[1]


def test_status_shows_holders_with_fences_and_never_the_password(
    repo: Path, pg_backend: str, pg_server: PgServer
) -> None:
    with PgLockStore(repo, pg_backend) as store:
        assert store.try_lock("src/app.py", "alice")
        fence = store.grant_fence("src/app.py", "alice")
        done = lockyard("status", "--json", "--backend", pg_backend)
        assert done.returncode == 0, done.stderr
        payload = json.loads(done.stdout)
        (lock,) = payload["locks"]
        assert lock["holder"]["agent_id"] == "alice"
        assert lock["holder"]["fence"] == fence
        assert lock["holder"]["checkout"] == store.root
        assert lock["liveness"] == "alive"
        text = lockyard("status", env_backend=pg_backend)
        assert text.returncode == 0, text.stderr
        assert f"alice (fence {fence})" in text.stdout
        assert "not recorded" not in text.stdout
        assert "held from the checkout" in text.stdout
    secret = password_of(pg_server)
    for output in (done.stdout, done.stderr, text.stdout, text.stderr):
        assert secret not in output


def test_a_server_that_is_down_or_refuses_us_is_a_clear_error_with_its_own_exit_code(
    pg_server: PgServer,
) -> None:
    down = lockyard("status", "--backend", "postgresql://agent:topsecret@127.0.0.1:1/locks")
    assert down.returncode == BACKEND_UNAVAILABLE
    assert "127.0.0.1:1" in down.stderr
    assert "topsecret" not in down.stderr + down.stdout
    wrong = pg_server.dsn.replace("://lockyard:", "://lockyard:wrongpw", 1)
    refused = lockyard("monitor", "--once", "--backend", wrong)
    assert refused.returncode == BACKEND_UNAVAILABLE
    assert "authentication" in refused.stderr
    assert "wrongpw" not in refused.stderr + refused.stdout


@pytest.mark.anyio
async def test_monitor_once_finds_and_resolves_a_deadlock_in_the_database(
    repo: Path, pg_backend: str
) -> None:
    with PgLockStore(repo, pg_backend) as one, PgLockStore(repo, pg_backend) as two:
        assert one.try_lock("x.py", "alice")
        assert two.try_lock("y.py", "bob")
        async with anyio.create_task_group() as group:
            group.start_soon(one.acquire_async, "y.py", "alice", 120)
            group.start_soon(two.acquire_async, "x.py", "bob", 120)
            await wait_until_async(lambda: len(one.snapshot().waits) == 2, "both agents queued")
            done = await anyio.to_thread.run_sync(
                lambda: lockyard("monitor", "--once", "--json", "--backend", pg_backend)
            )
            group.cancel_scope.cancel()
    assert done.returncode == DEADLOCK_FOUND, done.stderr
    report = json.loads(done.stdout)
    assert report["leader"] is True
    (found,) = report["deadlocks"]
    assert found["notice_posted"] is True
    assert {step["agent_id"] for step in found["deadlock"]["cycle"]} == {"alice", "bob"}


def test_an_explicit_backend_wins_over_a_lock_directory_in_the_environment(
    repo: Path, pg_backend: str, tmp_path: Path
) -> None:
    """A LOCKYARD_LOCK_DIR left in the shell is a default, not a choice: `--backend` picks
    the database; only both flags together are refused."""
    with PgLockStore(repo, pg_backend) as store:
        assert store.try_lock("a.py", "alice")
        from_env = {"LOCKYARD_LOCK_DIR": str(tmp_path / "locks")}
        for command in (["monitor", "--once"], ["status", "--json"]):
            done = lockyard(*command, "--backend", pg_backend, env=from_env)
            assert done.returncode == 0, done.stderr
        assert "alice" in done.stdout
        both = lockyard("monitor", "--once", "--lock-dir", str(tmp_path), "--backend", pg_backend)
        assert both.returncode == 2
        assert "pass either --lock-dir or a PostgreSQL --backend" in both.stderr


def test_the_demo_runs_on_a_throwaway_postgresql_server() -> None:
    done = lockyard("demo", "--backend", "postgres", "--agents", "3", "--files", "4", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True
    # Its hand-offs are measured against this backend's own floor, not a disk's.
    assert report["floor"] == "a raw NOTIFY from one session to another on this server"
    assert report["floor_median_s"] > 0
    # FIFO from the server's own order (its journal, replayed), not from the lock events:
    # each scripted deadlock's survivor is granted the file its victim gave back.
    assert report["server_grants"] >= 1
    assert report["server_grants_to_head"] == report["server_grants"]
