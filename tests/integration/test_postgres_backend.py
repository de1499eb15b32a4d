"""What the PostgreSQL backend adds: selection by setting, session liveness, fencing numbers,
lost-lock notices, the guards' fencing check, its schema, and passwords kept out of sight."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from lockyard.infra.agent_runtime import AgentRuntimeBuilder, LockCoordinator
from lockyard.infra.hooks.write_guard.hook import make_write_guard_hook
from lockyard.infra.lockstore import open_backend
from lockyard.infra.lockstore.lockdir.store import LockStore
from lockyard.infra.lockstore.postgres import (
    BackendSpecError,
    BackendUnavailableError,
    PgLockStore,
    SchemaError,
    parse_spec,
    redact,
)
from lockyard.infra.lockstore.postgres.schema import SCHEMA_VERSION, ensure_schema, lock_class
from lockyard.infra.lockstore.postgres.session import forget_ensured_schemas
from lockyard.infra.tools import locking
from lockyard.infra.tools.lock_tools import LockTools
from lockyard.infra.transports.sdk.servers import get_mcp_servers
from pg_support import PgServer
from polling_support import wait_until_async


@pytest.fixture
def stores(repo: Path, pg_backend: str) -> Iterator[list[PgLockStore]]:
    opened = [PgLockStore(repo, pg_backend) for _ in range(2)]
    yield opened
    for store in opened:
        store.close()


def test_the_setting_picks_postgresql_for_every_entry_point(
    repo: Path, pg_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKYARD_BACKEND", pg_backend)
    store = open_backend(repo)
    assert isinstance(store, PgLockStore)
    store.close()
    monkeypatch.delenv("LOCKYARD_BACKEND")
    coordinator = LockCoordinator(repo, backend=pg_backend)
    assert isinstance(coordinator.store, PgLockStore)
    runtime = AgentRuntimeBuilder(repo, agent_id="alice", backend=pg_backend).build()
    assert isinstance(runtime.store, PgLockStore)
    assert "lockyard" in get_mcp_servers(repo, "bob", backend=pg_backend)
    assert isinstance(open_backend(repo), LockStore), "without a setting: the lock directory"
    with pytest.raises(BackendSpecError, match="not both"):
        open_backend(repo, pg_backend, lock_dir=repo / "locks")
    with pytest.raises(ValueError, match="not both"):
        LockCoordinator(repo, backend=pg_backend, store=coordinator.store)


def test_the_module_level_functions_follow_the_backend_setting(
    repo: Path, pg_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKYARD_BACKEND", pg_backend)
    store = locking.get_store(str(repo))
    try:
        assert isinstance(store, PgLockStore)
        assert locking.try_lock("a.py", "alice", str(repo))
        with PgLockStore(repo, pg_backend) as other:
            assert other.holder("a.py") == "alice", "the lock is in the database"
            assert not other.try_lock("a.py", "bob")
        assert locking.get_lock_holder("a.py", str(repo)) == "alice"
        assert locking.release_lock("a.py", "alice", str(repo))
        monkeypatch.delenv("LOCKYARD_BACKEND")
        assert isinstance(locking.get_store(str(repo)), LockStore)
    finally:
        store.close()


def test_a_password_never_shows_in_what_users_see(pg_server: PgServer) -> None:
    spec = parse_spec("postgresql://alice:s3cret-pw@db.example:6543/locks?sslmode=require")
    assert "s3cret" not in spec.display
    assert "s3cret" not in repr(spec)
    assert spec.display == "postgresql://alice@db.example:6543/locks"
    assert "s3cret" not in redact("host=x password=s3cret-pw user=a")
    assert "s3cret" not in redact("postgresql://alice:s3cret-pw@h/db")
    with pytest.raises(BackendSpecError) as refused:
        parse_spec("mysql://alice:s3cret-pw@h/db")
    assert "s3cret" not in str(refused.value)
    with pytest.raises(BackendSpecError, match="plain schema name"):
        parse_spec("postgresql://h/db?lockyard_schema=x;drop")


def test_wrong_credentials_and_a_server_that_is_down_fail_clearly(
    repo: Path, pg_server: PgServer
) -> None:
    wrong = pg_server.dsn.replace("://lockyard:", "://lockyard:not-the-pw-", 1)
    if wrong == pg_server.dsn:
        pytest.fail("the test server's DSN has no password to get wrong")
    with pytest.raises(BackendUnavailableError) as refused:
        PgLockStore(repo, wrong).connect()
    assert "not-the-pw" not in str(refused.value)
    assert "authentication" in str(refused.value)
    with pytest.raises(BackendUnavailableError) as down:
        PgLockStore(repo, "postgresql://u:hidden@127.0.0.1:1/db").connect()
    assert "127.0.0.1:1" in str(down.value)
    assert "hidden" not in str(down.value)


def test_locks_of_a_killed_process_pass_to_a_waiter(repo: Path, pg_backend: str) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER_SCRIPT, str(repo), pg_backend],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    with PgLockStore(repo, pg_backend) as store:
        assert store.holder("a.py") == "ghost"
        assert not store.try_lock("a.py", "bob")
        holder.kill()
        holder.wait()
        assert store.acquire("a.py", "bob", timeout_seconds=60)
        assert store.holder("a.py") == "bob"


HOLDER_SCRIPT = """
import sys, time
from lockyard.infra.lockstore.postgres import PgLockStore
store = PgLockStore(sys.argv[1], sys.argv[2])
assert store.try_lock("a.py", "ghost")
print("held", flush=True)
time.sleep(600)
"""


def test_fencing_numbers_grow_per_lock_and_show_in_results(stores: list[PgLockStore]) -> None:
    one, two = stores
    fences = []
    for agent, store in [("alice", one), ("bob", two), ("alice", one)]:
        assert store.try_lock("a.py", agent)
        fence = store.grant_fence("a.py", agent)
        record = store.holder_record("a.py")
        assert record is not None
        assert record.fence == fence
        fences.append(fence)
        assert store.release("a.py", agent)
    assert fences == sorted(fences)
    assert len(set(fences)) == 3

    async def call() -> dict[str, Any]:
        outcome = await LockTools(one, "carol").acquire({"filepaths": ["a.py"]})
        assert outcome.data is not None
        return dict(outcome.data)

    result = anyio.run(call)
    assert result["results"][0]["fence"] > fences[-1]


def kill_session(pg_server: PgServer, store: PgLockStore) -> None:
    """Cut one store's database session from the server side (as a lost link would)."""
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND objid = %s AND granted AND classid::int = classid::int",
            (store.session_number,),
        )


@pytest.mark.anyio
async def test_a_holder_whose_session_ended_is_told_and_its_guard_refuses_the_edit(
    repo: Path, stores: list[PgLockStore], pg_server: PgServer
) -> None:
    cut_off, other = stores
    tools = LockTools(cut_off, "alice")
    first = await tools.acquire({"filepaths": ["a.py", "b.py"]})
    assert first.data is not None
    assert first.data["all_acquired"]
    old_fence = cut_off.grant_fence("a.py", "alice")
    kill_session(pg_server, cut_off)
    assert other.acquire("a.py", "bob", timeout_seconds=60), "the lock is free for others"
    guard = make_write_guard_hook(cut_off, "alice")
    denied = await guard(
        {"tool_name": "Write", "tool_input": {"file_path": str(repo / "a.py")}}, None, {}
    )
    reason = denied["hookSpecificOutput"]["permissionDecisionReason"]
    assert f"fence {old_fence}" in reason
    assert "lost" in reason
    after = await tools.release({"filepaths": ["b.py"]})
    assert after.data is not None
    lost = {item["filepath"]: item for item in after.data["lost_locks"]}
    assert set(lost) == {cut_off.canonicalize("a.py"), cut_off.canonicalize("b.py")}
    assert "session" in lost[cut_off.canonicalize("a.py")]["reason"]
    assert after.data["released"] == []
    assert other.holder("a.py") == "bob"
    again = await tools.release({"filepaths": ["b.py"]})
    assert again.data is not None
    assert "lost_locks" not in again.data, "reported once"


def test_a_newer_schema_is_refused_and_left_alone(repo: Path, pg_server: PgServer) -> None:
    schema = "t_newer_schema"
    pg_server.drop_schema(schema)
    spec = pg_server.spec(schema)
    try:
        PgLockStore(repo, spec).connect().close()
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            admin.execute(f'UPDATE "{schema}".meta SET version = %s', (SCHEMA_VERSION + 1,))
        forget_ensured_schemas()
        with pytest.raises(SchemaError, match="newer than this lockyard"):
            PgLockStore(repo, spec).connect()
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            row = admin.execute(f'SELECT version FROM "{schema}".meta').fetchone()
        assert row == (SCHEMA_VERSION + 1,)
    finally:
        forget_ensured_schemas()
        pg_server.drop_schema(schema)


def test_twenty_clients_starting_at_once_create_the_schema_once(pg_server: PgServer) -> None:
    schema = "t_twenty_at_once"
    pg_server.drop_schema(schema)
    start = threading.Barrier(20)
    failures: list[BaseException] = []

    def client() -> None:
        try:
            with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
                start.wait()
                ensure_schema(conn, schema)
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=client) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert failures == []
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            assert admin.execute(f'SELECT count(*) FROM "{schema}".meta').fetchone() == (1,)
    finally:
        pg_server.drop_schema(schema)


def test_sql_looking_names_are_data(tmp_path: Path, pg_backend: str, pg_schema: str) -> None:
    repo = tmp_path / "x'; DROP TABLE holds; --"
    repo.mkdir()
    paths = ["a'); DELETE FROM waiters; --.py", "__'||pg_sleep(5)||'__"]
    with PgLockStore(repo, pg_backend) as one, PgLockStore(repo, pg_backend) as two:
        for path in paths:
            assert one.try_lock(path, "robert'); --")
            assert not two.try_lock(path, "bob")
            assert two.holder(path) == "robert'); --"
        assert len(one.list_locks()) == 2
        assert one.cleanup_agent_locks("robert'); --") == sorted(
            one.canonicalize(p)
            for p in ["a'); DELETE FROM waiters; --.py", "__'||pg_sleep(5)||'__"]
        )


@pytest.mark.anyio
async def test_the_monitor_resolves_a_deadlock_between_two_sessions_and_one_monitor_leads(
    repo: Path, pg_backend: str
) -> None:
    from lockyard.infra.crossproc.monitor_loop import CrossProcessMonitor
    from lockyard.infra.crossproc.sources import monitor_source, victim_notices_for

    with (
        PgLockStore(repo, pg_backend) as host_a,
        PgLockStore(repo, pg_backend) as host_b,
        PgLockStore(repo, pg_backend) as monitor_one,
        PgLockStore(repo, pg_backend) as monitor_two,
    ):
        alice = LockTools(host_a, "alice", victim_notices=victim_notices_for(host_a))
        bob = LockTools(host_b, "bob", victim_notices=victim_notices_for(host_b))
        assert host_a.try_lock("x.py", "alice")
        assert host_b.try_lock("y.py", "bob")
        leader = CrossProcessMonitor(source=monitor_source(monitor_one))
        follower = CrossProcessMonitor(source=monitor_source(monitor_two))
        outcomes: dict[str, dict[str, Any]] = {}

        async def wait(tools: LockTools, name: str, path: str) -> None:
            result = await tools.acquire({"filepaths": [path], "timeout_seconds": 60})
            assert result.data is not None
            outcomes[name] = dict(result.data)

        async with anyio.create_task_group() as group:
            group.start_soon(wait, alice, "alice", "y.py")
            group.start_soon(wait, bob, "bob", "x.py")

            async def resolved() -> Any:
                report = await leader.check_once()
                return report if report.resolutions else None

            first = await wait_until_async(resolved, "the leader resolving the deadlock")
            second = await follower.check_once()
        assert first.leader
        assert not second.leader
        assert [r.notice is not None for r in first.resolutions] == [True]
        assert all(r.notice is None for r in second.resolutions)
        victim = first.resolutions[0].deadlock.victim
        survivor = "bob" if victim == "alice" else "alice"
        assert "deadlock" in outcomes[victim]
        assert outcomes[survivor]["all_acquired"], "the survivor got the victim's lock"


def test_the_documented_grants_are_enough_for_an_agent_role(
    repo: Path, pg_server: PgServer, pg_schema: str, pg_backend: str
) -> None:
    PgLockStore(repo, pg_backend).connect().close()  # the owner creates the schema
    role, password = f"agent_{pg_schema}", "agent-pw"
    grants = f"""
        CREATE ROLE {role} LOGIN PASSWORD '{password}';
        GRANT USAGE ON SCHEMA {pg_schema} TO {role};
        GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {pg_schema} TO {role};
        GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA {pg_schema} TO {role};
        GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {pg_schema} TO {role};
    """
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(grants.encode())
    try:
        as_agent = f"postgresql://{role}:{password}@{pg_backend.split('@', 1)[1]}"
        with PgLockStore(repo, as_agent) as one, PgLockStore(repo, as_agent) as two:
            assert one.try_lock("a.py", "alice")
            assert not two.try_lock("a.py", "bob")
            assert two.acquire("a.py", "bob", timeout_seconds=0.05) is False
            assert one.release("a.py", "alice")
            assert two.try_lock("a.py", "bob")
            assert [info.holder.agent_id for info in one.list_locks() if info.holder] == ["bob"]
            assert one.cleanup_agent_locks("bob") == [one.canonicalize("a.py")]
            assert one.reclaim_stale() == []
    finally:
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def test_the_bare_word_takes_everything_from_libpq_environment(
    repo: Path, pg_server: PgServer, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    params = psycopg.conninfo.conninfo_to_dict(pg_server.dsn)
    for name, variable in [
        ("host", "PGHOST"),
        ("port", "PGPORT"),
        ("user", "PGUSER"),
        ("password", "PGPASSWORD"),
        ("dbname", "PGDATABASE"),
    ]:
        if params.get(name) is not None:
            monkeypatch.setenv(variable, str(params[name]))
    monkeypatch.setenv("PGSSLMODE", "disable")
    monkeypatch.setenv("PGAPPNAME", "overridden by lockyard")
    spec = parse_spec("postgresql", schema=pg_schema)
    assert spec.conninfo == ""
    assert str(params["password"]) not in spec.display
    with PgLockStore(repo, spec) as one, PgLockStore(repo, spec) as two:
        assert one.try_lock("a.py", "alice")
        assert two.holder("a.py") == "alice"


def test_a_transaction_the_server_rolls_back_to_break_a_deadlock_runs_again(
    stores: list[PgLockStore],
) -> None:
    """Two clients whose transactions lock rows in opposite orders: the server aborts one with
    'deadlock detected'; that client's operation runs again instead of failing the agent."""
    first, second = stores
    schema = first.session.spec.schema
    first.session.run(
        lambda conn, _me: conn.execute(
            f'CREATE TABLE IF NOT EXISTS "{schema}".crossing (id int PRIMARY KEY, n int);'
            f'INSERT INTO "{schema}".crossing VALUES (1, 0), (2, 0) ON CONFLICT DO NOTHING'
        )
    )
    both_hold_one = threading.Barrier(2)
    attempts: list[str] = []

    def crossing(order: tuple[int, int], name: str) -> Any:
        def operation(conn: psycopg.Connection[Any], _me: int) -> None:
            attempts.append(name)
            with conn.transaction():
                conn.execute(f'UPDATE "{schema}".crossing SET n = n + 1 WHERE id = %s', (order[0],))
                if attempts.count(name) == 1:
                    both_hold_one.wait(timeout=30)  # the first attempts cross for certain
                conn.execute(f'UPDATE "{schema}".crossing SET n = n + 1 WHERE id = %s', (order[1],))

        return operation

    errors: list[BaseException] = []

    def run(store: PgLockStore, order: tuple[int, int], name: str) -> None:
        try:
            store.session.run(crossing(order, name))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=(first, (1, 2), "a")),
        threading.Thread(target=run, args=(second, (2, 1), "b")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    # At least one ran again. A retry can cross the other's pending update once more (on a
    # CPU-starved server the retried transaction may take its first row before the survivor
    # wakes), and that deadlock is broken and retried the same way.
    assert sorted(set(attempts)) == ["a", "b"]
    assert len(attempts) >= 3
    [(total,)] = first.session.run(
        lambda conn, _me: conn.execute(f'SELECT sum(n) FROM "{schema}".crossing').fetchall()
    )
    assert total == 4  # both transactions took effect exactly once


@pytest.mark.anyio
async def test_the_coordinator_closes_the_database_store_it_opened(
    repo: Path, pg_backend: str, pg_server: PgServer
) -> None:
    coordinator = LockCoordinator(repo, backend=pg_backend)
    store = coordinator.store
    assert isinstance(store, PgLockStore)
    runtime = coordinator.runtime("alice")
    await runtime.tools.acquire({"filepaths": ["a.py"]})
    session = store.session_number
    assert await coordinator.aclose() == {"alice": ["a.py"]}
    with pytest.raises(BackendUnavailableError, match="was closed"):
        store.holder("a.py")
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        # The session's own advisory lock is free once the server has ended the session.
        admin.execute("SET lock_timeout = '30s'")
        admin.execute("SELECT pg_advisory_lock(%s, %s)", (lock_class(store.schema), session))
    assert await coordinator.aclose() == {}, "safe to repeat"
    given = PgLockStore(repo, pg_backend)
    await LockCoordinator(repo, store=given).aclose()
    assert given.try_lock("a.py", "bob"), "a store passed in stays open: the caller's"
    given.close()
