"""`PgJournal`: the reader of the PostgreSQL journal (the table of journal_schema.py), and
the one writer that is not a trigger: records no row change makes (deadlocks, denials).

A reader has a connection of its own (never the store's session, whose calls are the lock
path), reads in autocommit (no transaction held open on the server), and follows the
journal by LISTEN on its channel, which every record's insert notifies.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any, Final

import psycopg

from ..journal.query import EVERYTHING, JournalQuery
from ..journal.record import CycleStep, JournalRecord
from ..journal.summary import AgentFigures, FileFigures, Stats
from .dsn import KeepaliveBound, PgSpec, parse_spec, redact_conninfo
from .journal_schema import SUM_BLOCK
from .schema import journal_channel
from .session import connect, conninfo

_COLUMNS: Final = (
    "id, t, kind, namespace, agent, file, session, pid, host, fence, waited, held, outcome, "
    "other, reason, guard, detail"
)
_BATCH: Final = 5000
_MOST_ROWS: Final = 50_000
"""The most rows `latest` asks the server for at once."""
_NO_ID: Final = 2**63 - 1
"""Above every record id: the end of the last range of ids."""
_STOP_CHECK: Final = 1.0

_INSERT: Final = (
    "INSERT INTO {s}.journal (t, kind, namespace, agent, file, session, pid, host, fence, "
    "waited, held, outcome, other, reason, guard, detail) VALUES (%s, %s, %s, %s, %s, %s, %s, "
    "%s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


def insert_statement(schema: str) -> str:
    return _INSERT.replace("{s}", f'"{schema}"')


def insert_params(record: JournalRecord) -> tuple[Any, ...]:
    """The values of `insert_statement` for one record (its lists in `detail`)."""
    detail: dict[str, Any] = {}
    if record.cycle:
        detail["cycle"] = [[s.agent, s.waits_on, s.held_by] for s in record.cycle]
    if record.victim is not None:
        detail["victim"] = record.victim
    if record.released:
        detail["released"] = list(record.released)
    if record.costs:
        detail["costs"] = dict(record.costs)
    if record.truncated:
        detail["truncated"] = True
    return (
        record.time, record.kind, record.namespace, record.agent, record.file, record.session,
        record.pid, record.host, record.fence, record.waited, record.held, record.outcome,
        record.other, record.reason, record.guard, json.dumps(detail) if detail else None,
    )  # fmt: skip


def _record(row: tuple[Any, ...]) -> JournalRecord:
    (_id, t, kind, ns, agent, file, session, pid, host, fence, waited, held, outcome, other,
     reason, guard, detail) = row  # fmt: skip
    record = JournalRecord(t, kind, ns, agent, file, session, pid, host, fence, waited, held)
    record.outcome, record.other, record.reason, record.guard = outcome, other, reason, guard
    if detail:
        record.cycle = tuple(CycleStep(*map(str, step)) for step in detail.get("cycle", ()))
        record.victim = detail.get("victim")
        record.released = tuple(detail.get("released", ()))
        record.costs = {str(k): float(v) for k, v in detail.get("costs", {}).items()}
        record.truncated = bool(detail.get("truncated", False))
    return record


def _where(query: JournalQuery, after_id: int | None = None) -> tuple[str, list[Any]]:
    """SQL conditions every record `query.matches` passes (most others fail them); the
    reader checks each row with `query.matches` too (deadlocks name agents in `detail`)."""
    conditions = ["true"]
    params: list[Any] = []
    if after_id is not None:
        conditions.append("id > %s")
        params.append(after_id)
    if query.since is not None:
        conditions.append("t >= %s")
        params.append(query.since)
    if query.until is not None:
        conditions.append("t < %s")
        params.append(query.until)
    if query.kinds:
        conditions.append("kind = ANY(%s)")
        params.append(sorted(query.kinds))
    if query.namespaces:
        conditions.append("namespace = ANY(%s)")
        params.append(sorted(query.namespaces))
    if query.agents:
        conditions.append("(agent = ANY(%s) OR other = ANY(%s) OR kind = 'deadlock')")
        params += [sorted(query.agents)] * 2
    if query.files:
        conditions.append("(file ~ ANY(%s) OR kind = 'deadlock')")
        params.append([f"^(?:{glob.regex})$" for glob in query.globs])
    return " AND ".join(conditions), params


def _cover(
    blocks: list[tuple[Any, ...]], since: float | None, until: float | None
) -> tuple[list[int], list[tuple[int, int]]]:
    """Which summed blocks (block, first, last) a window takes whole, and the ranges of
    record ids left to add up row by row: every id but those of the blocks taken and of the
    blocks wholly outside the window."""
    kept = [block for block, first, last in blocks if _inside(first, last, since, until)]
    return kept, _id_ranges(kept + _outside(blocks, since, until))


def _outside(blocks: list[tuple[Any, ...]], since: float | None, until: float | None) -> list[int]:
    """The summed blocks (block, first, last) with no record in the window: empty, or all
    their records before or after it (their span of times says so, whatever the order of the
    records inside)."""
    return [
        block
        for block, first, last in blocks
        if first is None
        or (since is not None and last < since)
        or (until is not None and first >= until)
    ]


def _inside(
    first: float | None, last: float | None, since: float | None, until: float | None
) -> bool:
    return (
        first is not None
        and last is not None
        and (since is None or first >= since)
        and (until is None or last < until)
    )


def _id_ranges(left_out: list[int]) -> list[tuple[int, int]]:
    """The ranges [lo, hi) of record ids outside the blocks `left_out`, in order."""
    ranges: list[tuple[int, int]] = []
    low = 0
    for block in sorted(set(left_out)):
        if block * SUM_BLOCK > low:
            ranges.append((low, block * SUM_BLOCK))
        low = (block + 1) * SUM_BLOCK
    ranges.append((low, _NO_ID))
    return ranges


class PgJournal:
    """The journal of one lockyard schema on a PostgreSQL server, read-only."""

    def __init__(self, spec: str | PgSpec, *, keepalive: KeepaliveBound | None = None) -> None:
        self.spec = spec if isinstance(spec, PgSpec) else parse_spec(spec)
        self.bound = keepalive if keepalive is not None else KeepaliveBound.from_env()
        self._s = f'"{self.spec.schema}"'
        self._conn: psycopg.Connection[Any] | None = None
        self._guard = threading.Lock()

    @property
    def location(self) -> str:
        """`table S.journal on postgresql://user@host:port/db` (the schema said once; a
        line too narrow for it breaks at a space, not inside a name)."""
        return f"table {self.spec.schema}.journal on {redact_conninfo(self.spec.conninfo)}"

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self.spec, self.bound, purpose="journal reader")
        return self._conn

    def __enter__(self) -> PgJournal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._guard:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _select(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        with self._guard:
            return [tuple(row) for row in self._connection().execute(sql, params)]

    def _window_ranges(self, query: JournalQuery) -> list[tuple[int, int]]:
        """The ranges of record ids that may hold records of the query's time window, in
        order: all ids but those of the summed blocks wholly outside it. A window then costs
        the rows of its own blocks, not a scan of every record after (or before) it."""
        if query.since is None and query.until is None:
            return [(0, _NO_ID)]
        blocks = self._select(
            f"SELECT block, first, last FROM {self._s}.journal_blocks WHERE summed", []
        )
        return _id_ranges(_outside(blocks, query.since, query.until))

    def records(self, query: JournalQuery = EVERYTHING) -> Iterator[JournalRecord]:
        for low, high in self._window_ranges(query):
            after = low - 1
            while True:
                where, params = _where(query, after)
                sql = f"SELECT {_COLUMNS} FROM {self._s}.journal WHERE {where} AND id < %s"
                rows = self._select(f"{sql} ORDER BY id LIMIT {_BATCH}", [*params, high])
                for row in rows:
                    record = _record(row)
                    if query.matches(record):
                        yield record
                if len(rows) < _BATCH:
                    break
                after = int(rows[-1][0])

    def latest(self, query: JournalQuery = EVERYTHING, limit: int = 50) -> list[JournalRecord]:
        return [record for _id, record in self._latest(query, limit, None)]

    def _latest(
        self, query: JournalQuery, limit: int, upto: int | None
    ) -> list[tuple[int, JournalRecord]]:
        if limit <= 0:
            return []
        found: list[tuple[int, JournalRecord]] = []
        batch = min(max(limit, 100), _MOST_ROWS)  # `log -n 10**20` asks for no bigint LIMIT
        for low, high in reversed(self._window_ranges(query)):
            before = high - 1 if upto is None else min(upto, high - 1)
            while len(found) < limit and before >= low:
                where, params = _where(query)
                rows = self._select(
                    f"SELECT {_COLUMNS} FROM {self._s}.journal WHERE {where} "
                    f"AND id >= %s AND id <= %s ORDER BY id DESC LIMIT {batch}",
                    [*params, low, before],
                )
                for row in rows:
                    record = _record(row)
                    if query.matches(record):
                        found.append((int(row[0]), record))
                        if len(found) >= limit:
                            break
                if len(rows) < batch:
                    break
                before = int(rows[-1][0]) - 1
            if len(found) >= limit:
                break
        return found[::-1]

    def stats(self, query: JournalQuery = EVERYTHING) -> Stats:
        if query.narrows_records:
            total = Stats()
            for record in self.records(query):
                total.add(record)
            return total
        return self._stats_in_sql(query)

    def _stats_in_sql(self, query: JournalQuery) -> Stats:
        """The figures, summed by the server: the kept sums of the whole blocks in the window
        (journal_schema.py), and the rows no such sum covers, added up in one pass (per file,
        per agent and per kind at once); a million rows read in Python would not do, nor
        would a million rows aggregated by the server on every call."""
        s = self._s
        self._seal()
        with self._guard:
            conn = self._connection()
            with conn.transaction():  # one snapshot for all
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                blocks = conn.execute(
                    f"SELECT block, first, last FROM {s}.journal_blocks WHERE summed ORDER BY block"
                ).fetchall()
                kept, gaps = _cover(blocks, query.since, query.until)
                rows = conn.execute(
                    f"""SELECT file, agent, kind, grouped, sum(records)::bigint, min(first),
                        max(last), sum(figured)::bigint, sum(holds)::bigint, sum(held),
                        sum(waits)::bigint, sum(waited), max(longest), sum(granted)::bigint,
                        sum(timeouts)::bigint, sum(denied)::bigint
                    FROM (SELECT file, agent, kind, grouped, records, first, last, figured,
                            holds, held, waits, waited, longest, granted, timeouts, denied
                        FROM {s}.journal_sums WHERE block = ANY(%s)
                        UNION ALL
                        SELECT f.* FROM unnest(%s::bigint[], %s::bigint[]) AS gap(lo, hi),
                            LATERAL {s}.journal_figures(gap.lo, gap.hi, %s, %s) AS f) AS parts
                    GROUP BY file, agent, kind, grouped""",
                    [kept, [lo for lo, _hi in gaps], [hi for _lo, hi in gaps],
                     query.since, query.until],
                ).fetchall()  # fmt: skip
                where, params = _where(query)
                deadlock_rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM {s}.journal WHERE {where} AND kind = 'deadlock' "
                    "ORDER BY id",
                    params,
                ).fetchall()
        stats = Stats()
        for file, agent, kind, grouped, count, first, last, figured, *figures in rows:
            holds, held, waits, waited, longest, granted, timeouts, denied = figures
            if grouped == 0b110:  # per kind
                stats.kinds[kind] = count
                stats.records += count
                stats.first = first if stats.first is None else min(stats.first, first)
                stats.last = last if stats.last is None else max(stats.last, last)
            elif not figured:
                continue  # only wait beginnings, pass-overs or deadlocks (below) name it
            elif grouped == 0b011 and file:  # per file
                stats.files[file] = FileFigures(
                    holds=holds, held=float(held), waits=waits, waited=float(waited),
                    longest_wait=float(longest), waits_granted=granted, timeouts=timeouts,
                    denied=denied,
                )  # fmt: skip
            elif grouped == 0b101:  # per agent
                stats.agents[agent] = AgentFigures(
                    holds=holds, held=float(held), waits=waits, waited=float(waited),
                    longest_wait=float(longest), denied=denied,
                )  # fmt: skip
        for row in deadlock_rows:
            record = _record(tuple(row))
            stats.deadlocks.append(record)
            for name in record.files():
                stats.files.setdefault(name, FileFigures()).deadlocks += 1
            if record.victim:
                stats.agents.setdefault(record.victim, AgentFigures()).victim += 1
        return stats

    def _seal(self) -> None:
        """Have the server sum the blocks that are finished (journal_schema.py); a reader
        that may not write (a read-only role, a standby) adds up their rows instead."""
        with self._guard, contextlib.suppress(psycopg.Error):
            self._connection().execute(f"SELECT {self._s}.journal_seal()")

    # -- following -----------------------------------------------------------------------------

    def follow(
        self,
        query: JournalQuery = EVERYTHING,
        *,
        backlog: int = 0,
        stop: threading.Event | None = None,
    ) -> Iterator[JournalRecord]:
        listening = connect(self.spec, self.bound, purpose="journal follower")
        try:
            for statement in self._follow_statements():
                listening.execute(statement)
            position, records = self._start(query, backlog)
            yield from records
            while stop is None or not stop.is_set():
                for _notice in listening.notifies(timeout=_STOP_CHECK, stop_after=1):
                    pass
                yield from self._fresh(query, position)
        finally:
            with contextlib.suppress(psycopg.Error):
                listening.execute(self._unfollow_statement())
            listening.close()

    def _follow_statements(self) -> list[str]:
        """Listen, and say so: records are notified only while a follower is listed (the
        rows of followers that are gone are dropped first)."""
        followers = f"{self._s}.journal_followers"
        return [
            f'LISTEN "{journal_channel(self.spec.schema)}"',
            f"DELETE FROM {followers} WHERE pid NOT IN (SELECT pid FROM pg_stat_activity)",
            f"INSERT INTO {followers} VALUES (pg_backend_pid()) ON CONFLICT DO NOTHING",
        ]

    def _unfollow_statement(self) -> str:
        return f"DELETE FROM {self._s}.journal_followers WHERE pid = pg_backend_pid()"

    async def follow_async(
        self, query: JournalQuery = EVERYTHING, *, backlog: int = 0
    ) -> AsyncIterator[JournalRecord]:
        """`follow` on asyncio: notices are awaited on an async connection; the reads run in
        a worker thread, on this reader's connection."""
        import anyio

        listening = await psycopg.AsyncConnection.connect(
            conninfo(self.spec, self.bound, purpose="journal follower"), autocommit=True
        )
        try:
            for statement in self._follow_statements():
                await listening.execute(statement)
            position, records = await anyio.to_thread.run_sync(self._start, query, backlog)
            for record in records:
                yield record
            while True:
                async for _notice in listening.notifies(stop_after=1):
                    pass
                for record in await anyio.to_thread.run_sync(self._fresh, query, position):
                    yield record
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(psycopg.Error):
                await listening.execute(self._unfollow_statement())
            await listening.close()

    def _start(self, query: JournalQuery, backlog: int) -> tuple[_Position, list[JournalRecord]]:
        """Where a follower starts (the newest record now), and the backlog before it."""
        rows = self._select(f"SELECT coalesce(max(id), 0) FROM {self._s}.journal", [])
        last = int(rows[0][0])
        return _Position(last), [record for _id, record in self._latest(query, backlog, last)]

    def _fresh(self, query: JournalQuery, position: _Position) -> list[JournalRecord]:
        where, params = _where(query, position.low)
        rows = self._select(
            f"SELECT {_COLUMNS} FROM {self._s}.journal WHERE {where} ORDER BY id", params
        )
        fresh = []
        for row in rows:
            if position.first_sight(int(row[0])):
                record = _record(row)
                if query.matches(record):
                    fresh.append(record)
        position.advance()
        return fresh


class _Position:
    """How far a follower has read. Record ids are drawn at insert, not at commit, so a
    record may become visible after one with a higher id (its transaction committed a
    moment later): a follower reads again the last LOOK_BACK ids, and skips those it saw."""

    LOOK_BACK: Final = 1024

    def __init__(self, last: int) -> None:
        self.low = last
        self.seen: set[int] = set()

    def first_sight(self, record_id: int) -> bool:
        if record_id in self.seen:
            return False
        self.seen.add(record_id)
        return True

    def advance(self) -> None:
        if not self.seen:
            return
        low = max(self.low, max(self.seen) - self.LOOK_BACK)
        if low > self.low:
            self.low = low
            self.seen = {record_id for record_id in self.seen if record_id > low}
