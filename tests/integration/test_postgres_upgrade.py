"""Schema versions on PostgreSQL. A new schema is created at the current version directly; one
an older lockyard made is brought forward by `UPGRADES`, one step per version, all in one
transaction, once however many clients start at once, with the locks it holds kept. Version 1
is the first released, so no real step exists yet: these tests hand the same code steps of
their own, and the first real upgrade runs through exactly what they check."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lockyard.infra.lockstore.postgres import PgLockStore
from lockyard.infra.lockstore.postgres.schema import (
    SCHEMA_VERSION,
    UPGRADES,
    SchemaError,
    check_schema,
    ensure_schema,
    namespace_channel,
)
from lockyard.infra.lockstore.postgres.session import forget_ensured_schemas
from pg_support import PgServer
from polling_support import wait_until

STEP_2 = """
CREATE TABLE {s}.upgrade_runs (version integer PRIMARY KEY);
INSERT INTO {s}.upgrade_runs VALUES (2);
"""
STEP_3 = """
ALTER TABLE {s}.waiters ADD COLUMN note text;
INSERT INTO {s}.upgrade_runs VALUES (3);
"""
FUTURE = {2: STEP_2, 3: STEP_3}
"""Two steps a later lockyard might bring. Neither can run twice (the table, the column and
the key exist then): a step run again fails the upgrade."""


def version_of(conn: psycopg.Connection[Any], schema: str) -> int:
    row = conn.execute(f'SELECT version FROM "{schema}".meta').fetchone()
    assert row is not None
    return int(row[0])


def runs_of(conn: psycopg.Connection[Any], schema: str) -> list[int]:
    rows = conn.execute(f'SELECT version FROM "{schema}".upgrade_runs ORDER BY 1').fetchall()
    return [int(version) for (version,) in rows]


@pytest.fixture
def admin(pg_server: PgServer, pg_schema: str) -> Any:
    """A connection to a server where `pg_schema` was just created by this lockyard."""
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        ensure_schema(conn, pg_schema)
        yield conn
    forget_ensured_schemas()


def test_a_new_schema_is_made_at_the_current_version_and_every_later_one_has_its_step(
    admin: psycopg.Connection[Any], pg_schema: str
) -> None:
    assert version_of(admin, pg_schema) == SCHEMA_VERSION
    assert sorted(UPGRADES) == list(range(2, SCHEMA_VERSION + 1))
    check_schema(admin, pg_schema)  # what a read-only command accepts


def test_clients_starting_at_once_on_an_older_schema_run_each_step_once_in_order(
    pg_server: PgServer, admin: psycopg.Connection[Any], pg_schema: str
) -> None:
    start = threading.Barrier(10)
    failures: list[BaseException] = []

    def client() -> None:
        try:
            with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
                start.wait()
                ensure_schema(conn, pg_schema, FUTURE)
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=client) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    assert version_of(admin, pg_schema) == 3
    assert runs_of(admin, pg_schema) == [2, 3]


def test_an_upgrade_starts_from_the_installed_version_and_reading_never_upgrades(
    admin: psycopg.Connection[Any], pg_schema: str
) -> None:
    ensure_schema(admin, pg_schema, {2: STEP_2})
    assert version_of(admin, pg_schema) == 2
    with pytest.raises(SchemaError, match=r"is version 2, older than this lockyard \(3\); reading"):
        check_schema(admin, pg_schema, FUTURE)
    assert version_of(admin, pg_schema) == 2, "left as it was"
    ensure_schema(admin, pg_schema, FUTURE)  # step 3 only: step 2 again would fail
    assert (version_of(admin, pg_schema), runs_of(admin, pg_schema)) == (3, [2, 3])
    with pytest.raises(SchemaError, match="is version 3, newer than this lockyard understands"):
        ensure_schema(admin, pg_schema)  # this lockyard, which knows no step 3


def test_a_step_that_fails_leaves_the_schema_as_it_was_and_the_next_client_upgrades_it(
    pg_server: PgServer, admin: psycopg.Connection[Any], pg_schema: str
) -> None:
    with pytest.raises(psycopg.errors.DivisionByZero):
        ensure_schema(admin, pg_schema, {2: STEP_2, 3: "SELECT 1 / 0;"})
    assert version_of(admin, pg_schema) == 1
    found = admin.execute("SELECT to_regclass(%s)", (f'"{pg_schema}".upgrade_runs',)).fetchone()
    assert found == (None,), "step 2 rolled back with step 3"
    with psycopg.connect(pg_server.dsn, autocommit=True) as other:
        ensure_schema(other, pg_schema, FUTURE)  # not left waiting on the creators' lock
    assert (version_of(admin, pg_schema), runs_of(admin, pg_schema)) == (3, [2, 3])


def test_locks_held_and_queued_at_an_upgrade_stay_and_are_handed_on_after_it(
    repo: Path, pg_backend: str, admin: psycopg.Connection[Any], pg_schema: str
) -> None:
    with PgLockStore(repo, pg_backend) as holder, PgLockStore(repo, pg_backend) as waiter:
        assert holder.try_lock("a.py", "alice")
        granted: list[bool] = []
        waiting = threading.Thread(
            target=lambda: granted.append(waiter.acquire("a.py", "bob", timeout_seconds=60))
        )
        waiting.start()
        try:
            wait_until(lambda: bool(holder.waiters("a.py")), "bob queued for a.py")
            ensure_schema(admin, pg_schema, FUTURE)
            assert version_of(admin, pg_schema) == 3
            assert holder.holder("a.py") == "alice", "kept across the upgrade"
            assert [w.agent_id for w in holder.waiters("a.py")] == ["bob"]
        finally:
            assert holder.release("a.py", "alice")
            waiting.join(60)
        assert granted == [True], "handed over after the upgrade"
        assert holder.holder("a.py") == "bob"


def test_the_channel_function_is_inlinable_and_names_the_channels_clients_listen_on(
    admin: psycopg.Connection[Any], pg_schema: str
) -> None:
    # STABLE, not IMMUTABLE: PostgreSQL inlines only a function no stricter than its body.
    row = admin.execute(
        f'SELECT "{pg_schema}".channel(%s), (SELECT provolatile FROM pg_proc '
        "WHERE oid = %s::regprocedure)",
        ("some/namespace", f'"{pg_schema}".channel(text)'),
    ).fetchone()
    assert row == (namespace_channel(pg_schema, "some/namespace"), "s")


def test_holders_and_waiters_record_their_checkout(repo: Path, pg_backend: str) -> None:
    with PgLockStore(repo, pg_backend) as holder, PgLockStore(repo, pg_backend) as waiter:
        assert holder.try_lock("a.py", "alice")
        record = holder.holder_record("a.py")
        assert record is not None
        assert record.checkout == holder.root
        waiting = threading.Thread(target=waiter.acquire, args=("a.py", "bob", 60))
        waiting.start()
        try:
            queued = []
            while not queued:
                queued = holder.waiters("a.py")
            assert [(w.agent_id, w.checkout) for w in queued] == [("bob", waiter.root)]
        finally:
            holder.release("a.py", "alice")
            waiting.join(60)
        handed = holder.holder_record("a.py")
        assert handed is not None
        assert (handed.agent_id, handed.checkout) == ("bob", waiter.root)
