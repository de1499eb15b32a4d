"""Fencing numbers grow per lock whatever the timing on the server.

A lock's row outlives its release (a free lock is a row without a holder), and every grant of
a lock that has a row draws its number while it holds that row's lock. A take that waits on
the row while another transaction releases the lock, grants it to someone else and releases
it again therefore draws its number after that other grant's."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from lockyard.infra.lockstore.postgres import PgLockStore
from pg_support import PgServer
from polling_support import wait_until

FREE = "agent_id = NULL, session = NULL, token = NULL, pid = NULL, host = NULL, acquired_at = NULL"
"""The holder's columns a release clears (the lock's row and number stay)."""


@pytest.fixture
def stores(repo: Path, pg_backend: str) -> Iterator[list[PgLockStore]]:
    opened = [PgLockStore(repo, pg_backend) for _ in range(2)]
    yield opened
    for store in opened:
        store.close()


def take_waits(admin: psycopg.Connection[object], store: PgLockStore) -> bool:
    """Whether a take of `store`'s schema waits on a row lock (our open transaction)."""
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
        (f'%INSERT INTO "{store.schema}".holds%',),
    ).fetchone()
    return row is not None and row[0] > 0


def rows_of(admin: psycopg.Connection[object], schema: str) -> list[tuple[str, str | None, int]]:
    rows = admin.execute(f'SELECT key, agent_id, fence FROM "{schema}".holds ORDER BY key')
    return [(str(key), agent, int(fence)) for key, agent, fence in rows.fetchall()]


def test_a_take_that_waited_on_the_lock_through_a_newer_grant_gets_a_newer_number(
    stores: list[PgLockStore], pg_server: PgServer
) -> None:
    one, two = stores
    assert one.try_lock("a.py", "alice")
    key, s = one.canonicalize("a.py"), f'"{one.schema}"'
    lock = (one.namespace, key)
    with (
        psycopg.connect(pg_server.dsn, autocommit=True) as watcher,
        psycopg.connect(pg_server.dsn) as releaser,
    ):
        # A release in progress: alice's row is cleared, not yet committed.
        releaser.execute(f"UPDATE {s}.holds SET {FREE} WHERE namespace = %s AND key = %s", lock)
        outcome: list[bool] = []
        taking = threading.Thread(target=lambda: outcome.append(two.try_lock("a.py", "bob")))
        taking.start()
        wait_until(lambda: take_waits(watcher, one), "bob's take waiting on the lock's row")
        # Meanwhile the lock goes to carol and comes back.
        row = releaser.execute(
            f"UPDATE {s}.holds SET agent_id = 'carol', session = 0, token = 'carol-token', "
            f"fence = nextval('{s}.fence_seq'), pid = 1, host = 'elsewhere', acquired_at = 0 "
            "WHERE namespace = %s AND key = %s RETURNING fence",
            lock,
        ).fetchone()
        assert row is not None
        carols = int(row[0])
        releaser.execute(f"UPDATE {s}.holds SET {FREE} WHERE namespace = %s AND key = %s", lock)
        releaser.commit()
        taking.join(60)
    assert outcome == [True]
    bobs = two.grant_fence("a.py", "bob")
    assert bobs is not None
    assert bobs > carols, "a later grant of the lock carries a larger number"
    record = one.holder_record("a.py")
    assert record is not None
    assert (record.agent_id, record.fence) == ("bob", bobs)


def test_a_released_lock_keeps_its_row_and_last_number_and_is_listed_nowhere(
    stores: list[PgLockStore], pg_server: PgServer
) -> None:
    one, two = stores
    assert one.try_lock("a.py", "alice")
    alices = one.grant_fence("a.py", "alice")
    assert alices is not None
    assert one.release("a.py", "alice")
    key = one.canonicalize("a.py")
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        assert rows_of(admin, one.schema) == [(key, None, alices)]
    assert one.holder_record("a.py") is None
    assert one.list_locks() == []
    assert two.snapshot().holds == {}
    assert two.try_lock("a.py", "bob")
    bobs = two.grant_fence("a.py", "bob")
    assert bobs is not None
    assert bobs > alices


def test_a_grant_into_a_lock_row_goes_above_its_last_number_whatever_the_sequence_says(
    stores: list[PgLockStore], pg_server: PgServer
) -> None:
    one, _ = stores
    assert one.try_lock("a.py", "alice")
    assert one.release("a.py", "alice")
    s = f'"{one.schema}"'
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(f"UPDATE {s}.holds SET fence = 1000")
        admin.execute(f"SELECT setval('{s}.fence_seq', 5)")  # e.g. restored from a dump
    assert one.try_lock("a.py", "alice")
    assert one.grant_fence("a.py", "alice") == 1001


def test_each_grant_draws_one_number_and_a_refused_take_none(stores: list[PgLockStore]) -> None:
    """A schema's grants are numbered 1, 2, 3...: a take of a free row, of a new row, a read,
    an upgrade and a hand-off each draw one number; a refused take draws none."""
    one, two = stores
    fences: list[int | None] = []

    def granted(store: PgLockStore, agent: str) -> None:
        fences.append(store.grant_fence("a.py", agent))

    for _ in range(2):  # the row's first grant, then a grant into its free row
        assert one.try_lock("a.py", "alice")
        granted(one, "alice")
        assert not two.try_lock("a.py", "bob")
        assert not two.acquire("a.py", "bob", timeout_seconds=0.05)
        assert one.release("a.py", "alice")
    assert one.try_lock("a.py", "ann", mode="shared")
    granted(one, "ann")
    assert one.try_lock("a.py", "ann")  # an upgrade, in place
    granted(one, "ann")
    waiting = threading.Thread(target=lambda: two.acquire("a.py", "bob", timeout_seconds=60))
    waiting.start()
    wait_until(lambda: bool(one.waiters("a.py")), "bob queued for a.py")
    assert one.release("a.py", "ann")
    waiting.join(60)
    granted(two, "bob")
    assert fences == [1, 2, 3, 4, 5]


def test_a_hand_off_at_release_writes_the_next_holder_into_the_same_row(
    stores: list[PgLockStore], pg_server: PgServer
) -> None:
    one, two = stores
    assert one.try_lock("a.py", "alice")
    alices = one.grant_fence("a.py", "alice")
    assert alices is not None
    waiting = threading.Thread(target=lambda: two.acquire("a.py", "bob", timeout_seconds=60))
    waiting.start()
    wait_until(lambda: bool(one.waiters("a.py")), "bob queued for a.py")
    assert one.release("a.py", "alice")
    waiting.join(60)
    bobs = two.grant_fence("a.py", "bob")
    assert bobs is not None
    assert bobs > alices
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        assert rows_of(admin, one.schema) == [(one.canonicalize("a.py"), "bob", bobs)]


def test_a_check_failure_is_the_callers_and_is_not_run_again(
    stores: list[PgLockStore],
) -> None:
    one, _ = stores
    calls: list[int] = []

    def failing_check(conn: psycopg.Connection[object], me: int) -> None:
        calls.append(me)
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS c (x int CHECK (x > 0))")
        conn.execute("INSERT INTO c VALUES (0)")

    with pytest.raises(psycopg.errors.CheckViolation):
        one.session.run(failing_check)
    assert len(calls) == 1
