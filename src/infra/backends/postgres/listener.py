"""Push wake-ups from PostgreSQL: one LISTEN connection per process and database, one thread.

Payloads on a namespace's channel: `g<ticket>:<fence>` (the lock was handed to that queued
waiter), `v<agent>` (a victim notice was posted for that agent). The graph channel carries
no payload: something changed that `lockyard monitor` should look at. Subscribers are
`Waker`s keyed by the payload they care about (`g<ticket>`, `v<agent>`, or `*<channel>` for
every message on a channel).

The thread waits in `select` on the connection's socket and a wake-up pipe, so subscribing to
a new channel takes effect at once. When the connection breaks, every subscriber is woken
(each re-checks by query: nothing is lost, only pushed late) and the thread reconnects.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
from typing import Any

import psycopg

from ...lockstore import Waker
from .dsn import KeepaliveBound, PgSpec
from .session import BackendUnavailableError, connect

log = logging.getLogger(__name__)

RECONNECT_SECONDS = 0.5


class Listener:
    """LISTENs on channels for this process and wakes the subscribed `Waker`s."""

    def __init__(self, spec: PgSpec, bound: KeepaliveBound) -> None:
        self.spec = spec
        self.bound = bound
        self._guard = threading.Lock()
        self._channels: set[str] = set()
        self._listening: set[str] = set()
        self._subscribers: dict[str, set[Waker]] = {}
        self._grants: dict[str, int] = {}  # "g<ticket>" -> fence, until taken
        self._ready = threading.Condition(self._guard)
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.connected = False

    # -- subscribing --------------------------------------------------------------------

    def listen(self, channel: str, timeout: float = 5.0) -> bool:
        """Make sure `channel` is LISTENed to; True once it is (False: pushes unavailable)."""
        with self._guard:
            if channel in self._listening:
                return True
            self._channels.add(channel)
            self._start()
        self._poke()
        with self._ready:
            return self._ready.wait_for(lambda: channel in self._listening, timeout)

    def subscribe(self, key: str, waker: Waker) -> None:
        with self._guard:
            self._subscribers.setdefault(key, set()).add(waker)

    def unsubscribe(self, key: str, waker: Waker) -> None:
        with self._guard:
            wakers = self._subscribers.get(key)
            if wakers is not None:
                wakers.discard(waker)
                if not wakers:
                    del self._subscribers[key]
            self._grants.pop(key, None)

    def take_grant(self, ticket: int) -> int | None:
        """The fence pushed for queued waiter `ticket`, if the lock was handed to it."""
        with self._guard:
            return self._grants.pop(f"g{ticket}", None)

    # -- the thread -----------------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stopping = False
            self._thread = threading.Thread(
                target=self._run, name="lockyard-pg-listen", daemon=True
            )
            self._thread.start()

    def _poke(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")

    def close(self) -> None:
        self._stopping = True
        self._poke()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stopping:
            try:
                conn = connect(self.spec, self.bound, purpose="listener")
            except BackendUnavailableError as exc:
                log.debug("listener cannot connect: %s", exc)
                self._wait_pipe(RECONNECT_SECONDS)
                continue
            try:
                self._serve(conn)
            except psycopg.Error as exc:
                log.info("listener connection to %s lost: %s", self.spec.display, exc)
            finally:
                self.connected = False
                with self._guard:
                    self._listening.clear()
                    every = [w for wakers in self._subscribers.values() for w in wakers]
                for waker in every:
                    waker.wake()
                with contextlib.suppress(Exception):
                    conn.close()

    def _serve(self, conn: psycopg.Connection[Any]) -> None:
        conn.add_notify_handler(lambda n: self._dispatch(n.channel, n.payload))
        self.connected = True
        while not self._stopping:
            with self._guard:
                pending = self._channels - self._listening
            for channel in sorted(pending):
                conn.execute(f'LISTEN "{channel}"')
                with self._ready:
                    self._listening.add(channel)
                    self._ready.notify_all()
            readable, _, _ = select.select([conn.fileno(), self._wake_r], [], [], 5.0)
            if self._wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 4096)
            if conn.fileno() in readable:
                conn.pgconn.consume_input()
                while (raw := conn.pgconn.notifies()) is not None:
                    self._dispatch(raw.relname.decode(), raw.extra.decode())
                if conn.pgconn.status != psycopg.pq.ConnStatus.OK:
                    raise psycopg.OperationalError("connection closed by the server")

    def _wait_pipe(self, seconds: float) -> None:
        readable, _, _ = select.select([self._wake_r], [], [], seconds)
        if readable:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 4096)

    def _dispatch(self, channel: str, payload: str) -> None:
        key = payload
        if payload.startswith("g"):
            key, _, fence = payload.partition(":")
            with self._guard:
                if key in self._subscribers:
                    self._grants[key] = int(fence)
        with self._guard:
            wakers = [*self._subscribers.get(key, ()), *self._subscribers.get("*" + channel, ())]
        for waker in wakers:
            waker.wake()


_listeners: dict[tuple[str, str], Listener] = {}
_listeners_guard = threading.Lock()


def process_listener(spec: PgSpec, bound: KeepaliveBound) -> Listener:
    """The one listener of this process for `spec`'s database and schema."""
    key = (spec.conninfo, spec.schema)
    with _listeners_guard:
        listener = _listeners.get(key)
        if listener is None:
            listener = _listeners[key] = Listener(spec, bound)
        return listener


def close_listeners() -> None:
    """Stop every listener of this process (their connections close with them)."""
    with _listeners_guard:
        listeners = list(_listeners.values())
        _listeners.clear()
    for listener in listeners:
        listener.close()
