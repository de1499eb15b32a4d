"""Push wake-ups from PostgreSQL: one LISTEN connection per process and database, one thread.

Payloads on a namespace's channel: `g<token>:<fence>` (the lock was handed to the queued
waiter with that token), `v<agent>` (a victim notice was posted for that agent). The graph
channel carries no payload: something changed that `lockyard monitor` should look at.
Subscribers are wakers keyed by the payload they care about (`g<token>`, `v<agent>`, or
`*<channel>` for every message on a channel).

The thread waits in `select` on the connection's socket and a wake-up pipe, so subscribing to
a new channel takes effect at once. A channel is LISTENed to only while someone in the process
uses it (`listen` ... `unlisten`), and for `IDLE_CHANNEL_SECONDS` after: PostgreSQL signals
every LISTENing server process of the database at every NOTIFY, whatever its channel, so a
process that keeps listening while it has nothing to wait for slows every hand-off of
everyone else (about 12 µs each on a 2-core machine). A blocked waiter (`Listener.wait`)
also watches the socket and reads what arrives itself: its push wakes it directly, not
through the thread (one scheduler hop less per hand-off). Reading is serialised, so each
message is dispatched once, by whichever thread got there first. When the connection breaks,
every subscriber is woken (each re-checks by query: nothing is lost, only pushed late) and
the thread reconnects.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from typing import Any, Protocol

import psycopg

from ..wakeup import Waker
from .dsn import KeepaliveBound, PgSpec
from .session import BackendUnavailableError, connect

log = logging.getLogger(__name__)

RECONNECT_SECONDS = 0.5
IDLE_CHANNEL_SECONDS = 1.0
"""How long a channel stays LISTENed to after its last user left: waits that follow each
other closely keep it, and the next wait after a quiet spell pays one LISTEN round trip."""


class Wakeable(Protocol):
    def wake(self) -> None: ...


class Listener:
    """LISTENs on channels for this process and wakes the subscribed wakers."""

    def __init__(self, spec: PgSpec, bound: KeepaliveBound) -> None:
        self.spec = spec
        self.bound = bound
        self._guard = threading.Lock()
        self._channels: set[str] = set()  # wanted: LISTENed to, or about to be
        self._listening: set[str] = set()  # LISTENed to on the current connection
        self._users: dict[str, int] = {}  # channel -> uses between listen and unlisten
        self._idle_since: dict[str, float] = {}  # channel without users -> since when
        self._subscribers: dict[str, set[Wakeable]] = {}
        self._grants: dict[str, int] = {}  # "g<token>" -> fence, until taken
        self._io = threading.Lock()  # one reader of the connection at a time
        self._conn: psycopg.Connection[Any] | None = None
        # One waiting thread at a time reads the connection itself (the reader); meanwhile
        # the thread leaves the socket to it (two threads woken per message would compete
        # for the cores). Other waiters are woken by whoever reads.
        self._reader = threading.Lock()
        self._readers = 0
        self._watching = False  # whether the thread has the socket in its select
        self._trouble = False  # a reader found the connection unusable: the thread checks
        self._ready = threading.Condition(self._guard)
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.connected = False

    # -- subscribing --------------------------------------------------------------------

    def listen(self, channel: str, timeout: float = 5.0) -> bool:
        """Make sure `channel` is LISTENed to until the matching `unlisten`; True once it is
        (False: pushes unavailable, yet the use counts: call `unlisten` all the same)."""
        with self._guard:
            self._users[channel] = self._users.get(channel, 0) + 1
            self._idle_since.pop(channel, None)
            if channel in self._listening:
                return True
            self._channels.add(channel)
            self._start()
        self._poke()
        with self._ready:
            return self._ready.wait_for(lambda: channel in self._listening, timeout)

    def unlisten(self, channel: str) -> None:
        """One use of `channel` ended; the last one lets it go IDLE_CHANNEL_SECONDS later
        (up to twice that: the thread is not woken for it)."""
        with self._guard:
            left = self._users.get(channel, 0) - 1
            if left > 0:
                self._users[channel] = left
                return
            self._users.pop(channel, None)
            # No poke: it would cost a write and a thread woken on every wait's way out. The
            # thread looks again within IDLE_CHANNEL_SECONDS while channels are in use.
            self._idle_since[channel] = time.monotonic()

    @property
    def listening(self) -> frozenset[str]:
        """The channels LISTENed to now."""
        with self._guard:
            return frozenset(self._listening)

    def subscribe(self, key: str, waker: Wakeable) -> None:
        with self._guard:
            self._subscribers.setdefault(key, set()).add(waker)
            idle = not self._readers and not self._watching
        if idle:
            self._poke()  # the thread left the socket to readers that are gone: watch it

    def unsubscribe(self, key: str, waker: Wakeable) -> None:
        with self._guard:
            wakers = self._subscribers.get(key)
            if wakers is not None:
                wakers.discard(waker)
                if not wakers:
                    del self._subscribers[key]
            self._grants.pop(key, None)

    def take_grant(self, token: str) -> int | None:
        """The fence pushed for the queued waiter with `token`, if the lock was handed to it
        (kept only while someone is subscribed to `g<token>`)."""
        with self._guard:
            return self._grants.pop(f"g{token}", None)

    # -- waiting ------------------------------------------------------------------------

    def wait(self, waker: Waker, timeout: float) -> bool:
        """Block until `waker` is woken or `timeout` seconds pass; True when woken.

        While it waits, the calling thread reads the LISTEN connection itself whenever it has
        news (the listener thread would be one more thread to schedule before the waiter),
        unless another waiting thread of this process does already.
        """
        if not self._reader.acquire(blocking=False):
            poller = select.poll()  # another waiter reads: it (or the thread) wakes this one
            poller.register(waker.fileno(), select.POLLIN)
            return bool(poller.poll(max(timeout, 0.0) * 1000.0))
        with self._guard:
            self._readers += 1
        self._poke()
        try:
            return self._wait(waker, timeout)
        finally:
            self._reader.release()
            with self._guard:
                self._readers -= 1
                # Others than this waiter (still subscribed) need the thread to watch again;
                # when there are none, waking it now would only compete with this waiter's
                # return: the next subscription does it.
                others = sum(len(wakers) for wakers in self._subscribers.values()) > 1
                handover = self._readers == 0 and others
            if handover:
                self._poke()

    def _wait(self, waker: Waker, timeout: float) -> bool:
        deadline = time.monotonic() + max(timeout, 0.0)
        unreadable: psycopg.Connection[Any] | None = None
        while True:
            conn = self._conn
            poller = select.poll()  # not select: descriptors past 1024 exist in busy processes
            poller.register(waker.fileno(), select.POLLIN)
            watched = -1
            if conn is not None and conn is not unreadable and not conn.closed:
                with contextlib.suppress(psycopg.Error, ValueError):
                    watched = conn.fileno()
                    poller.register(watched, select.POLLIN)
            remaining = deadline - time.monotonic()
            events = dict(poller.poll(max(remaining, 0.0) * 1000.0))
            if waker.fileno() in events:
                return True
            if watched >= 0 and watched in events and conn is not None:
                usable, reached = self._drain(conn, waker)
                if reached:
                    return True
                if not usable:
                    unreadable = conn  # broken: the listener thread reconnects and wakes us
                    self._trouble = True
                    self._poke()
                continue
            if remaining <= 0:
                return False

    def _drain(self, conn: psycopg.Connection[Any], reader: Waker) -> tuple[bool, bool]:
        """Dispatch every message waiting on `conn`: whether it is usable, and whether a
        message was for `reader` (the waiter reading it, which is not woken through its
        descriptor: it returns at once, two system calls sooner)."""
        reached = False
        with self._io:
            if self._conn is not conn:
                return False, reached
            try:
                conn.pgconn.consume_input()
                while (raw := conn.pgconn.notifies()) is not None:
                    if self._dispatch(raw.relname.decode(), raw.extra.decode(), reader):
                        reached = True
            except psycopg.Error:
                return False, reached
            return conn.pgconn.status == psycopg.pq.ConnStatus.OK, reached

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
                with self._io:
                    self._conn = None
                with self._guard:
                    self._listening.clear()
                    every = [w for wakers in self._subscribers.values() for w in wakers]
                for waker in every:
                    waker.wake()
                with contextlib.suppress(Exception):
                    conn.close()

    def _serve(self, conn: psycopg.Connection[Any]) -> None:
        def handle(notify: psycopg.Notify) -> None:
            self._dispatch(notify.channel, notify.payload)

        conn.add_notify_handler(handle)
        with self._io:
            self._conn = conn
        self.connected = True
        while not self._stopping:
            with self._guard:
                pending = self._channels - self._listening
            for channel in sorted(pending):
                with self._io:
                    conn.execute(f'LISTEN "{channel}"')
                with self._ready:
                    self._listening.add(channel)
                    self._ready.notify_all()
            for channel in self._drop_idle_channels():
                with self._io:
                    conn.execute(f'UNLISTEN "{channel}"')
            with self._guard:
                self._watching = not self._readers
                linger = self._next_idle_expiry()
            watched = [conn.fileno(), self._wake_r] if self._watching else [self._wake_r]
            readable, _, _ = select.select(watched, [], [], min(5.0, linger))
            if self._wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 4096)
            if conn.fileno() in readable or self._trouble or not readable:
                self._trouble = False
                with self._io:  # a waiter may have read it already: then there is nothing
                    conn.pgconn.consume_input()
                    while (raw := conn.pgconn.notifies()) is not None:
                        self._dispatch(raw.relname.decode(), raw.extra.decode())
                if conn.pgconn.status != psycopg.pq.ConnStatus.OK:
                    raise psycopg.OperationalError("connection closed by the server")

    def _drop_idle_channels(self) -> list[str]:
        """Channels idle for IDLE_CHANNEL_SECONDS, forgotten here before their UNLISTEN is
        sent: a `listen` from now on waits for a LISTEN the thread sends after it."""
        now = time.monotonic()
        with self._guard:
            idle = [
                channel
                for channel, since in self._idle_since.items()
                if now - since >= IDLE_CHANNEL_SECONDS and channel not in self._users
            ]
            for channel in idle:
                del self._idle_since[channel]
                self._channels.discard(channel)
                self._listening.discard(channel)
        return idle

    def _next_idle_expiry(self) -> float:
        """Seconds until the thread should look for idle channels (called under the guard):
        when the first idle one is due, and every IDLE_CHANNEL_SECONDS while any is in use
        (its last user leaves without telling the thread)."""
        if self._idle_since:
            due = min(self._idle_since.values()) + IDLE_CHANNEL_SECONDS - time.monotonic()
            return max(due, 0.0)
        return IDLE_CHANNEL_SECONDS if self._users else 5.0

    def _wait_pipe(self, seconds: float) -> None:
        readable, _, _ = select.select([self._wake_r], [], [], seconds)
        if readable:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 4096)

    def _dispatch(self, channel: str, payload: str, reader: Wakeable | None = None) -> bool:
        """Wake the subscribers of one message, except `reader`; whether `reader` was one."""
        key = payload
        with self._guard:
            if payload.startswith("g"):
                key, _, fence = payload.rpartition(":")
                if key in self._subscribers:
                    self._grants[key] = int(fence)
            wakers = [*self._subscribers.get(key, ()), *self._subscribers.get("*" + channel, ())]
        reached = False
        for waker in wakers:
            if waker is reader:
                reached = True
            else:
                waker.wake()
        return reached


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
