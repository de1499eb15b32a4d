"""`PgLockStore`: the lock store on PostgreSQL, for agents on many hosts.

Same contract as the file-system `LockStore` (the `LockBackend` protocol): locks keyed by
(namespace, key) with the same canonical keys, granted in arrival order, released by their
holder only, cancel-safe waits. What PostgreSQL adds:

- a lock belongs to the store's database session; when the session ends (process killed,
  host cut off past the keepalive bound, server restarted) its locks are free for the next
  taker, with nobody's help;
- every grant carries a fencing number from one logged sequence, so it only grows per lock;
- a wait that finds the lock taken queues in the same round trip (`take_or_enqueue`, which
  keeps the holder's row locked until the queue entry is in, so no release slips between);
- a release hands the lock to the first live waiter inside the same transaction and tells it
  by NOTIFY (`g<token>:<fence>`): the waiter, reading its LISTEN socket itself while it
  waits, returns without another query;
- a waiter also re-checks every `liveness_interval` seconds, which is how it notices a holder
  whose session died (nobody is left to notify) and a server it lost.

One connection per store carries every operation (one round trip each: schema.py's
functions, prepared on first use), guarded by a lock so threads and tasks can share the
store.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import psycopg

from ..checkout import Checkout, open_checkout
from ..errors import BackendError
from ..holds_graph import snapshot_of
from ..journal.causes import abandoned_wait_outcome, operator_cause
from ..journal.files import journal_enabled
from ..journal.record import TIMED_OUT, JournalRecord
from ..liveness import current_process, new_token
from ..modes import EXCLUSIVE, SHARED, LockMode, validate_mode
from ..off_loop import store_call
from ..paths import validate_agent_id, validate_poll_interval, validate_timeout
from ..records import HolderRecord, LockInfo, LostLock, Reclamation, StoreSnapshot, WaiterRecord
from ..scope_keys import (
    directory_ancestors,
    glob_prefix,
    is_above,
    is_glob_key,
    is_scoped,
    places_above,
)
from ..wakeup import Waker
from .dsn import KeepaliveBound, PgSpec, parse_spec
from .glob_pattern import pg_glob_pattern
from .journal import insert_params, insert_statement
from .journal_schema import grant_record, release_record
from .listener import Listener, process_listener
from .privileges import PrivilegeError
from .schema import graph_channel, journal_channel, namespace_channel, scope_class
from .session import BackendUnavailableError, DirectStatement, Session

log = logging.getLogger(__name__)
_RECORD_REFUSED: Final = (psycopg.Error, PrivilegeError)
"""What the take of a free lock raises when its journal record is refused (a lost connection is a
BackendUnavailableError: `Session.run` has reconnected or given up by then)."""

STAMP_EVERY_SECONDS: Final = 1.0
"""A heartbeat is written at most this often per agent and process (one upsert)."""

DEFAULT_LIVENESS_INTERVAL: Final = 0.5
_SPARE_WAKERS: Final = 8
_ABOVE_REMEMBERED: Final = 4096

_HOLD_COLUMNS: Final = (
    "namespace, key, agent_id, token, fence, pid, start_time, host, boot_id, pid_ns, "
    "acquired_at, checkout"
)
_WAIT_COLUMNS: Final = (
    "namespace, key, agent_id, token, ticket, pid, start_time, host, boot_id, pid_ns, since, "
    "checkout"
)


class Grant(NamedTuple):
    """A lock this process was granted: enough to tell later whether it is still ours.
    (A tuple: made on every grant, where a frozen dataclass costs a few microseconds.)"""

    token: str
    fence: int
    generation: int


class PgLockStore:
    """Locks on files of one repository, kept in a PostgreSQL database shared by hosts."""

    waits_on_server = True
    """Every call is a round trip: callers on an event loop make it in a worker thread, in
    the store's lane (`off_loop.store_call`), and `acquire_async` makes its own there."""

    def __init__(
        self,
        repo_namespace: str | os.PathLike[str] | None = None,
        backend: str | PgSpec = "postgresql",
        *,
        namespace: str | None = None,
        allow_outside_repo: bool = False,
        liveness_interval: float = DEFAULT_LIVENESS_INTERVAL,
        keepalive: KeepaliveBound | None = None,
        read_only: bool = False,
    ) -> None:
        """`read_only`: for inspecting (`lockyard status`): the schema is not created nor
        upgraded, no session is opened, and SELECT on the tables is all the role needs."""
        # (namespace, repository-relative key) pairs only: see lockstore/checkout.py.
        self.checkout: Checkout = open_checkout(repo_namespace, namespace)
        self.namespace: str = self.checkout.namespace
        self.root: str = self.checkout.root
        self.spec = backend if isinstance(backend, PgSpec) else parse_spec(backend)
        self.allow_outside_repo = allow_outside_repo
        self.liveness_interval = liveness_interval
        self.bound = keepalive if keepalive is not None else KeepaliveBound.from_env()
        self.schema = self.spec.schema
        self._s = f'"{self.schema}"'
        self.session = Session(self.spec, self.bound, read_only=read_only)
        self._read_only = read_only
        self._stamped: dict[str, float] = {}  # agent -> monotonic time of its last stamp here
        self._grants: dict[tuple[str, str], Grant] = {}  # (key, agent) -> grant
        self._grants_guard = threading.Lock()  # threads share a store
        # Wakers of ended waits, for the next: closing one (its eventfd) is a system call on
        # the path from a pushed grant to the waiter's return.
        self._spare_wakers: list[Waker] = []
        self._above: dict[str, str] = {}  # key -> its directories, as an array's text
        self._channel = namespace_channel(self.schema, self.namespace)
        args = "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s"
        self._sql_take = f"SELECT * FROM {self._s}.take({args})"
        self._sql_take_or_enqueue = f"SELECT * FROM {self._s}.take_or_enqueue({args})"
        # The two hot paths are plain statements, not function calls (half the server time),
        # run through libpq directly (session.py): taking a free lock is one insert or one
        # update of its row, a release one update that clears the holder; a release with
        # waiters (the row is marked `queued`) hands the lock on from its RETURNING clause,
        # in the same transaction. A free lock has no live waiters: every path that frees a
        # lock someone queues for hands it over in the same transaction (schema.py), so the
        # take needs no look at the queue; a lock held by a dead session is not free, and
        # `take` (the function) sorts that out, as it does a lock that readers hold (its
        # row counts them: `readers = 0` is the only cost of shared mode here). The fencing
        # number of a lock that has a row is drawn in the update, under the row's lock, so
        # it is above every earlier grant's (schema.py's holds); the row's first grant draws
        # it in the insert. With the journal on, the take writes its grant's record itself
        # (journal_schema.py); the release's is the triggers'.
        #
        # A file under a directory also needs no directory lock over it held (by anyone: the
        # function sorts out who may pass), looked at in a statement after the one that takes
        # the namespace's scope lock (schema.py's scope_guard), in one pipeline: a directory
        # lock's decision cannot run between that look and the insert. A file at the root,
        # which no directory lock covers, sends the take alone.
        recorded = journal_enabled()
        self._record_refusal_told = False
        self._scope_guard_statement = DirectStatement.of(
            "scope_guard",
            f"SELECT pg_advisory_xact_lock_shared({scope_class(self.schema)}, hashtext($1))",
        )
        self._take_free_statement = DirectStatement.of(
            "take_free", self._take_free_sql(recorded=recorded)
        )
        self._release_statement = DirectStatement.of(
            "release", self._release_sql(recorded=recorded)
        )

    def _take_free_sql(self, *, recorded: bool) -> str:
        """The take of a free lock: one insert of its row, or one update of its free row,
        when no directory over it is held (`$11`, its directories; `$12` the session).

        It flips the row's `recorded`, so that the journal's triggers skip the change
        (journal_schema.py); `recorded`: the statement writes the grant's record itself (with
        the journal off, the triggers would write none either)."""
        s = self._s
        take = (
            f"INSERT INTO {s}.holds AS l (namespace, key, agent_id, token, pid, "
            "start_time, host, boot_id, pid_ns, checkout, session, fence, acquired_at, "
            "recorded) SELECT $1, $2, $3, $4, $5::integer, $6::bigint, $7, $8, $9, $10, "
            # One number per grant: drawn here only for a row not there yet (the values
            # are computed before the insert meets its conflict), else by the update.
            f"$12::integer, CASE WHEN EXISTS (SELECT FROM {s}.holds WHERE namespace = $1 "
            f"AND key = $2) THEN 0 ELSE nextval('{s}.fence_seq') END, "
            "date_part('epoch', clock_timestamp()), true "  # a float already: no numeric detour
            # One primary key probe per directory (a LATERAL ... LIMIT is never flattened
            # into a join over the namespace's rows, whatever the statistics say).
            "WHERE NOT EXISTS (SELECT 1 FROM unnest($11::text[]) AS a(k), LATERAL ("
            f"SELECT 1 FROM {s}.holds d WHERE d.namespace = $1 AND d.key = a.k "
            "AND (d.agent_id IS NOT NULL OR d.readers > 0) LIMIT 1) AS held) "
            f"AND NOT {_held_glob_over(s, '$1', '$2', '$11')} "
            "ON CONFLICT (namespace, key) DO UPDATE SET agent_id = EXCLUDED.agent_id, "
            "token = EXCLUDED.token, pid = EXCLUDED.pid, start_time = EXCLUDED.start_time, "
            "host = EXCLUDED.host, boot_id = EXCLUDED.boot_id, pid_ns = EXCLUDED.pid_ns, "
            "checkout = EXCLUDED.checkout, session = EXCLUDED.session, "
            f"fence = greatest(nextval('{s}.fence_seq'), l.fence + 1), "
            "acquired_at = EXCLUDED.acquired_at, queued = false, recorded = NOT l.recorded "
            "WHERE l.agent_id IS NULL AND l.readers = 0 RETURNING fence"
        )
        if not recorded:
            return take
        noted = grant_record(s, journal_channel(self.schema), "taken")
        return (
            f"WITH taken AS ({take}, agent_id, session, pid, host, acquired_at), "
            f"noted AS ({noted}) SELECT fence FROM taken"
        )

    def _release_sql(self, *, recorded: bool) -> str:
        """The release: one update of the lock's row, which also hands the lock on.

        With nobody queued, it clears the holder's columns. With a live first waiter, the
        same update writes that waiter in as the holder, with a number drawn under the row's
        lock, deletes its queue entry and pushes it the grant; the holder's row is locked
        (the `FOR UPDATE` in the head's condition) before the entry goes, so an entry is never
        taken for a lock the release turns out not to hold. A lock under a directory lock that
        is held (its directories are `$4`), and a directory lock, are handed on by `hand_off`,
        which knows what may pass a directory lock. The new holder's row says
        `queued`, so that its release looks at the queue (someone may have queued while this
        statement ran, unseen by its snapshot). Anything else that was queued for (a first
        waiter whose session ended, or one that queued while the release waited for the row)
        goes to the `release` function instead (the update passes that row by), as does a
        first waiter that asks to read, or a lock that readers hold too (an exclusive holder
        giving up its wait for them): it frees the lock, then hands it on.

        The journal's records come in the order of the changes: the update's (the release,
        then the hand-over) before the queue entry's end (its delete runs after the update:
        a data-modifying CTE that the statement does not read runs once the rest is done),
        and a `release` function's release before its hand-off's. A release with nobody to
        hand on to, by the session that holds the lock (the common case), writes its own
        record (`recorded`, as the take does: no trigger call) and flips the row's
        `recorded`, which the triggers skip; its holder's columns are read in `before`, the
        update clears them. A hand-over's records stay the triggers'.

        The namespace's channel is written into the statement (a store serves one namespace):
        the server does not hash it again at every hand-off. A hand-off always tells the
        monitor: the lock's other waiters, if any, now wait on the new holder. Asking the
        queue whether there are any would cost the hand-off more than the notice does."""
        s = self._s
        noted = ""
        if recorded:
            noted = f", noted AS ({release_record(s, journal_channel(self.schema), 'moved')})"
        return f"""WITH head AS (
    SELECT ticket, agent_id, session, token, pid, start_time, host, boot_id, pid_ns, checkout
    FROM {s}.waiters WHERE ticket = (
        SELECT ticket FROM {s}.waiters WHERE namespace = $1 AND key = $2
        ORDER BY ticket LIMIT 1)
    AND NOT shared AND want IS NULL AND {s}.alive(session, $5) AND NOT {s}.scoped($2)
    AND EXISTS (SELECT 1 FROM {s}.holds WHERE namespace = $1 AND key = $2
                AND agent_id = $3 AND queued AND readers = 0 FOR UPDATE)
    AND NOT EXISTS (SELECT 1 FROM unnest($4::text[]) AS a(k), LATERAL (
        SELECT 1 FROM {s}.holds d WHERE d.namespace = $1 AND d.key = a.k
        AND (d.agent_id IS NOT NULL OR d.readers > 0) LIMIT 1) AS held)
    AND NOT {_held_glob_over(s, "$1", "$2", "$4")}
    FOR UPDATE
), before AS (
    SELECT session, pid, host, acquired_at FROM {s}.holds
    WHERE namespace = $1 AND key = $2 AND agent_id = $3
), moved AS (
    UPDATE {s}.holds h SET agent_id = head.agent_id, session = head.session,
        token = head.token, pid = head.pid, start_time = head.start_time, host = head.host,
        boot_id = head.boot_id, pid_ns = head.pid_ns, checkout = head.checkout,
        acquired_at = CASE WHEN head.ticket IS NOT NULL
            THEN date_part('epoch', clock_timestamp()) END,
        fence = CASE WHEN head.ticket IS NULL THEN h.fence
            ELSE greatest(nextval('{s}.fence_seq'), h.fence + 1) END,
        queued = head.ticket IS NOT NULL OR h.queued, pending = NULL,
        recorded = h.recorded <> ((head.ticket IS NULL AND before.session = $5) IS TRUE)
    FROM (SELECT) AS one LEFT JOIN head ON true LEFT JOIN before ON true
    WHERE h.namespace = $1 AND h.key = $2 AND h.agent_id = $3
        AND (head.ticket IS NOT NULL OR NOT (h.queued OR h.readers > 0))
    RETURNING head.ticket, CASE WHEN head.ticket IS NOT NULL THEN
        pg_notify('{self._channel}', 'g' || head.token || ':' || h.fence)::text
        || pg_notify('{graph_channel(self.schema)}', '')::text END AS told,
        (head.ticket IS NULL AND before.session = $5) IS TRUE AS mine, before.session,
        before.pid, before.host, before.acquired_at
), served AS (
    DELETE FROM {s}.waiters WHERE ticket = (SELECT ticket FROM moved)
){noted}
SELECT true FROM moved
UNION ALL
SELECT {s}.release($1, $2, $3, $5) WHERE NOT EXISTS (SELECT FROM moved)
    AND EXISTS (SELECT FROM {s}.holds WHERE namespace = $1 AND key = $2 AND agent_id = $3)"""

    # -- the checkout ---------------------------------------------------------------------------

    @property
    def location(self) -> str:
        """Where the locks live, as users may see it (never with a password)."""
        return self.spec.display

    def __repr__(self) -> str:
        return f"PgLockStore(namespace={self.namespace!r}, backend={self.location!r})"

    def connect(self) -> PgLockStore:
        """Open the session now (instead of on first use): errors surface here."""
        self.session.run(lambda conn, me: None)
        return self

    def close(self) -> None:
        self.session.close()
        while self._spare_wakers:
            self._spare_wakers.pop().close()

    def _lend_waker(self) -> Waker:
        try:
            waker = self._spare_wakers.pop()  # atomic: threads share the list
        except IndexError:
            return Waker()
        waker.clear()  # a wake-up meant for its last wait
        return waker

    def _take_back_waker(self, waker: Waker) -> None:
        if len(self._spare_wakers) < _SPARE_WAKERS:
            self._spare_wakers.append(waker)
        else:
            waker.close()

    def __enter__(self) -> PgLockStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def session_number(self) -> int:
        return self.session.number

    def listener(self) -> Listener:
        return process_listener(self.spec, self.bound)

    def _call(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...]:
        # Prepared on first use: the same few calls all the time.
        row = self.session.run_prepared(sql, params)
        assert row is not None
        return tuple(row)

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.session.run(lambda conn, me: [tuple(r) for r in conn.execute(sql, params)])

    # -- keys -------------------------------------------------------------------------------

    def canonicalize(self, filepath: str) -> str:
        return self.checkout.key(filepath, allow_outside_repo=self.allow_outside_repo)

    # -- taking and giving back ---------------------------------------------------------------

    def try_lock(self, filepath: str, agent_id: str, *, mode: LockMode = EXCLUSIVE) -> bool:
        """Take the lock now if it is free and nobody alive queues for it (or you hold it).
        `mode="shared"`: hold it with other readers (schema.py's `readers`); an exclusive
        lock is then granted only once no other reader holds it."""
        shared = _is_shared(mode)
        agent = validate_agent_id(agent_id)
        return self._take(self.canonicalize(filepath), agent, shared)

    def _take(self, key: str, agent: str, shared: bool) -> bool:
        if not shared and not is_scoped(key) and self._take_free(key, agent):
            return True
        for _attempt in range(_INDEX_ATTEMPTS):
            self._index_glob(key)
            token = new_token()
            outcome, fence, _holder = self._call(
                self._sql_take, self._take_params(key, agent, token, shared)
            )
            if outcome != "unindexed":
                return self._note_take(key, agent, token, outcome, fence)
        raise _index_lost(key)

    def _take_free(self, key: str, agent: str) -> bool:
        """Take the lock if it is free and nobody queues for it (the common case). False
        also when its journal record could not be written: `take` then decides."""
        token = new_token()
        above = self._directories_above(key)
        try:
            row = self.session.run_direct(
                self._take_free_statement,
                (*self._take_params(key, agent, token)[:-1], above),
                after=self._scope_guard_statement,
                after_params=(self.namespace,),
            )
        except _RECORD_REFUSED as exc:
            self._warn_record_refused(exc)
            return False
        if row is None:
            return False
        self._remember(key, agent, token, int(row[0] or 0))
        return True

    def _index_glob(self, key: str) -> None:
        """A glob's entry in the glob index (schema.py's glob block), written and committed
        before a take of it, so that every decision that may meet its hold sees it. Entries
        go with the glob's last hold, read or wait: a take that finds its entry gone says
        'unindexed', and is asked again once the entry is written again."""
        if not is_glob_key(key):
            return
        self.session.run(
            lambda conn, me: conn.execute(
                f"INSERT INTO {self._s}.globs (namespace, prefix, key, pattern) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (self.namespace, glob_prefix(key), key, pg_glob_pattern(key)),
            )
        )

    def _directories_above(self, key: str) -> str:
        """The directory keys over `key`, as a PostgreSQL array's text (remembered per key:
        the hot paths pass it on every call)."""
        text = self._above.get(key)
        if text is None:
            text = _array_text(directory_ancestors(key))
            if len(self._above) >= _ABOVE_REMEMBERED:
                self._above.clear()
            self._above[key] = text
        return text

    def _take_params(
        self, key: str, agent: str, token: str, shared: bool = False
    ) -> tuple[Any, ...]:
        me = current_process()
        return (
            self.namespace, key, agent, token, me.pid, me.start_time, me.host, me.boot_id,
            me.pid_ns, self.root, shared,
        )  # fmt: skip

    def _note_take(self, key: str, agent: str, token: str, outcome: str, fence: int) -> bool:
        """Remember a grant `take` or `take_or_enqueue` reported; True when it was one."""
        if outcome == "granted":
            self._remember(key, agent, token, fence)
            return True
        if outcome == "held":
            known = self._grants.get((key, agent))
            if known is None or known.fence != fence:
                self._remember(key, agent, "", fence)
            return True
        return False

    def _remember(self, key: str, agent: str, token: str, fence: int) -> None:
        with self._grants_guard:
            self._grants[(key, agent)] = Grant(token, int(fence), self.session.generation)

    def _forget(self, key: str, agent: str) -> None:
        with self._grants_guard:
            self._grants.pop((key, agent), None)

    def _grants_of(self, agent: str) -> dict[str, Grant]:
        with self._grants_guard:
            return {key: grant for (key, who), grant in self._grants.items() if who == agent}

    def release(self, filepath: str, agent_id: str) -> bool:
        agent = validate_agent_id(agent_id)
        key = self.canonicalize(filepath)
        self._forget(key, agent)
        if is_glob_key(key):
            return self._release_glob(key, agent)

        operator = operator_cause()
        if operator is not None:
            rows = self._as_operator(
                operator, f"SELECT {self._s}.release(%s, %s, %s, %s)", (self.namespace, key, agent)
            )
            return bool(rows and rows[0][0])
        try:
            row = self.session.run_direct(
                self._release_statement,
                (self.namespace, key, agent, self._directories_above(key)),
            )
        except _RECORD_REFUSED as exc:  # its record, most likely: the function records it
            self._warn_record_refused(exc)
            (released,) = self._call(
                f"SELECT {self._s}.release(%s, %s, %s, %s)", (self.namespace, key, agent)
            )
            return bool(released)
        if row is not None:  # (its text)
            return row[0] == b"t"
        # Not the lock's holder: a reader giving its read back (a second round trip, only
        # for reads and for releases of what one does not hold).
        (released,) = self._call(
            f"SELECT {self._s}.release_read(%s, %s, %s, %s)", (self.namespace, key, agent)
        )
        return bool(released)

    def _release_glob(self, key: str, agent: str) -> bool:
        """A glob's release (or its reader's), which also lets the glob's index entry go
        when nothing else wants the glob (schema.py's release_glob)."""
        sql, params = f"SELECT {self._s}.release_glob(%s, %s, %s, %s)", (self.namespace, key, agent)
        operator = operator_cause()
        rows = self._as_operator(operator, sql, params) if operator is not None else None
        if rows is None:
            rows = [self._call(sql, params)]
        return bool(rows and rows[0][0])

    def _warn_record_refused(self, error: Exception) -> None:
        """The take of a free lock or the release failed, most likely on its journal record
        (a refused constraint, a revoked privilege): `take` or `release`, run in its place,
        records through the triggers, which never fail a change (journal_schema.py). Said
        once per store."""
        if not self._record_refusal_told:
            self._record_refusal_told = True
            log.warning(
                "journal on %s: a lock change ran its slower way, its fast statement failed "
                "(%s); the server's log says whether its records are written",
                self.location, error,
            )  # fmt: skip

    def _as_operator(self, operator: str, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """Run `sql` (its last parameter: the session number) in a transaction whose
        releases the journal records as an operator's (journal_schema.py)."""

        def run(conn: psycopg.Connection[Any], me: int) -> list[Any]:
            with conn.transaction():
                conn.execute(
                    "SELECT set_config('lockyard.cause', 'operator', true), "
                    "set_config('lockyard.operator', %s, true)",
                    (operator,),
                )
                return conn.execute(sql, (*params, me)).fetchall()

        return self.session.run(run)

    def cleanup_agent_locks(self, agent_id: str, *, all_namespaces: bool = False) -> list[str]:
        agent = validate_agent_id(agent_id)
        namespace = None if all_namespaces else self.namespace
        operator = operator_cause()
        if operator is not None:
            rows = self._as_operator(
                operator, f"SELECT * FROM {self._s}.cleanup(%s, %s, %s)", (agent, namespace)
            )
        else:
            rows = self.session.run(
                lambda conn, me: conn.execute(
                    f"SELECT * FROM {self._s}.cleanup(%s, %s, %s)", (agent, namespace, me)
                ).fetchall()
            )
        for key in self._grants_of(agent):
            self._forget(key, agent)
        released = sorted(str(row[0]) for row in rows)
        if any(is_glob_key(key) for key in released):
            self._prune_globs(namespace)
        return released

    def _prune_globs(self, namespace: str | None) -> None:
        """The glob index's entries that nothing holds, reads or waits for any more go (of
        `namespace`, or all): after a cleanup or a reclaim."""
        self.session.run(
            lambda conn, me: conn.execute(f"SELECT {self._s}.prune_globs(%s)", (namespace,))
        )

    # -- waiting ------------------------------------------------------------------------------

    async def acquire_async(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float = 30.0,
        poll_interval_ms: float = 100,
        *,
        mode: LockMode = EXCLUSIVE,
    ) -> bool:
        """Wait in arrival order until the lock is yours: True, or False on timeout.

        Cancel-safe: a cancelled wait leaves no queue entry, and a lock handed to it in the
        meantime is given back (to the next waiter). Its round trips run in a worker thread,
        shielded, so the event loop serves others meanwhile; a pushed grant needs none.
        """
        shared = _is_shared(mode)
        # In the store's lane: waits begun in one order reach the server's queue in that order.
        wait = await store_call(
            self, self._begin_wait, filepath, agent_id, timeout_seconds, poll_interval_ms, shared
        )
        if isinstance(wait, bool):
            return wait
        try:
            ask = False  # just queued: nothing to ask the server until a wake-up or a timeout
            while True:
                if wait.attempt(ask=False) or (
                    ask and await store_call(self, wait.attempt, ask=True)
                ):
                    return True
                remaining = wait.remaining()
                if remaining <= 0:
                    return await store_call(self, wait.finish)
                await wait.waker.wait_async(min(remaining, wait.interval))
                ask = True
        except BaseException:
            await store_call(self, wait.abandon)  # shielded: a cancellation cannot cut it short
            raise
        finally:
            wait.close()

    def acquire(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float = 30.0,
        poll_interval_ms: float = 100,
        *,
        mode: LockMode = EXCLUSIVE,
    ) -> bool:
        """The blocking twin of `acquire_async`."""
        shared = _is_shared(mode)
        wait = self._begin_wait(filepath, agent_id, timeout_seconds, poll_interval_ms, shared)
        if isinstance(wait, bool):
            return wait
        try:
            ask = False
            while True:
                if wait.attempt(ask=ask):
                    return True
                remaining = wait.remaining()
                if remaining <= 0:
                    return wait.finish()
                wait.listener.wait(wait.waker, min(remaining, wait.interval))
                ask = True
        except BaseException:
            wait.abandon()
            raise
        finally:
            wait.close()

    def _begin_wait(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float,
        poll_interval_ms: float,
        shared: bool,
    ) -> _Wait | bool:
        agent = validate_agent_id(agent_id)
        timeout = validate_timeout(timeout_seconds)
        validate_poll_interval(poll_interval_ms)  # push, always: kept for the contract
        key = self.canonicalize(filepath)
        if timeout == 0:
            return self._take(key, agent, shared)
        if not shared and not is_scoped(key) and self._take_free(key, agent):
            return True
        self._index_glob(key)
        listener = self.listener()
        pushing = listener.listen(self._channel)  # until the wait's close
        wait = _Wait(self, key, agent, shared, time.monotonic() + timeout, listener, pushing)
        try:
            granted = wait.enqueue()
        except BaseException:
            wait.close()
            raise
        if granted:  # released since the first try
            wait.close()
            return True
        return wait

    # -- reading --------------------------------------------------------------------------

    def holder_record(self, filepath: str) -> HolderRecord | None:
        key = self.canonicalize(filepath)
        rows = self.session.run(
            lambda conn, me: conn.execute(
                f"SELECT {_HOLD_COLUMNS} FROM {self._s}.holds WHERE namespace = %s "
                f"AND key = %s AND agent_id IS NOT NULL AND {self._s}.alive(session, %s)",
                (self.namespace, key, me),
            ).fetchall()
        )
        return _holder(rows[0]) if rows else None

    def holder(self, filepath: str) -> str | None:
        record = self.holder_record(filepath)
        return None if record is None else record.agent_id

    def is_locked(self, filepath: str) -> bool:
        return self.holder_record(filepath) is not None

    def waiters(self, filepath: str) -> list[WaiterRecord]:
        key = self.canonicalize(filepath)
        rows = self.session.run(
            lambda conn, me: conn.execute(
                f"SELECT {_WAIT_COLUMNS} FROM {self._s}.waiters WHERE namespace = %s "
                f"AND key = %s AND {self._s}.alive(session, %s) ORDER BY ticket",
                (self.namespace, key, me),
            ).fetchall()
        )
        return [_waiter(row) for row in rows]

    def list_locks(self) -> list[LockInfo]:
        """Every live lock of the database (all namespaces), with its live waiters; a free
        lock that live waiters queue for is listed too, reserved for the first."""
        holds, reads, waits = self._read_all()
        now = time.time()
        queues: dict[tuple[str, str], list[WaiterRecord]] = {}
        for waiter in waits:
            queues.setdefault((waiter.namespace, waiter.lock_path), []).append(waiter)
        readers: dict[tuple[str, str], list[HolderRecord]] = {}
        for read in reads:
            readers.setdefault((read.namespace, read.lock_path), []).append(read)
        infos = []
        for hold in holds:
            place = (hold.namespace, hold.lock_path)
            infos.append(
                LockInfo(
                    lock_path=hold.lock_path,
                    namespace=hold.namespace,
                    holder=hold,
                    age_seconds=max(0.0, now - hold.acquired_at),
                    liveness="alive",
                    liveness_reason=f"its database session is open (fence {hold.fence})",
                    waiters=tuple(queues.pop(place, ())),
                    shared_holders=tuple(readers.pop(place, ())),
                )
            )
        for (namespace, key), members in readers.items():
            first = min(members, key=lambda member: member.acquired_at)
            names = ", ".join(sorted(member.agent_id for member in members))
            infos.append(
                LockInfo(
                    lock_path=key,
                    namespace=namespace,
                    holder=None,
                    age_seconds=max(0.0, now - first.acquired_at),
                    liveness="alive",
                    liveness_reason=f"held shared by {names}",
                    waiters=tuple(queues.pop((namespace, key), ())),
                    shared_holders=tuple(members),
                )
            )
        for (namespace, key), queue in queues.items():
            infos.append(
                LockInfo(
                    lock_path=key,
                    namespace=namespace,
                    holder=None,
                    age_seconds=None,
                    liveness="alive",
                    liveness_reason=f"free, reserved for the first waiter {queue[0].agent_id}",
                    waiters=tuple(queue),
                )
            )
        return sorted(infos, key=lambda info: (info.namespace or "", info.lock_path))

    def snapshot(self) -> StoreSnapshot:
        """Holds, reads and live waits, for a wait-for graph (`holds_graph.py`)."""
        return snapshot_of(self.list_locks())

    def _read_all(self) -> tuple[list[HolderRecord], list[HolderRecord], list[WaiterRecord]]:
        """Live holds, reads and waits, liveness judged once per session (not per row)."""
        s = self._s

        def read(conn: psycopg.Connection[Any], me: int) -> tuple[list[Any], list[Any], list[Any]]:
            with conn.transaction():
                live = f"""WITH sessions AS (
                    SELECT session FROM {self._s}.holds WHERE agent_id IS NOT NULL
                    UNION SELECT session FROM {self._s}.readers
                    UNION SELECT session FROM {self._s}.waiters
                ), live AS (SELECT session FROM sessions WHERE {self._s}.alive(session, %s))"""
                # Draining (a directory or glob lock's grant not made yet): a holder whose
                # wait goes on (`pending`); a reader of one with a write below it still.
                holds = conn.execute(
                    f"{live} SELECT {_HOLD_COLUMNS}, pending IS NOT NULL AND {s}.scoped(key) "
                    f"FROM {s}.holds WHERE session IN (SELECT session FROM live)",
                    (me,),
                ).fetchall()
                reads = conn.execute(
                    f"{live} SELECT {_HOLD_COLUMNS}, CASE WHEN {s}.scoped(key) THEN "
                    f"{s}.below_blocker(namespace, key, agent_id, true, %s, false) IS NOT NULL "
                    "ELSE false END "
                    f"FROM {s}.readers WHERE session IN (SELECT session FROM live) "
                    "ORDER BY acquired_at",
                    (me, me),
                ).fetchall()
                waits = conn.execute(
                    f"{live} SELECT {_WAIT_COLUMNS} FROM {self._s}.waiters "
                    "WHERE session IN (SELECT session FROM live) ORDER BY ticket",
                    (me,),
                ).fetchall()
            return holds, reads, waits

        holds, reads, waits = self.session.run(read)
        return (
            [_holder(row[:-1], draining=row[-1]) for row in holds],
            [_holder(row[:-1], mode=SHARED, draining=row[-1]) for row in reads],
            [_waiter(row) for row in waits],
        )

    # -- fencing and lost locks -----------------------------------------------------------

    def grant_fence(self, filepath: str, agent_id: str) -> int | None:
        """The fencing number of `agent_id`'s grant of this lock in this process, if any."""
        grant = self._grants.get((self.canonicalize(filepath), agent_id))
        return None if grant is None else grant.fence

    def holds_of(self, keys: Sequence[str]) -> dict[str, tuple[str | None, tuple[str, ...]]]:
        """Each key's live holder and live readers (first come first), in one query: the
        guards ask for a file and every directory over it at once."""
        s = self._s
        wanted = [self.canonicalize(key) for key in keys]
        rows = self.session.run(
            lambda conn, me: conn.execute(
                f"SELECT (SELECT h.agent_id FROM {s}.holds h WHERE h.namespace = %(ns)s "
                f"AND h.key = k.key AND h.agent_id IS NOT NULL AND {s}.alive(h.session, %(me)s)), "
                f"ARRAY(SELECT r.agent_id FROM {s}.readers r WHERE r.namespace = %(ns)s "
                f"AND r.key = k.key AND {s}.alive(r.session, %(me)s) ORDER BY r.acquired_at) "
                "FROM unnest(%(keys)s::text[]) WITH ORDINALITY AS k(key, n) ORDER BY k.n",
                {"ns": self.namespace, "me": me, "keys": wanted},
            ).fetchall()
        )
        return {
            key: (None if holder is None else str(holder), tuple(str(r) for r in readers))
            for key, (holder, readers) in zip(keys, rows, strict=True)
        }

    def readers(self, filepath: str) -> tuple[str, ...]:
        """The agents holding this file shared whose session lives, first come first."""
        key = self.canonicalize(filepath)
        rows = self.session.run(
            lambda conn, me: conn.execute(
                f"SELECT agent_id FROM {self._s}.readers WHERE namespace = %s AND key = %s "
                f"AND {self._s}.alive(session, %s) ORDER BY acquired_at",
                (self.namespace, key, me),
            ).fetchall()
        )
        return tuple(str(row[0]) for row in rows)

    def holder_below(self, key: str, agent_id: str) -> str | None:
        """An agent other than `agent_id` holding or reading a lock below the directory or
        glob `key` (the look of a directory lock's own wait, `below_blocker`), one round
        trip; None for a file's key."""
        scoped = self.canonicalize(key)
        if not is_scoped(scoped):
            return None
        rows = self.session.run(
            lambda conn, me: conn.execute(
                f"SELECT {self._s}.below_blocker(%s, %s, %s, false, %s, false)",
                (self.namespace, scoped, agent_id, me),
            ).fetchall()
        )
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    def globs_over(self, key: str) -> tuple[str, ...]:
        """The globs ever locked here that are above `key` (`scope_keys.is_above`: for a
        file, the globs that match it), outermost first, as the lock directory answers."""
        rows = self._rows(
            f"SELECT key FROM {self._s}.globs WHERE namespace = %s AND prefix = ANY(%s) "
            'ORDER BY length(prefix), key COLLATE "C"',
            (self.namespace, places_above(key)),
        )
        return tuple(str(row[0]) for row in rows if is_above(str(row[0]), key))

    def stale_grant(self, filepath: str, agent_id: str) -> str | None:
        """Why this process's grant of the lock to `agent_id` is no longer valid, or None
        (also None when this process was never granted it: nothing here to be stale)."""
        key = self.canonicalize(filepath)
        grant = self._grants.get((key, agent_id))
        if grant is None:
            return None
        current = self.holder_record(key)
        if current is not None and current.agent_id == agent_id and current.fence == grant.fence:
            return None
        if current is None and self._reads_with(key, agent_id, grant.fence):
            return None
        revoked = self._pending_reason(agent_id, key)
        if revoked is not None:
            return f"revoked: {revoked}"
        now = "free" if current is None else f"fence {current.fence}, held by {current.agent_id}"
        return f"your grant of {key} (fence {grant.fence}) is no longer valid (now {now})"

    def _reads_with(self, key: str, agent_id: str, fence: int) -> bool:
        """Whether `agent_id` still reads `key` under the grant numbered `fence`."""
        rows = self.session.run(
            lambda conn, me: conn.execute(
                f"SELECT 1 FROM {self._s}.readers WHERE namespace = %s AND key = %s "
                f"AND agent_id = %s AND fence = %s AND {self._s}.alive(session, %s)",
                (self.namespace, key, agent_id, fence, me),
            ).fetchall()
        )
        return bool(rows)

    def revoke(self, agent_id: str, reason: str) -> list[str]:
        """Release every lock of `agent_id` (all namespaces; waiters get them in turn) and keep
        `reason` in `revocations` until its process tells it (`take_lost_locks`)."""
        released = self.cleanup_agent_locks(agent_id, all_namespaces=True)
        if released:
            now = time.time()
            self.session.run(
                lambda conn, me: conn.cursor().executemany(
                    f"INSERT INTO {self._s}.revocations (agent_id, key, reason, at) "
                    "VALUES (%s, %s, %s, %s)",
                    [(agent_id, key, reason, now) for key in released],
                )
            )
        return released

    def _revoked(self, agent_id: str, keys: list[str]) -> dict[str, str]:
        """Take the reasons kept for `agent_id`'s revoked `keys` (each told once)."""
        rows = self.session.run(
            lambda conn, me: conn.execute(
                f"DELETE FROM {self._s}.revocations WHERE agent_id = %s AND key = ANY(%s) "
                "RETURNING key, reason, at",
                (agent_id, keys),
            ).fetchall()
        )
        return {str(key): str(reason) for key, reason, _at in sorted(rows, key=lambda r: r[2])}

    def _pending_reason(self, agent_id: str, key: str) -> str | None:
        rows = self.session.run(
            lambda conn, me: conn.execute(
                f"SELECT reason FROM {self._s}.revocations WHERE agent_id = %s AND key = %s "
                "ORDER BY at DESC LIMIT 1",
                (agent_id, key),
            ).fetchall()
        )
        return str(rows[0][0]) if rows else None

    # -- heartbeats and the policy ---------------------------------------------------------

    def stamp_activity(self, agent_id: str) -> None:
        """One upsert of `activity`, at most once a second per agent from this process: the
        idle limit counts minutes, and a tool call must not pay a round trip for nothing.
        Never raises."""
        if self._read_only:
            return
        now = time.monotonic()
        last = self._stamped.get(agent_id)
        if last is not None and now - last < STAMP_EVERY_SECONDS:
            return
        self._stamped[agent_id] = now
        try:
            self.session.run(
                lambda conn, me: conn.execute(
                    f"INSERT INTO {self._s}.activity (agent_id, at) VALUES (%s, {self._s}."
                    "now_epoch()) ON CONFLICT (agent_id) DO UPDATE SET at = excluded.at",
                    (agent_id,),
                )
            )
        except Exception as exc:  # a heartbeat must not fail the call it rides on
            log.debug("could not stamp %s's activity: %s", agent_id, exc)

    def last_active(self, agent_id: str) -> float | None:
        rows = self.session.run(
            lambda conn, me: conn.execute(
                f"SELECT at FROM {self._s}.activity WHERE agent_id = %s", (agent_id,)
            ).fetchall()
        )
        return float(rows[0][0]) if rows else None

    def idle_limit(self) -> float | None:
        rows = self.session.run(
            lambda conn, me: conn.execute(f"SELECT idle_limit FROM {self._s}.meta").fetchall()
        )
        return float(rows[0][0]) if rows and rows[0][0] is not None else None

    def set_idle_limit(self, seconds: float | None) -> None:
        if seconds is not None and not seconds > 0:
            raise ValueError("an idle limit is a positive number of seconds (None: off)")
        self.session.run(
            lambda conn, me: conn.execute(f"UPDATE {self._s}.meta SET idle_limit = %s", (seconds,))
        )

    def take_lost_locks(self, agent_id: str) -> list[LostLock]:
        """Locks `agent_id` was granted here that are not its own any more: its database
        session ended (connection lost, server restarted) or someone released them. Each is
        reported once; the agent must lock such a file again before editing it."""
        mine = self._grants_of(agent_id)
        if not mine:
            return []
        keys = sorted(mine)
        rows = self.session.run(
            lambda conn, me: conn.execute(
                f"SELECT key, fence FROM {self._s}.holds WHERE namespace = %s "
                f"AND key = ANY(%s) AND agent_id = %s AND {self._s}.alive(session, %s) "
                f"UNION ALL SELECT key, fence FROM {self._s}.readers WHERE namespace = %s "
                f"AND key = ANY(%s) AND agent_id = %s AND {self._s}.alive(session, %s)",
                (self.namespace, keys, agent_id, me, self.namespace, keys, agent_id, me),
            ).fetchall()
        )
        current = {str(key): int(fence) for key, fence in rows}
        lost = []
        for key, grant in mine.items():
            if current.get(key) == grant.fence:
                continue
            if grant.generation != self.session.generation:
                reason = "the database session that held it ended (connection lost)"
            else:
                reason = "it was released or taken over while you held it"
            lost.append(LostLock(filepath=key, fence=grant.fence, reason=reason))
            self._forget(key, agent_id)
        if lost:  # revoked ones say why (an operator, the idle limit)
            told = self._revoked(agent_id, [item.filepath for item in lost])
            lost = [
                item.model_copy(update={"reason": told[item.filepath]})
                if item.filepath in told
                else item
                for item in lost
            ]
        if any(grant.generation != self.session.generation for grant in mine.values()):
            # Our old session's rows are dead weight: free them now, not at the next taker.
            # Only housekeeping: its failure must not lose the reports taken above.
            try:
                self.reclaim_stale()
            except BackendError as exc:
                log.info("could not free the rows of an ended session yet: %s", exc)
        return sorted(lost, key=lambda item: item.filepath)

    # -- the journal ------------------------------------------------------------------------

    def journal_write(self, record: JournalRecord) -> None:
        """Write a record no change of the lock tables makes (a deadlock, a denied write).
        Never raises: a record that cannot be written is logged and dropped. A record with no
        `session` is stamped with this store's session and process."""
        if not journal_enabled():
            return
        if not record.session:  # made by a caller that left who-wrote-it to the store
            me = current_process()
            record.session = str(self.session.number or "")
            record.pid, record.host = me.pid, me.host

        def write(conn: psycopg.Connection[Any], me: int) -> None:
            with conn.transaction():
                conn.execute(insert_statement(self.schema), insert_params(record))
                conn.execute("SELECT pg_notify(%s, '')", (journal_channel(self.schema),))

        try:
            self.session.run(write)
        except Exception as exc:  # the journal never fails the caller
            log.warning("journal on %s: a %s record was not written (%s)", self.location,
                        record.kind, exc)  # fmt: skip

    # -- cleaning up ----------------------------------------------------------------------

    def end_waits(self, agent_id: str | None) -> list[WaiterRecord]:
        """Drop every queue entry of `agent_id` (of every agent: None), in all namespaces,
        handing each lock freed that way on; a waiter still running queues again."""

        def end(conn: psycopg.Connection[Any], me: int) -> list[Any]:
            with conn.transaction():
                rows = conn.execute(
                    f"DELETE FROM {self._s}.waiters WHERE %s::text IS NULL OR agent_id = %s "
                    f"RETURNING {_WAIT_COLUMNS}",
                    (agent_id, agent_id),
                ).fetchall()
                for namespace, key in sorted({(row[0], row[1]) for row in rows}):
                    conn.execute(f"SELECT {self._s}.hand_off(%s, %s, %s)", (namespace, key, me))
            return rows

        return [_waiter(row) for row in self.session.run(end)]

    def end_stalled_waits(self) -> list[WaiterRecord]:
        """Nothing to do: a release hands the lock to the first live waiter at once, so no
        free lock waits on a waiter's turn (a stopped waiter simply holds it)."""
        return []

    def reclaim_stale(self) -> list[Reclamation]:
        """Remove every hold and queue entry whose database session has ended."""
        rows = self.session.run(
            lambda conn, me: conn.execute(
                f"SELECT {_HOLD_COLUMNS} FROM {self._s}.reclaim(%s)", (me,)
            ).fetchall()
        )
        self._prune_globs(None)  # the globs of the dead's holds, reads and waits
        return [
            Reclamation(
                lock_path=record.lock_path,
                namespace=record.namespace,
                holder=record,
                reason="its database session ended",
                reclaimed_by_pid=current_process().pid,
            )
            for record in map(_holder, rows)
        ]


class _Wait:
    """One queued wait: its queue entry, its wake-up subscription, and how it ends."""

    def __init__(
        self,
        store: PgLockStore,
        key: str,
        agent: str,
        shared: bool,
        deadline: float,
        listener: Listener,
        pushing: bool,
    ) -> None:
        self.store = store
        self.key = key
        self.agent = agent
        self.shared = shared
        self.deadline = deadline
        self.listener = listener
        self.interval = store.liveness_interval if pushing else min(store.liveness_interval, 0.1)
        self.waker = store._lend_waker()
        self.ticket = 0
        self.token = ""
        self._sub: str | None = None
        self._unavailable: BackendUnavailableError | None = None

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def enqueue(self) -> bool:
        """Take the lock, or queue for it, in one round trip; True when taken."""
        store = self.store
        token = new_token()
        # Subscribed before the queue entry exists: its grant may be pushed before the reply.
        self._subscribe(token)
        for _attempt in range(_INDEX_ATTEMPTS):
            outcome, fence, _who, ticket = store._call(
                store._sql_take_or_enqueue,
                store._take_params(self.key, self.agent, token, self.shared),
            )
            if outcome != "unindexed":
                break
            store._index_glob(self.key)  # its entry went since: written again
        else:
            raise _index_lost(self.key)
        if store._note_take(self.key, self.agent, token, outcome, fence):
            return True
        # 'pending': no queue entry, the lock's row is ours while we wait for its readers.
        self.ticket = int(ticket or 0)
        return False

    def _subscribe(self, token: str) -> None:
        if self._sub is not None:
            self.listener.unsubscribe(self._sub, self.waker)
        self.token = token
        self._sub = f"g{token}"
        self.listener.subscribe(self._sub, self.waker)

    def attempt(self, *, ask: bool) -> bool:
        """One step: True when the lock is ours. A pushed grant needs no query; with `ask`
        the server is asked too (after a timeout, or a wake-up that brought no grant).
        Server trouble is waited out until the deadline (then raised); a queue entry lost
        with a session is made anew."""
        pushed = self.listener.take_grant(self.token)
        if pushed is None:
            # Cleared before looking again, so that a push arriving meanwhile still wakes us.
            self.waker.clear()
            pushed = self.listener.take_grant(self.token)
        if pushed is not None:
            self.store._remember(self.key, self.agent, self.token, pushed)
            return True
        if not ask:
            return False
        store = self.store
        try:
            outcome, fence, _who = store._call(
                f"SELECT * FROM {store._s}.advance(%s, %s, %s, %s, %s)",
                (store.namespace, self.key, self.ticket, self.token),
            )
            if outcome == "gone":
                log.info("queue entry of %s on %s was lost; queueing again", self.agent, self.key)
                return self.enqueue()
        except BackendUnavailableError as exc:
            self._unavailable = exc
            return False
        self._unavailable = None
        if outcome == "granted":
            store._remember(self.key, self.agent, self.token, fence)
            return True
        return False

    def finish(self) -> bool:
        """The deadline passed: leave the queue; True if the lock was handed over meanwhile."""
        if self._unavailable is not None:
            raise self._unavailable
        if self._leave(TIMED_OUT) == "granted":
            fence = self.listener.take_grant(self.token)
            if fence is None:
                record = self.store.holder_record(self.key)
                fence = 0 if record is None or record.fence is None else record.fence
            self.store._remember(self.key, self.agent, self.token, fence)
            return True
        return False

    def abandon(self) -> None:
        """Cancelled or failed: leave no queue entry, and give back a lock handed to us."""
        try:
            if self._leave(abandoned_wait_outcome(self.agent)) == "granted":
                self.store.release(self.key, self.agent)
        except BackendUnavailableError:
            log.warning("could not leave the queue of %s: server unavailable", self.key)

    def _leave(self, why: str) -> str:
        """Leave the queue; `why` is how the wait ended, for the journal, unless it turns
        out granted (set first: a CTE that is MATERIALIZED runs before the query reads it)."""
        store = self.store
        leave = "leave_glob" if is_glob_key(self.key) else "leave"  # its index entry may go
        (outcome,) = store._call(
            "WITH why AS MATERIALIZED (SELECT set_config('lockyard.why', %s, true)) "
            f"SELECT {store._s}.{leave}(%s, %s, %s, %s, %s) FROM why",
            (why, store.namespace, self.key, self.ticket, self.token),
        )
        return str(outcome)

    def close(self) -> None:
        if self._sub is not None:
            self.listener.unsubscribe(self._sub, self.waker)
        self.listener.unlisten(self.store._channel)
        self.store._take_back_waker(self.waker)  # a late wake-up of it is only spurious


def _holder(
    row: tuple[Any, ...], mode: LockMode = EXCLUSIVE, *, draining: bool = False
) -> HolderRecord:
    namespace, key, agent, token, fence, pid, start, host, boot, pid_ns, acquired, checkout = row
    return HolderRecord(
        agent_id=agent, token=token, pid=pid, start_time=start, host=host, boot_id=boot,
        pid_ns=pid_ns, lock_path=key, namespace=namespace, acquired_at=acquired, fence=fence,
        checkout=checkout, mode=mode, draining=draining,
    )  # fmt: skip


def _waiter(row: tuple[Any, ...]) -> WaiterRecord:
    namespace, key, agent, token, ticket, pid, start, host, boot, pid_ns, since, checkout = row
    return WaiterRecord(
        agent_id=agent, token=token, pid=pid, start_time=start, host=host, boot_id=boot,
        pid_ns=pid_ns, lock_path=key, namespace=namespace, ticket=ticket, since=since,
        checkout=checkout,
    )  # fmt: skip


def _array_text(items: list[str]) -> str:
    """A PostgreSQL array literal of `items` (each quoted, `"` and `\\` escaped)."""
    quoted = ('"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"' for item in items)
    return "{" + ",".join(quoted) + "}"


def _held_glob_over(s: str, namespace: str, key: str, directories: str) -> str:
    """SQL: whether a glob lock that matches the file `key` is held (or read), looked up in
    the glob index entries of the checkout's root and of `directories`, the directories over
    it (schema.py's glob block): one index probe per directory while none is there, and one
    primary key probe of `holds` per matching glob (a LATERAL ... LIMIT, never turned into a
    join over the namespace's holds, whatever the statistics say)."""
    return (
        f"EXISTS (SELECT 1 FROM unnest('{{\"\"}}'::text[] || {directories}::text[]) "
        f"AS p(place), LATERAL (SELECT 1 FROM {s}.globs g, LATERAL (SELECT 1 FROM {s}.holds gh "
        f"WHERE gh.namespace = {namespace} AND gh.key = g.key "
        "AND (gh.agent_id IS NOT NULL OR gh.readers > 0) LIMIT 1) AS gh "
        f"WHERE g.namespace = {namespace} AND g.prefix = p.place "
        f"AND {s}.glob_matches(g.pattern, {key}) LIMIT 1) AS held)"
    )


_INDEX_ATTEMPTS: Final = 8
"""How often a glob's take is asked again after its index entry went meanwhile (each time,
the glob's last holder let it go between our write of the entry and our take)."""


def _index_lost(key: str) -> BackendError:
    return BackendError(
        f"the glob {key} lost its index entry {_INDEX_ATTEMPTS} times in a row, each time to "
        "a release of it between the entry's write and the take; try again"
    )


def _is_shared(mode: LockMode) -> bool:
    return mode is not EXCLUSIVE and validate_mode(mode) != EXCLUSIVE
