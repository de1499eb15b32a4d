"""`lockyard monitor` and victim notices on PostgreSQL.

Holds and waits are the `holds` and `waiters` tables, so a monitor on any host rebuilds the
whole wait-for graph from them (through the store's `snapshot`, as on a lock directory).
Victim notices are rows of `notices` (one per agent); posting one NOTIFYs the victim's
namespace channel, and the victim's pending `lock_acquire` claims it with a DELETE, so
exactly one reader gets it. The monitor wakes on the graph channel (a wait began, a lock
was handed on) and rescans periodically as a backstop.

Leadership: a monitor resolves deadlocks only while it holds the session advisory lock
(schema class, 0). Two monitors may both find a cycle; only the leader posts a notice, so
one cycle never gets two victims. When the leader's session ends (its process exits or is
killed, its connection is cut), the server drops the lock and the next candidate's try takes
it over (`election.py`: every `lockyard serve` is a candidate).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import psycopg

from ....core.deadlock_info import DeadlockInfo
from ...lockstore import Waker, in_worker, store_call
from ...lockstore.postgres import PgLockStore, graph_channel, lock_class, namespace_channel
from ..notices import VictimNotice
from ..state import WaitForReader, WaitForSnapshot

log = logging.getLogger(__name__)

LEADER_KEY = 0


class PgNoticeBoard:
    """Victim notices in the `notices` table."""

    def __init__(self, store: PgLockStore) -> None:
        self.store = store
        self._s = f'"{store.schema}"'

    def post(self, notice: VictimNotice) -> None:
        namespace = self._namespace_of(notice)
        self.store.session.run(
            lambda conn, me: conn.execute(
                f"SELECT {self._s}.post_notice(%s, %s, %s, %s, %s, %s)",
                (
                    notice.agent_id, namespace, notice.waits_on, notice.wait_id,
                    notice.notice_id, notice.model_dump_json(),
                ),
            )
        )  # fmt: skip

    def _namespace_of(self, notice: VictimNotice) -> str:
        """The namespace whose agents' channel the victim listens on: its wait's."""
        rows = self.store.session.run(
            lambda conn, me: conn.execute(
                f"SELECT namespace FROM {self._s}.waiters WHERE token = %s "
                f"UNION ALL SELECT namespace FROM {self._s}.holds WHERE agent_id = %s LIMIT 1",
                (notice.wait_id, notice.agent_id),
            ).fetchall()
        )
        return str(rows[0][0]) if rows else self.store.namespace

    def read(self, agent_id: str) -> VictimNotice | None:
        rows = self._select("WHERE agent_id = %s", (agent_id,))
        return rows[0] if rows else None

    def notices(self) -> list[VictimNotice]:
        return self._select("ORDER BY agent_id", ())

    def _select(self, where: str, params: tuple[Any, ...]) -> list[VictimNotice]:
        rows = self.store.session.run(
            lambda conn, me: conn.execute(
                f"SELECT body FROM {self._s}.notices {where}", params
            ).fetchall()
        )
        return [VictimNotice.model_validate_json(row[0]) for row in rows]

    def claim(self, agent_id: str) -> VictimNotice | None:
        rows = self.store.session.run(
            lambda conn, me: conn.execute(
                f"DELETE FROM {self._s}.notices WHERE agent_id = %s RETURNING body", (agent_id,)
            ).fetchall()
        )
        return VictimNotice.model_validate_json(rows[0][0]) if rows else None

    def remove(self, notice: VictimNotice) -> bool:
        rows = self.store.session.run(
            lambda conn, me: conn.execute(
                f"DELETE FROM {self._s}.notices WHERE agent_id = %s AND notice_id = %s RETURNING 1",
                (notice.agent_id, notice.notice_id),
            ).fetchall()
        )
        return bool(rows)

    def prune(self, still_waiting: Callable[[VictimNotice], bool]) -> list[str]:
        return [
            notice.agent_id
            for notice in self.notices()
            if not still_waiting(notice) and self.remove(notice)
        ]


class PgVictimNotices:
    """`VictimNotices` from the `notices` table, pushed by NOTIFY (`v<agent>`)."""

    def __init__(
        self,
        store: PgLockStore,
        still_waiting: Callable[[VictimNotice], bool],
        *,
        poll_interval: float = 1.0,
    ) -> None:
        self.store = store
        self.board = PgNoticeBoard(store)
        self._still_waiting = still_waiting
        self._poll_interval = poll_interval

    async def wait_for_victim(self, agent_id: str) -> DeadlockInfo:
        listener = self.store.listener()
        channel = namespace_channel(self.store.schema, self.store.namespace)
        waker = Waker()
        key = f"v{agent_id}"
        listener.subscribe(key, waker)
        try:
            # Round trips in a worker thread (shielded: a claimed notice is never dropped
            # half-way), so the event loop serves the process's other agents meanwhile.
            await in_worker(listener.listen, channel)
            while True:
                waker.clear()
                # The store's session calls go in its lane (in order, one at a time).
                notice = await store_call(self.store, self.board.claim, agent_id)
                if notice is not None:
                    if await store_call(self.store, self._still_waiting, notice):
                        log.info("deadlock victim notice for %s", agent_id)
                        return notice.deadlock
                    log.info("dropped a stale victim notice for %s", agent_id)
                await waker.wait_async(self._poll_interval)
        finally:
            listener.unsubscribe(key, waker)
            listener.unlisten(channel)
            waker.close()


class PgChangeFeed:
    """Wakes the monitor when the graph channel says something changed."""

    def __init__(self, store: PgLockStore, poll_interval: float) -> None:
        self.store = store
        self._poll_interval = poll_interval
        self._waker = Waker()
        self._channel = graph_channel(store.schema)
        self._pushing = False

    @property
    def pushing(self) -> bool:
        return self._pushing

    def __enter__(self) -> PgChangeFeed:
        listener = self.store.listener()
        listener.subscribe("*" + self._channel, self._waker)
        self._pushing = listener.listen(self._channel)
        return self

    def __exit__(self, *exc: object) -> None:
        listener = self.store.listener()
        listener.unsubscribe("*" + self._channel, self._waker)
        listener.unlisten(self._channel)
        self._waker.close()

    async def changed(self, max_wait: float) -> bool:
        wait = max_wait if self._pushing else min(max_wait, self._poll_interval)
        woken = await self._waker.wait_async(wait)
        self._waker.clear()
        return woken or not self._pushing


class PgMonitorSource:
    """What a monitor reads and writes on PostgreSQL, and its leadership."""

    def __init__(self, store: PgLockStore) -> None:
        self.store = store
        self.state = WaitForReader(store)
        self.board = PgNoticeBoard(store)
        self._led_in: int | None = None  # the session generation that holds the leader lock

    @property
    def location(self) -> str:
        return self.store.location

    def feed(self, poll_interval: float) -> PgChangeFeed:
        return PgChangeFeed(self.store, poll_interval)

    def check_present(self) -> None:
        self.store.session.run(lambda conn, me: conn.execute("SELECT 1"))

    def lead(self) -> bool:
        session = self.store.session

        def try_lead(conn: psycopg.Connection[Any], me: int) -> bool:
            if self._led_in == session.generation:
                return True
            row = conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (lock_class(self.store.schema), LEADER_KEY)
            ).fetchone()
            if row is not None and row[0]:
                self._led_in = session.generation
                log.info("this monitor now leads on %s", self.store.location)
                return True
            return False

        return session.run(try_lead)

    def resign(self) -> None:
        session = self.store.session
        if self._led_in is None:
            return

        def unlock(conn: psycopg.Connection[Any], me: int) -> None:
            if self._led_in == session.generation:  # a new session holds no lock to drop
                conn.execute(
                    "SELECT pg_advisory_unlock(%s, %s)",
                    (lock_class(self.store.schema), LEADER_KEY),
                )
            self._led_in = None

        session.run(unlock)

    def who_leads(self) -> str | None:
        if self._led_in is not None and self._led_in == self.store.session.generation:
            return "this process"
        key = lock_class(self.store.schema) & 0xFFFFFFFF  # pg_locks shows it as an oid
        rows = self.store.session.run(
            lambda conn, me: conn.execute(
                "SELECT a.pid, a.application_name, coalesce(host(a.client_addr), 'local') "
                "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s::oid "
                "AND l.objid = %s::oid AND l.objsubid = 2",
                (key, LEADER_KEY),
            ).fetchall()
        )
        if not rows:
            return None
        pid, application, client = rows[0]
        return f"{application or 'a client'} from {client} (PostgreSQL backend pid {pid})"

    def read(self) -> WaitForSnapshot:
        return self.state.read()

    def victim_notices(self) -> PgVictimNotices:
        return PgVictimNotices(self.store, self.still_waiting)

    def still_waiting(self, notice: VictimNotice) -> bool:
        """Is the noticed wait (its queue entry, by token) still there? One indexed read."""
        if notice.wait_id is None:
            return self.state.still_waiting(notice)
        rows = self.store.session.run(
            lambda conn, me: conn.execute(
                f'SELECT 1 FROM "{self.store.schema}".waiters WHERE token = %s AND agent_id = %s',
                (notice.wait_id, notice.agent_id),
            ).fetchall()
        )
        return bool(rows)
