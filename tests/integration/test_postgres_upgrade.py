"""Schema upgrades on PostgreSQL: a version 1 schema in use is brought to the current version
in place, once, with the locks it holds kept; new grants then record their checkout. A
version 2 schema gets an inlinable `channel`, whose names stay the ones clients listen on."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lockyard.infra.lockstore.postgres import PgLockStore
from lockyard.infra.lockstore.postgres.schema import (
    SCHEMA_VERSION,
    ddl,
    ensure_schema,
    namespace_channel,
)
from lockyard.infra.lockstore.postgres.session import forget_ensured_schemas
from pg_support import PgServer
from polling_support import wait_until

NO_RECHECK = 3600.0
"""A liveness interval no test outlives: only a push hands a queued waiter its lock."""


@pytest.fixture
def v1_schema(pg_server: PgServer, pg_schema: str) -> Iterator[str]:
    """`pg_schema` created as lockyard's first schema version made it."""
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin, admin.transaction():
        admin.execute(ddl(pg_schema, version=1).encode())
    forget_ensured_schemas()
    yield pg_schema
    forget_ensured_schemas()


def version_of(pg_server: PgServer, schema: str) -> int:
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        row = admin.execute(f'SELECT version FROM "{schema}".meta').fetchone()
    assert row is not None
    return int(row[0])


def take_as_version_1(conn: psycopg.Connection[Any], schema: str, key: str, agent: str) -> None:
    """What a version 1 client did to take a lock: its own session, then its `take`."""
    (session,) = conn.execute(f'SELECT "{schema}".open_session()').fetchone() or (0,)
    row = conn.execute(
        f'SELECT outcome FROM "{schema}".take(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)',
        ("old-ns", key, agent, "v1-token", 1, None, "old-host", None, None, True, session),
    ).fetchone()
    assert row == ("granted",)


def test_a_version_1_schema_is_upgraded_in_place_keeping_its_locks(
    repo: Path, pg_server: PgServer, v1_schema: str
) -> None:
    assert version_of(pg_server, v1_schema) == 1
    with psycopg.connect(pg_server.dsn, autocommit=True) as old_client:
        take_as_version_1(old_client, v1_schema, "src/app.py", "old-agent")
        spec = pg_server.spec(v1_schema)
        with PgLockStore(repo, spec, namespace="old-ns") as store:
            store.connect()
            assert version_of(pg_server, v1_schema) == SCHEMA_VERSION
            held = store.holder_record("src/app.py")
            assert held is not None
            assert (held.agent_id, held.checkout) == ("old-agent", None), "kept, as it was"
            assert not store.try_lock("src/app.py", "new-agent"), "still the old session's"
        # The old client's session ends: its lock is free for the upgraded clients.
    with PgLockStore(repo, spec, namespace="old-ns") as store:
        assert store.acquire("src/app.py", "new-agent", timeout_seconds=30)
        record = store.holder_record("src/app.py")
        assert record is not None
        assert (record.agent_id, record.checkout) == ("new-agent", store.root)


def test_a_hold_with_a_queue_at_upgrade_is_handed_on_by_a_new_release(
    repo: Path, pg_server: PgServer, v1_schema: str
) -> None:
    with (
        psycopg.connect(pg_server.dsn, autocommit=True) as old_holder,
        psycopg.connect(pg_server.dsn, autocommit=True) as old_waiter,
    ):
        take_as_version_1(old_holder, v1_schema, "src/app.py", "old-agent")
        (session,) = old_waiter.execute(f'SELECT "{v1_schema}".open_session()').fetchone() or (0,)
        old_waiter.execute(
            f'SELECT "{v1_schema}".enqueue(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)',
            ("old-ns", "src/app.py", "old-waiter", "w-token", 2, None, "old-host", None, None,
             session),
        )  # fmt: skip
        with PgLockStore(repo, pg_server.spec(v1_schema), namespace="old-ns") as store:
            store.connect()
            row = old_holder.execute(f'SELECT queued FROM "{v1_schema}".holds').fetchone()
            assert row == (True,), "marked from the queue during the upgrade"
            assert store.release("src/app.py", "old-agent")
            handed = store.holder_record("src/app.py")
            assert handed is not None
            assert handed.agent_id == "old-waiter", "handed to the queue's head, not freed"


def test_clients_starting_at_once_on_a_version_1_schema_upgrade_it_once(
    pg_server: PgServer, v1_schema: str
) -> None:
    start = threading.Barrier(10)
    failures: list[BaseException] = []

    def client() -> None:
        try:
            with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
                start.wait()
                ensure_schema(conn, v1_schema)
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=client) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    assert version_of(pg_server, v1_schema) == SCHEMA_VERSION
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        columns = admin.execute(
            "SELECT table_name FROM information_schema.columns "
            "WHERE table_schema = %s AND column_name = 'checkout' ORDER BY table_name",
            (v1_schema,),
        ).fetchall()
    assert columns == [("holds",), ("waiters",)]


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


def test_a_version_2_schema_gets_a_stable_channel_that_names_the_channels_clients_listen_on(
    repo: Path, pg_server: PgServer, pg_schema: str
) -> None:
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin, admin.transaction():
        admin.execute(ddl(pg_schema, version=2).encode())
    forget_ensured_schemas()
    spec = pg_server.spec(pg_schema)
    with (
        PgLockStore(repo, spec, liveness_interval=NO_RECHECK) as holder,
        PgLockStore(repo, spec, liveness_interval=NO_RECHECK) as waiter,
    ):
        holder.connect()
        assert version_of(pg_server, pg_schema) == SCHEMA_VERSION
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            row = admin.execute(
                f'SELECT "{pg_schema}".channel(%s), (SELECT provolatile FROM pg_proc '
                "WHERE oid = %s::regprocedure)",
                (holder.namespace, f'"{pg_schema}".channel(text)'),
            ).fetchone()
        assert row == (namespace_channel(pg_schema, holder.namespace), "s")
        assert holder.try_lock("a.py", "alice")
        granted: list[bool] = []
        waiting = threading.Thread(
            target=lambda: granted.append(waiter.acquire("a.py", "bob", timeout_seconds=60))
        )
        waiting.start()
        wait_until(lambda: bool(holder.waiters("a.py")), "bob queued for a.py")
        assert holder.release("a.py", "alice")
        waiting.join(60)
        assert granted == [True], "handed over by push on the upgraded schema"
        handed = holder.holder_record("a.py")
        assert handed is not None
        assert handed.agent_id == "bob"
    forget_ensured_schemas()
