"""PostgreSQL backend upkeep: the keepalive setting and the connect timeout, ending waits,
reclaiming rows of ended sessions, a schema dropped under running clients, and the monitor's
push-driven loop."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import psycopg
import pytest

from lockyard.infra.crossproc.monitor_loop import CrossProcessMonitor, PassReport
from lockyard.infra.crossproc.sources import monitor_source, victim_notices_for
from lockyard.infra.lockstore.postgres import (
    BackendSpecError,
    KeepaliveBound,
    PgLockStore,
    parse_spec,
)
from lockyard.infra.lockstore.postgres.session import connect, session_settings
from lockyard.infra.tools.lock_tools import LockTools
from pg_support import PgServer
from polling_support import wait_until


def test_the_keepalive_bound_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKYARD_PG_LIVENESS_SECONDS", "30")
    bound = KeepaliveBound.from_env()
    assert bound.idle + bound.count * bound.interval <= 30
    assert bound.client_params()["tcp_user_timeout"] == "30000"
    for bad in ("1", "soon", "99999"):
        monkeypatch.setenv("LOCKYARD_PG_LIVENESS_SECONDS", bad)
        with pytest.raises(BackendSpecError, match="from 3 to 3600"):
            KeepaliveBound.from_env()


@pytest.mark.parametrize(
    ("given", "env", "used"),
    [("", None, "30"), ("connect_timeout=7", None, "7"), ("", "9", "9")],
    ids=["the liveness bound", "the spec's own", "PGCONNECT_TIMEOUT"],
)
def test_a_new_connection_waits_for_the_server_as_long_as_the_bound_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
    pg_server: PgServer,
    given: str,
    env: str | None,
    used: str | None,
) -> None:
    if env is None:
        monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    else:
        monkeypatch.setenv("PGCONNECT_TIMEOUT", env)
    separator = "&" if "?" in pg_server.dsn else "?"
    spec = parse_spec(f"{pg_server.dsn}{separator}{given}" if given else pg_server.dsn)
    with connect(spec, KeepaliveBound(30), purpose="test") as conn:
        assert conn.info.get_parameters().get("connect_timeout") == used


def test_a_session_sets_its_keepalives_and_generic_plans_on_the_server(pg_server: PgServer) -> None:
    with connect(parse_spec(pg_server.dsn), KeepaliveBound(30), purpose="test") as conn:
        names = ("plan_cache_mode", "tcp_user_timeout")
        shown = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (list(names),)
            ).fetchall()
        )
    assert shown == {"plan_cache_mode": "force_generic_plan", "tcp_user_timeout": "30000"}


def test_a_server_older_than_postgresql_12_is_not_sent_the_plan_setting_it_lacks() -> None:
    assert "plan_cache_mode" not in session_settings(KeepaliveBound(30), 110000)
    assert session_settings(KeepaliveBound(30), 150000)["plan_cache_mode"] == "force_generic_plan"


def test_the_hot_statements_run_on_generic_plans_from_their_first_execution(
    repo: Path, pg_backend: str
) -> None:
    with PgLockStore(repo, pg_backend) as store:
        for _ in range(3):
            assert store.try_lock("a.py", "alice")
            assert store.release("a.py", "alice")
        plans = store.session.run(
            lambda conn, me: conn.execute(
                "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE name IN ('lockyard_take_free', 'lockyard_release') ORDER BY name"
            ).fetchall()
        )
    assert plans == [("lockyard_release", 3, 0), ("lockyard_take_free", 3, 0)]


def test_ending_a_wait_sends_a_running_waiter_to_the_back(repo: Path, pg_backend: str) -> None:
    with PgLockStore(repo, pg_backend) as one, PgLockStore(repo, pg_backend) as two:
        assert one.try_lock("a.py", "alice")
        got: list[bool] = []
        waiter = threading.Thread(target=lambda: got.append(two.acquire("a.py", "bob", 60)))
        waiter.start()
        wait_until(lambda: [w.agent_id for w in one.waiters("a.py")] == ["bob"], "bob queued")
        ended = one.end_waits("bob")
        assert [record.agent_id for record in ended] == ["bob"]
        assert one.end_stalled_waits() == []
        wait_until(lambda: [w.agent_id for w in one.waiters("a.py")] == ["bob"], "bob queued again")
        assert one.release("a.py", "alice")
        waiter.join(60)
        assert got == [True]


def test_rows_of_ended_sessions_are_reclaimed(
    repo: Path, pg_backend: str, pg_server: PgServer
) -> None:
    with PgLockStore(repo, pg_backend) as gone, PgLockStore(repo, pg_backend) as other:
        assert gone.try_lock("a.py", "ghost")
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                "AND objid = %s AND granted",
                (gone.session_number,),
            )
        assert other.holder("a.py") is None, "a lock of an ended session is no lock"
        (reclaimed,) = other.reclaim_stale()
        assert reclaimed.holder.agent_id == "ghost"
        assert "session ended" in reclaimed.reason
        assert other.reclaim_stale() == []


def test_a_schema_dropped_under_running_clients_is_made_again(
    repo: Path, pg_backend: str, pg_server: PgServer, pg_schema: str
) -> None:
    with PgLockStore(repo, pg_backend) as store:
        assert store.try_lock("a.py", "alice")
        pg_server.drop_schema(pg_schema)  # ends nothing: the next call finds it gone
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'lockyard store' AND pid <> pg_backend_pid()"
            )
        assert store.try_lock("a.py", "bob"), "a new schema, empty"
        assert store.take_lost_locks("alice")[0].filepath == store.canonicalize("a.py")


@pytest.mark.anyio
async def test_the_monitor_loop_wakes_on_a_new_wait_and_resolves(
    repo: Path, pg_backend: str
) -> None:
    with (
        PgLockStore(repo, pg_backend) as one,
        PgLockStore(repo, pg_backend) as two,
        PgLockStore(repo, pg_backend) as watch,
    ):
        assert one.try_lock("x.py", "alice")
        assert two.try_lock("y.py", "bob")
        monitor = CrossProcessMonitor(source=monitor_source(watch))
        reports: list[PassReport] = []
        results: dict[str, object] = {}

        async def wait(store: PgLockStore, agent: str, path: str) -> None:
            tools = LockTools(store, agent, victim_notices=victim_notices_for(store))
            outcome = await tools.acquire({"filepaths": [path], "timeout_seconds": 60})
            results[agent] = outcome.data

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(monitor.run, reports.append)
                async with anyio.create_task_group() as agents:
                    agents.start_soon(wait, one, "alice", "y.py")
                    agents.start_soon(wait, two, "bob", "x.py")
                group.cancel_scope.cancel()
        assert [len(report.resolutions) for report in reports] == [1]
        victim = reports[0].resolutions[0].deadlock.victim
        assert "deadlock" in results[victim]  # type: ignore[operator]
