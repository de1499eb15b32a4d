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
        (f'INSERT INTO "{store.schema}".holds%',),
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
