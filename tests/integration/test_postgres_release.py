"""A release hands the lock to the first live waiter in its own transaction: past a waiter
whose session ended, and past a head that leaves the queue while the release waits for it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from lockyard.infra.lockstore.postgres import PgLockStore
from pg_support import PgServer
from polling_support import wait_until

NO_RECHECK = 3600.0
"""A liveness interval no test outlives: only the release's push hands a waiter its lock."""

NOBODYS_SESSION = 2**31 - 1
"""A session number no connection holds: a row of it belongs to a session that ended."""


@pytest.fixture
def stores(repo: Path, pg_backend: str) -> Iterator[list[PgLockStore]]:
    opened = [PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK) for _ in range(3)]
    yield opened
    for store in opened:
        store.close()


def add_waiter(
    admin: psycopg.Connection[object], store: PgLockStore, agent: str, session: int
) -> int:
    """A queue entry for `agent` on a.py, as `take_or_enqueue` writes it; its ticket."""
    s = f'"{store.schema}"'
    row = admin.execute(
        f"INSERT INTO {s}.waiters (ticket, namespace, key, agent_id, session, token, pid, host, "
        f"since) VALUES (nextval('{s}.ticket_seq'), %s, %s, %s, %s, %s, 1, 'h', 0) "
        "RETURNING ticket",
        (store.namespace, store.canonicalize("a.py"), agent, session, f"{agent}-token"),
    ).fetchone()
    admin.execute(f"UPDATE {s}.holds SET queued = true")
    assert row is not None
    return int(row[0])


def release_waits(admin: psycopg.Connection[object], store: PgLockStore) -> bool:
    """Whether a release of `store`'s schema waits on a lock (a row or a transaction). The
    release statement is known by its start: pg_stat_activity keeps a query's first 1,024
    bytes only (track_activity_query_size)."""
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
        (f'WITH head AS (%FROM "{store.schema}".waiters WHERE ticket = (%',),
    ).fetchone()
    return row is not None and row[0] > 0


def release_blocked(
    admin: psycopg.Connection[object], holder: PgLockStore, what: str
) -> tuple[threading.Thread, list[bool]]:
    """alice's release of a.py, started in a thread and waiting on a lock in the server."""
    released: list[bool] = []
    releasing = threading.Thread(target=lambda: released.append(holder.release("a.py", "alice")))
    releasing.start()
    wait_until(lambda: release_waits(admin, holder), what)
    return releasing, released


def acquire_in_thread(store: PgLockStore, agent: str) -> tuple[threading.Thread, list[bool]]:
    granted: list[bool] = []
    thread = threading.Thread(
        target=lambda: granted.append(store.acquire("a.py", agent, timeout_seconds=60))
    )
    thread.start()
    wait_until(
        lambda: agent in [w.agent_id for w in store.waiters("a.py")], f"{agent} queued for a.py"
    )
    return thread, granted


def test_a_release_passes_over_a_waiter_whose_session_ended(
    stores: list[PgLockStore], pg_server: PgServer
) -> None:
    holder, waiter, _ = stores
    assert holder.try_lock("a.py", "alice")
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        add_waiter(admin, holder, "ghost", NOBODYS_SESSION)
        thread, granted = acquire_in_thread(waiter, "bob")
        assert holder.release("a.py", "alice")
        thread.join(60)
        assert granted == [True], "handed to bob by push, past the ghost"
        left = admin.execute(f'SELECT agent_id FROM "{holder.schema}".waiters').fetchall()
    assert left == [], "the ghost's entry is dropped, bob's served"
    record = holder.holder_record("a.py")
    assert record is not None
    assert (record.agent_id, record.fence) == ("bob", waiter.grant_fence("a.py", "bob"))


def test_a_release_whose_head_leaves_meanwhile_hands_the_lock_to_the_next(
    stores: list[PgLockStore], pg_server: PgServer
) -> None:
    holder, waiter, other = stores
    assert holder.try_lock("a.py", "alice")
    s = f'"{holder.schema}"'
    with (
        psycopg.connect(pg_server.dsn, autocommit=True) as admin,
        psycopg.connect(pg_server.dsn) as leaving,
    ):
        ticket = add_waiter(admin, holder, "carol", other.connect().session_number)
        thread, granted = acquire_in_thread(waiter, "bob")
        # Carol leaves: her entry is deleted by a transaction that has not committed yet.
        leaving.execute(f"DELETE FROM {s}.waiters WHERE ticket = %s", (ticket,))
        releasing, released = release_blocked(
            admin, holder, "the release waiting on carol's queue entry"
        )
        leaving.commit()
        releasing.join(60)
        thread.join(60)
    assert released == [True]
    assert granted == [True], "bob, next in line, got it by push"
    record = holder.holder_record("a.py")
    assert record is not None
    assert record.agent_id == "bob"
    assert holder.waiters("a.py") == []


def test_a_release_without_waiters_frees_the_lock_and_a_second_release_is_refused(
    stores: list[PgLockStore],
) -> None:
    holder, other, _ = stores
    assert holder.try_lock("a.py", "alice")
    assert not other.release("a.py", "bob"), "only the holder releases"
    assert holder.release("a.py", "alice")
    assert not holder.release("a.py", "alice")
    assert holder.holder_record("a.py") is None
    assert other.try_lock("a.py", "bob")


def test_a_release_that_finds_its_lock_taken_over_meanwhile_leaves_the_queue_alone(
    stores: list[PgLockStore], pg_server: PgServer
) -> None:
    holder, waiter, other = stores
    assert holder.try_lock("a.py", "alice")
    s = f'"{holder.schema}"'
    lock = (holder.namespace, holder.canonicalize("a.py"))
    with (
        psycopg.connect(pg_server.dsn, autocommit=True) as admin,
        psycopg.connect(pg_server.dsn) as operator,
    ):
        thread, granted = acquire_in_thread(waiter, "bob")
        # An operator hands alice's lock to zed; alice's release runs before that commits.
        operator.execute(
            f"UPDATE {s}.holds SET agent_id = 'zed', token = 'zed-token', session = %s "
            "WHERE namespace = %s AND key = %s",
            (other.connect().session_number, *lock),
        )
        releasing, released = release_blocked(
            admin, holder, "alice's release waiting on the lock's row"
        )
        operator.commit()
        releasing.join(60)
        assert released == [False], "alice no longer held it"
        assert [w.agent_id for w in holder.waiters("a.py")] == ["bob"], "bob keeps his place"
        record = holder.holder_record("a.py")
        assert record is not None
        assert record.agent_id == "zed"
        admin.execute(f"SELECT {s}.release(%s, %s, 'zed', %s)", (*lock, other.session_number))
        thread.join(60)
    assert granted == [True], "handed to bob when zed let go"


def test_a_lock_handed_on_is_free_and_unqueued_after_its_new_holder_releases_it(
    stores: list[PgLockStore], pg_server: PgServer
) -> None:
    holder, waiter, other = stores
    assert holder.try_lock("a.py", "alice")
    thread, granted = acquire_in_thread(waiter, "bob")
    assert holder.release("a.py", "alice")
    thread.join(60)
    assert granted == [True]
    assert waiter.release("a.py", "bob")
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        row = admin.execute(f'SELECT agent_id, queued FROM "{holder.schema}".holds').fetchone()
    assert row == (None, False)
    assert other.try_lock("a.py", "carol")
    assert other.holder("a.py") == "carol"
