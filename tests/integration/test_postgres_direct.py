"""The hot statements run through libpq directly (`Session.run_direct`): the same errors,
retries and reconnection as psycopg's path, and a session that survives an interrupted wait."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import psycopg
import pytest

from lockyard.infra.lockstore.postgres import PgLockStore
from lockyard.infra.lockstore.postgres.session import DirectStatement
from pg_support import PgServer


@pytest.fixture
def store(repo: Path, pg_backend: str) -> Iterator[PgLockStore]:
    with PgLockStore(repo, pg_backend) as opened:
        yield opened.connect()


def test_a_direct_statement_returns_its_first_row_as_text_and_none_for_null(
    store: PgLockStore,
) -> None:
    statement = DirectStatement.of("row", "SELECT $1::text, NULL::int, $2::int + 1, $3::int")
    row = store.session.run_direct(statement, ("é", 41))
    assert row == ["é".encode(), None, b"42", str(store.session_number).encode()]
    nothing = DirectStatement.of("none", "SELECT 1 WHERE $1::int < 0")
    assert store.session.run_direct(nothing, ()) is None


def test_a_failing_direct_statement_raises_psycopgs_error_and_the_session_keeps_its_locks(
    store: PgLockStore,
) -> None:
    assert store.try_lock("a.py", "alice")
    generation = store.session.generation
    failing = DirectStatement.of("failing", "SELECT 1 / ($1::int - $1::int) WHERE $2::int > 0")
    with pytest.raises(psycopg.errors.DivisionByZero, match="division by zero"):
        store.session.run_direct(failing, (3,))
    assert store.session.generation == generation
    assert store.holder("a.py") == "alice"
    assert store.stale_grant("a.py", "alice") is None


def test_text_utf8_cannot_encode_is_refused_before_anything_is_sent(store: PgLockStore) -> None:
    echo = DirectStatement.of("echo", "SELECT $1::text WHERE $2::int > 0")
    with pytest.raises(UnicodeEncodeError):
        store.session.run_direct(echo, ("bad\udcff",))
    assert store.session.run_direct(echo, ("good",)) == [b"good"], "nothing half-sent"


def test_a_direct_statement_on_a_dropped_connection_runs_on_a_new_session(
    store: PgLockStore, pg_server: PgServer
) -> None:
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> "
            "pg_backend_pid() AND application_name = 'lockyard store'"
        )
    assert store.try_lock("a.py", "alice"), "prepared again on the new connection"
    assert store.session.generation == 2
    assert store.holder("a.py") == "alice"
    assert store.release("a.py", "alice")


def test_a_wait_interrupted_by_a_signal_handler_finishes_the_exchange_first(
    store: PgLockStore,
) -> None:
    """A handler that raises (Ctrl-C, an alarm) while the reply is awaited: the reply is read
    to its end, so the connection, and the session's locks with it, stay usable."""
    assert store.try_lock("a.py", "alice")
    slow = DirectStatement.of("slow", "SELECT pg_sleep(0.3), $1::int")

    class AlarmError(Exception):
        pass

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise AlarmError

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(AlarmError):
            store.session.run_direct(slow, ())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert store.session.generation == 1
    assert store.holder("a.py") == "alice"
    assert store.release("a.py", "alice")
    assert store.try_lock("a.py", "bob")
