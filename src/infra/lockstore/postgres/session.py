"""One lockyard database session: the connection whose life is the life of its locks.

The session takes a session advisory lock on (its schema's class, its session number) when
it opens and keeps it until it ends; that lock is what proves its rows alive (schema.py).
A broken connection is never silently replaced under a caller: the operation that met it is
retried once on a new session (a different owner, so grants of the old one are lost and the
store reports them), and `generation` counts sessions so the store can tell.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import select
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import BackendError
from .dsn import KeepaliveBound, PgSpec
from .journal_schema import journal_settings
from .privileges import PrivilegeError, privilege_error
from .schema import SchemaError, check_schema, ensure_schema

log = logging.getLogger(__name__)

# A transaction rolled back to break a deadlock between clients is run again this many times.
_MAX_ROLLBACK_RETRIES = 20

T = TypeVar("T")

CONNECT_RETRY_PAUSES = (0.1, 0.4)
"""A connection that drops while it is being set up (a link just back, a server still
starting) is tried again after these pauses; a refused login or an absent server is not."""
_ensured: set[tuple[str, str]] = set()
_ensured_guard = threading.Lock()


class BackendUnavailableError(BackendError):
    """The PostgreSQL server cannot be reached or refused us; the text names it (no password)."""


def conninfo(spec: PgSpec, bound: KeepaliveBound, *, purpose: str) -> str:
    """libpq's connection string for a lockyard connection: the keepalive bound, a name."""
    return make_conninfo(
        spec.conninfo,
        application_name=f"lockyard {purpose}",
        **connect_timeout(spec, bound),
        **bound.client_params(),
    )


def connect(
    spec: PgSpec, bound: KeepaliveBound, *, purpose: str, read_only: bool = False
) -> psycopg.Connection[Any]:
    """A new autocommit connection with lockyard's keepalive bound on both ends.

    It makes sure lockyard's schema is there (created or upgraded on first use), unless
    `read_only`: then the schema is only checked (`check_schema`: SchemaMissingError when
    absent) and every transaction of the connection is read-only, so a role with read
    rights alone can inspect. A privilege the server finds missing is a PrivilegeError that
    names every privilege the role lacks."""
    info = conninfo(spec, bound, purpose=purpose)
    for pause in (*CONNECT_RETRY_PAUSES, None):
        try:
            conn = psycopg.connect(info, autocommit=True)
            break
        except psycopg.Error as exc:
            if pause is None or not _transient(exc):
                raise BackendUnavailableError(_explain(spec, exc)) from None
            time.sleep(pause)
    try:
        values = session_settings(bound, conn.info.server_version)
        if read_only:
            values["default_transaction_read_only"] = "on"
        settings = ", ".join(
            f"set_config('{name}', '{value}', false)" for name, value in values.items()
        )
        conn.execute(f"SELECT {settings}")
        key = (spec.conninfo, spec.schema)
        if read_only:
            check_schema(conn, spec.schema)
        elif key not in _ensured:
            ensure_schema(conn, spec.schema)
            with _ensured_guard:
                _ensured.add(key)
    except SchemaError:
        conn.close()
        raise
    except psycopg.errors.InsufficientPrivilege as exc:
        error = privilege_error(conn, spec.display, spec.schema, write=not read_only, refusal=exc)
        conn.close()
        raise error from None
    except psycopg.Error as exc:
        conn.close()
        raise BackendUnavailableError(_explain(spec, exc)) from None
    return conn


def session_settings(bound: KeepaliveBound, server_version: int) -> dict[str, str]:
    """What every lockyard connection sets on its server session: the keepalive bound, the
    journal's settings (journal_schema.py), and generic plans for prepared statements
    (PostgreSQL 12 and later). Every statement lockyard prepares looks rows up by key, where
    a plan made for the actual values can be no better than the generic one; without the
    setting the server may still plan each execution anew (about 10 µs of a take and 4 µs of
    a release, a twentieth of an uncontended cycle)."""
    settings = bound.server_settings()
    settings.update(journal_settings())
    if server_version >= 120000:
        settings["plan_cache_mode"] = "force_generic_plan"
    return settings


def connect_timeout(spec: PgSpec, bound: KeepaliveBound) -> dict[str, str]:
    """libpq's `connect_timeout` unless the spec or PGCONNECT_TIMEOUT sets one: the liveness
    bound, so a server is given as long to answer a new connection as any silent peer is. A
    server that is down refuses at once; one that is up but starved of CPU (a loaded host, a
    server just started) may take seconds to fork and authenticate a session, and is not down.
    """
    if (
        "connect_timeout" in conninfo_to_dict(spec.conninfo)
        or os.environ.get("PGCONNECT_TIMEOUT", "").strip()
    ):
        return {}
    return {"connect_timeout": str(bound.seconds)}


def _transient(exc: psycopg.Error) -> bool:
    text = str(exc)
    return "closed the connection unexpectedly" in text or "the database system is" in text


def _explain(spec: PgSpec, exc: psycopg.Error) -> str:
    detail = " ".join(str(exc).split()) or type(exc).__name__
    hint = ""
    if "password" in detail or "authentication" in detail:
        hint = " (check the user and password: PGPASSWORD, ~/.pgpass or the URI)"
    return f"PostgreSQL at {spec.display} is unavailable: {detail}{hint}"


def forget_ensured_schemas() -> None:
    """Check the schema again on the next connection (after a test dropped it, say)."""
    with _ensured_guard:
        _ensured.clear()


@dataclass(frozen=True, slots=True)
class DirectStatement:
    """A hot statement run through libpq itself (`Session.run_direct`).

    `sql` numbers its parameters `$1`..`$n`; `$n` is the session number. Parameters go as
    text and the server infers their types from the statement.
    """

    name: bytes
    sql: bytes

    @classmethod
    def of(cls, name: str, sql: str) -> DirectStatement:
        return cls(f"lockyard_{name}".encode(), sql.encode())


Param = str | int | float | None


class Session:
    """The store's command connection, used by one thread at a time."""

    def __init__(self, spec: PgSpec, bound: KeepaliveBound, *, read_only: bool = False) -> None:
        self.spec = spec
        self.bound = bound
        self.read_only = read_only
        """Only reads: no schema created, no session number drawn (`number` stays 0, which
        no session has), every transaction read-only (`connect`)."""
        self.generation = 0
        self.number = 0
        self._conn: psycopg.Connection[Any] | None = None
        self._cursor: psycopg.Cursor[Any] | None = None
        # The connection the direct statements were prepared on, which ones, and a poller on
        # its socket (made once: a new one per call is a measurable part of a round trip).
        self._direct_conn: psycopg.Connection[Any] | None = None
        self._direct_ready: set[bytes] = set()
        self._direct_poll = select.poll()
        self._guard = threading.RLock()
        self.closed = False

    def _open(self) -> psycopg.Connection[Any]:
        if self.closed:
            raise BackendUnavailableError(f"the lock store on {self.spec.display} was closed")
        conn = connect(self.spec, self.bound, purpose="store", read_only=self.read_only)
        if self.read_only:
            self.generation += 1
            self._conn = conn
            return conn
        try:
            row = self._open_session(conn)
        except psycopg.errors.InsufficientPrivilege as exc:
            error = self._privilege_error(conn, exc)
            conn.close()
            raise error from None
        except psycopg.Error as exc:
            conn.close()
            raise BackendUnavailableError(_explain(self.spec, exc)) from None
        assert row is not None
        self.number = int(row[0])
        self.generation += 1
        self._conn = conn
        return conn

    def _open_session(self, conn: psycopg.Connection[Any]) -> Any:
        # The number is also the session's `lockyard.session` setting, which the journal's
        # triggers read (a lock freed by a session not its holder's is a reclaim).
        sql = (
            f"SELECT n, set_config('lockyard.session', n::text, false) FROM \"{self.spec.schema}\""
            ".open_session() AS n"
        )
        try:
            return conn.execute(sql).fetchone()
        except (psycopg.errors.InvalidSchemaName, psycopg.errors.UndefinedFunction):
            # The schema went away since this process checked it (dropped, or lost with a
            # server that crashed before its creation was durable): create it again.
            forget_ensured_schemas()
            ensure_schema(conn, self.spec.schema)
            return conn.execute(sql).fetchone()

    def run(self, operation: Callable[[psycopg.Connection[Any], int], T]) -> T:
        """`operation(connection, session number)`, retried once on a fresh session when the
        connection turns out to be broken, and again when the server rolled it back to break
        a deadlock or a serialization conflict between two clients' transactions."""
        with self._guard:
            rollbacks = 0
            for attempt in (1, 2):
                conn = self._conn if self._conn is not None else self._open()
                try:
                    return self._retrying_rollbacks(operation, conn, rollbacks)
                except psycopg.errors.InsufficientPrivilege as exc:
                    raise self._privilege_error(conn, exc) from None
                except psycopg.OperationalError as exc:
                    if not _connection_lost(conn):
                        raise BackendUnavailableError(_explain(self.spec, exc)) from None
                    self._drop()
                    if attempt == 2:
                        raise BackendUnavailableError(_explain(self.spec, exc)) from None
                    log.warning("lost the connection to %s; reconnecting", self.spec.display)
            raise AssertionError("unreachable")  # pragma: no cover

    def run_prepared(self, sql: str, params: tuple[Any, ...]) -> Any:
        """The first row (or None) of one prepared statement whose last parameter is the
        session number. For the hot paths: they share one cursor per connection, because
        making a cursor per statement costs about a fifth of a local round trip."""

        def operation(conn: psycopg.Connection[Any], me: int) -> Any:
            cursor = self._cursor
            if cursor is None or cursor.connection is not conn:
                cursor = self._cursor = conn.cursor()
            return cursor.execute(sql, (*params, me), prepare=True).fetchone()

        return self.run(operation)

    def run_direct(
        self,
        statement: DirectStatement,
        params: Sequence[Param],
        *,
        after: DirectStatement | None = None,
        after_params: Sequence[Param] = (),
    ) -> list[bytes | None] | None:
        """The first row (as text, None for NULL) or None of `statement`, with the session
        number appended to `params`; retried like `run`.

        For the two hot paths (take a free lock, release): psycopg's cursor layers cost about
        as much client CPU per statement as the server spends on it, and client and server
        share the cores of one host. libpq does the same exchange (one Bind/Execute/Sync
        message, one reply) in a fraction of that.

        `after`: a statement sent first with `after_params` (no session number), in one
        pipeline with `statement` (one round trip, one implicit transaction): a
        transaction-scoped lock it takes is held through `statement`, whose snapshot is taken
        once it has it.
        """
        # Text that UTF-8 cannot encode raises UnicodeEncodeError here, as it does in psycopg.
        values = [_text(value) for value in params]
        first = [] if after is None else [(after, [_text(value) for value in after_params])]

        def operation(conn: psycopg.Connection[Any], me: int) -> list[bytes | None] | None:
            return self._direct(conn, [*first, (statement, [*values, str(me).encode()])])

        return self.run(operation)

    def _direct(
        self,
        conn: psycopg.Connection[Any],
        statements: list[tuple[DirectStatement, list[bytes | None]]],
    ) -> list[bytes | None] | None:
        pgconn = conn.pgconn
        if self._direct_conn is not conn:
            self._direct_conn = conn
            self._direct_ready = set()
            self._direct_poll = select.poll()
            self._direct_poll.register(pgconn.socket, select.POLLIN)
        for statement, _values in statements:
            if statement.name not in self._direct_ready:
                _check(pgconn.prepare(statement.name, statement.sql), pgconn)
                self._direct_ready.add(statement.name)
        if len(statements) > 1:
            return self._pipelined(pgconn, statements)
        statement, values = statements[0]
        pgconn.send_query_prepared(statement.name, values)
        try:
            while pgconn.flush():
                select.select([], [pgconn.socket], [])  # pragma: no cover - a tiny message
            pgconn.consume_input()
            while pgconn.is_busy():
                self._direct_poll.poll()
                pgconn.consume_input()
        except psycopg.Error:
            raise
        except BaseException:
            # Interrupted (a signal handler raised): finish the exchange first, so that the
            # connection, and with it the session's locks, stays usable.
            _finish(pgconn)
            raise
        result = pgconn.get_result()
        while pgconn.get_result() is not None:  # the end of the exchange
            pass
        assert result is not None
        _check(result, pgconn)
        return _first_row(result)

    def _pipelined(
        self,
        pgconn: pq.abc.PGconn,
        statements: list[tuple[DirectStatement, list[bytes | None]]],
    ) -> list[bytes | None] | None:
        """`statements` in one pipeline ending in one Sync: the last one's first row."""
        results: list[pq.abc.PGresult] = []
        pgconn.enter_pipeline_mode()
        try:
            for statement, values in statements:
                pgconn.send_query_prepared(statement.name, values)
            pgconn.pipeline_sync()
            while pgconn.flush():
                select.select([], [pgconn.socket], [])  # pragma: no cover - a tiny message
            while True:
                pgconn.consume_input()
                while pgconn.is_busy():
                    self._direct_poll.poll()
                    pgconn.consume_input()
                result = pgconn.get_result()
                if result is None:
                    continue  # between two statements' results
                if result.status == pq.ExecStatus.PIPELINE_SYNC:
                    break
                results.append(result)
        except psycopg.Error:
            raise
        except BaseException:
            _finish_pipeline(pgconn)
            raise
        finally:
            if pgconn.pipeline_status != pq.PipelineStatus.OFF and not pgconn.is_busy():
                with contextlib.suppress(psycopg.Error):
                    pgconn.exit_pipeline_mode()
        for result in results:  # the first failure says why (the others were skipped)
            if result.status != pq.ExecStatus.PIPELINE_ABORTED:
                _check(result, pgconn)
        return _first_row(results[-1])

    def _retrying_rollbacks(
        self,
        operation: Callable[[psycopg.Connection[Any], int], T],
        conn: psycopg.Connection[Any],
        rollbacks: int,
    ) -> T:
        # Every operation is one autocommit statement or one explicit transaction, so a
        # transaction the server rolled back left nothing behind and may simply run again.
        while True:
            try:
                return operation(conn, self.number)
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure) as exc:
                # Worth an operator's notice: the server breaks a deadlock only after
                # `deadlock_timeout` (1 s by default), which every waiter in it has waited.
                log.info("the server rolled back a lock operation (%s); running it again", exc)
                rollbacks += 1
                if rollbacks >= _MAX_ROLLBACK_RETRIES:
                    raise
                time.sleep(random.uniform(0, 0.002 * rollbacks))  # de-synchronise the pair

    def _privilege_error(
        self, conn: psycopg.Connection[Any], refusal: psycopg.Error
    ) -> PrivilegeError:
        return privilege_error(
            conn, self.spec.display, self.spec.schema, write=not self.read_only, refusal=refusal
        )

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self._cursor = None
        self._direct_conn = None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # pragma: no cover - closing a broken connection
                log.debug("closing a broken connection failed", exc_info=True)

    def close(self) -> None:
        with self._guard:
            self.closed = True
            self._drop()


def _check(result: pq.abc.PGresult, pgconn: pq.abc.PGconn) -> None:
    """Raise what psycopg would for a failed result (the same classes: `run` retries a
    serialization failure and reconnects after a lost connection)."""
    if result.status in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
        return
    message = (result.error_message or pgconn.error_message).decode(errors="replace").strip()
    state = result.error_field(pq.DiagnosticField.SQLSTATE)
    if state is None:
        raise psycopg.OperationalError(message or "the connection to the server was lost")
    try:
        error_class = psycopg.errors.lookup(state.decode())
    except KeyError:
        error_class = psycopg.DatabaseError
    raise error_class(message)


def _text(value: Param) -> bytes | None:
    return None if value is None else str(value).encode()


def _first_row(result: pq.abc.PGresult) -> list[bytes | None] | None:
    if result.ntuples == 0:
        return None
    return [result.get_value(0, column) for column in range(result.nfields)]


def _finish_pipeline(pgconn: pq.abc.PGconn) -> None:
    """Read a pipeline's replies up to its Sync, blocking (see `_finish`)."""
    try:
        while True:
            while pgconn.is_busy():
                select.select([pgconn.socket], [], [])
                pgconn.consume_input()
            result = pgconn.get_result()
            if result is not None and result.status == pq.ExecStatus.PIPELINE_SYNC:
                return
    except psycopg.Error:
        pass  # the connection is gone: the next use finds that out


def _finish(pgconn: pq.abc.PGconn) -> None:
    """Read the rest of a reply, blocking (small: the server answers within its statement)."""
    try:
        while pgconn.is_busy():
            select.select([pgconn.socket], [], [])
            pgconn.consume_input()
        while pgconn.get_result() is not None:
            pass
    except psycopg.Error:
        pass  # the connection is gone: the next use finds that out


def _connection_lost(conn: psycopg.Connection[Any]) -> bool:
    """Whether an OperationalError left `conn` unusable (the libpq status does not always
    say so yet after a link went away: a ping settles it)."""
    if conn.closed or conn.broken or conn.pgconn.status != psycopg.pq.ConnStatus.OK:
        return True
    try:
        conn.execute("SELECT 1")
    except psycopg.Error:
        return True
    return False
