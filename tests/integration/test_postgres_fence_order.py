"""Fencing numbers grow per lock whatever the timing on the server.

A grant's insert draws its number before it meets the lock's row. An insert that waits there
while another transaction releases the lock, grants it to someone else and releases it again
would otherwise record a number older than that other grant's."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from lockyard.infra.lockstore.postgres import PgLockStore
from lockyard.infra.lockstore.postgres.schema import SCHEMA_VERSION, ddl, ensure_schema
from lockyard.infra.lockstore.postgres.session import forget_ensured_schemas
from pg_support import PgServer
from polling_support import wait_until


@pytest.fixture
def stores(repo: Path, pg_backend: str) -> Iterator[list[PgLockStore]]:
    opened = [PgLockStore(repo, pg_backend) for _ in range(2)]
    yield opened
    for store in opened:
        store.close()


def insert_waits(admin: psycopg.Connection[object], store: PgLockStore) -> bool:
    """Whether a statement of `store`'s schema waits on a row lock (our open transaction)."""
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
        (f'%INSERT INTO "{store.schema}".holds%',),
    ).fetchone()
    return row is not None and row[0] > 0


def test_an_insert_that_waited_through_a_newer_grant_gets_a_newer_number(
    stores: list[PgLockStore], pg_server: PgServer
) -> None:
    one, two = stores
    assert one.try_lock("a.py", "alice")
    key, s = one.canonicalize("a.py"), f'"{one.schema}"'
    with (
        psycopg.connect(pg_server.dsn, autocommit=True) as watcher,
        psycopg.connect(pg_server.dsn) as releaser,
    ):
        # A release in progress: alice's row is deleted, not yet committed.
        releaser.execute(
            f"DELETE FROM {s}.holds WHERE namespace = %s AND key = %s", (one.namespace, key)
        )
        outcome: list[bool] = []
        taking = threading.Thread(target=lambda: outcome.append(two.try_lock("a.py", "bob")))
        taking.start()
        # Bob's insert has drawn its number and waits on the deleted row.
        wait_until(lambda: insert_waits(watcher, one), "bob's insert waiting on the row")
        # Meanwhile the lock goes to carol and comes back: her number is drawn after bob's.
        row = releaser.execute(
            f"INSERT INTO {s}.holds (namespace, key, agent_id, session, token, fence, pid, "
            f"host, acquired_at) VALUES (%s, %s, 'carol', 0, 'carol-token', "
            f"nextval('{s}.fence_seq'), 1, 'elsewhere', 0) RETURNING fence",
            (one.namespace, key),
        ).fetchone()
        assert row is not None
        carols = int(row[0])
        releaser.execute(
            f"DELETE FROM {s}.holds WHERE namespace = %s AND key = %s", (one.namespace, key)
        )
        releaser.commit()
        taking.join(60)
    assert outcome == [True]
    bobs = two.grant_fence("a.py", "bob")
    assert bobs is not None
    assert bobs > carols, "a later grant of the lock carries a larger number"
    record = one.holder_record("a.py")
    assert record is not None
    assert (record.agent_id, record.fence) == ("bob", bobs)


def test_a_grant_below_the_locks_last_number_is_refused(
    stores: list[PgLockStore], pg_server: PgServer
) -> None:
    one, _ = stores
    assert one.try_lock("a.py", "alice")
    last = one.grant_fence("a.py", "alice")
    assert last is not None
    assert one.release("a.py", "alice")
    key, s = one.canonicalize("a.py"), f'"{one.schema}"'
    with (
        psycopg.connect(pg_server.dsn, autocommit=True) as admin,
        pytest.raises(psycopg.errors.SerializationFailure, match="not above"),
    ):
        admin.execute(
            f"INSERT INTO {s}.holds (namespace, key, agent_id, session, token, fence, pid, "
            "host, acquired_at) VALUES (%s, %s, 'mallory', 0, 'old', %s, 1, 'h', 0)",
            (one.namespace, key, last),
        )
    assert one.holder_record("a.py") is None, "the refused grant left nothing behind"
    assert one.try_lock("a.py", "alice")
    again = one.grant_fence("a.py", "alice")
    assert again is not None
    assert again > last


def test_an_upgraded_schema_knows_the_numbers_of_the_locks_it_holds(
    repo: Path, pg_server: PgServer, pg_schema: str, pg_backend: str
) -> None:
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        with admin.transaction():
            admin.execute(ddl(pg_schema, version=SCHEMA_VERSION - 1).encode())
        forget_ensured_schemas()
        s = f'"{pg_schema}"'
        admin.execute(
            f"INSERT INTO {s}.holds (namespace, key, agent_id, session, token, fence, pid, "
            f"host, acquired_at) VALUES ('ns', 'a.py', 'alice', 0, 't', "
            f"nextval('{s}.fence_seq') + 100, 1, 'h', 0)"
        )
        ensure_schema(admin, pg_schema)
        marks = admin.execute(f"SELECT key, fence FROM {s}.fence_marks").fetchall()
        held = admin.execute(f"SELECT key, fence FROM {s}.holds").fetchall()
        assert marks == held
        admin.execute(f"DELETE FROM {s}.holds")
        with pytest.raises(psycopg.errors.SerializationFailure):
            admin.execute(
                f"INSERT INTO {s}.holds (namespace, key, agent_id, session, token, fence, "
                f"pid, host, acquired_at) VALUES ('ns', 'a.py', 'bob', 0, 'u', "
                f"nextval('{s}.fence_seq'), 1, 'h', 0)"
            )
    forget_ensured_schemas()


def marks_of(admin: psycopg.Connection[object], schema: str) -> dict[str, int]:
    rows = admin.execute(f'SELECT key, fence FROM "{schema}".fence_marks').fetchall()
    return {str(key): int(fence) for key, fence in rows}


def test_a_hand_off_at_release_records_its_number_as_the_locks_last(
    stores: list[PgLockStore], pg_server: PgServer
) -> None:
    one, two = stores
    assert one.try_lock("a.py", "alice")
    waiting = threading.Thread(target=lambda: two.acquire("a.py", "bob", timeout_seconds=60))
    waiting.start()
    wait_until(lambda: bool(one.waiters("a.py")), "bob queued for a.py")
    assert one.release("a.py", "alice")
    waiting.join(60)
    bobs = two.grant_fence("a.py", "bob")
    alices_key = one.canonicalize("a.py")
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        assert marks_of(admin, one.schema) == {alices_key: bobs}
        marked = admin.execute(f'SELECT marked FROM "{one.schema}".holds').fetchall()
    assert marked == [(True,)], "recorded by the hand-off's own statement, not the trigger"


def test_a_fence_check_failure_is_run_again_and_other_check_failures_are_not(
    stores: list[PgLockStore],
) -> None:
    one, _ = stores
    assert one.try_lock("a.py", "alice")
    key, s = one.canonicalize("a.py"), f'"{one.schema}"'
    calls: list[int] = []

    def stale_once(conn: psycopg.Connection[object], me: int) -> str:
        calls.append(me)
        if len(calls) == 1:  # a number below the mark's: the CHECK refuses it
            conn.execute(
                f"UPDATE {s}.fence_marks SET previous = fence, fence = 1 WHERE key = %s", (key,)
            )
        return "done"

    assert one.session.run(stale_once) == "done"
    assert len(calls) == 2, "run again after the fence CHECK failed"

    def other_check(conn: psycopg.Connection[object], me: int) -> None:
        calls.append(me)
        conn.execute("SELECT 1")
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS c (x int CHECK (x > 0))")
        conn.execute("INSERT INTO c VALUES (0)")

    with pytest.raises(psycopg.errors.CheckViolation):
        one.session.run(other_check)
    assert len(calls) == 3, "any other CHECK failure is the caller's"


def test_a_version_4_schema_is_upgraded_with_its_marks_and_refuses_stale_hot_grants(
    repo: Path, pg_server: PgServer, pg_schema: str, pg_backend: str
) -> None:
    s = f'"{pg_schema}"'
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        with admin.transaction():
            admin.execute(ddl(pg_schema, version=4).encode())
        forget_ensured_schemas()
        admin.execute(
            f"INSERT INTO {s}.holds (namespace, key, agent_id, session, token, fence, pid, "
            f"host, acquired_at) VALUES ('ns', 'a.py', 'alice', 0, 't', "
            f"nextval('{s}.fence_seq') + 100, 1, 'h', 0)"
        )
        held = marks_of(admin, pg_schema)
        with PgLockStore(repo, pg_backend, namespace="ns") as store:
            store.connect()
            assert marks_of(admin, pg_schema) == held, "the marks of version 4 are kept"
            assert store.holder("a.py") is None, "its session (0) is not alive"
            # The hot path's statement: a number below the mark breaks its CHECK and is
            # drawn again until it is above (the sequence catches up a number per attempt).
            admin.execute(f"SELECT setval('{s}.fence_seq', %s)", (held["a.py"] - 3,))
            assert store.try_lock("b.py", "bob")
            admin.execute(f"DELETE FROM {s}.holds WHERE key = 'a.py'")
            assert store.try_lock("a.py", "bob")
            fence = store.grant_fence("a.py", "bob")
            assert fence is not None
            assert fence > held["a.py"]
            assert marks_of(admin, pg_schema)["a.py"] == fence
    forget_ensured_schemas()
