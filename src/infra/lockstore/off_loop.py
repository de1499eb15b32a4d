"""Store calls made from an event loop, without stalling it on a server.

A lock directory answers in a few system calls, so its calls run in place. A store whose
calls are round trips to a server (PostgreSQL: 0.3 ms on a local one, a whole network
latency on a remote one, up to the liveness bound while the network is cut) says so with a
true `waits_on_server`, and its calls run in a worker thread: the loop keeps serving every
other agent of the process meanwhile.

Such a store's calls from one event loop also take turns in a lane of the store's own, in
the order they were made: a store has one session with its server, and worker threads racing
for it would reach the server in any order. So waits begun in one order are queued by the
server in that order (a lock's waiters are served first come, first served), and a call
never waits in a thread for another call's round trip to end.

Either way a call that has been made completes and its result reaches the caller, as a call
made in place does: the wait for its turn and the worker's await are shielded, so a
cancellation arrives at the caller's next checkpoint, never between a grant and the code
that records it, and a cleanup call made while a cancellation is under way still runs.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

T = TypeVar("T")

# Per event loop (a lock belongs to one): store -> its lane (a FIFO lock: anyio's hands the
# lock to the longest waiter). Weak, so that a closed store's lane goes with it.
_lanes: anyio.lowlevel.RunVar[weakref.WeakKeyDictionary[object, anyio.Lock]] = (
    anyio.lowlevel.RunVar("lockyard_store_lanes")
)


def waits_on_server(store: object) -> bool:
    """Whether `store`'s calls are round trips to a server (see the module's docstring)."""
    return bool(getattr(store, "waits_on_server", False))


async def in_worker(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`call(*args, **kwargs)` in a worker thread, shielded: it completes once started."""
    with anyio.CancelScope(shield=True):
        result = await anyio.to_thread.run_sync(functools.partial(call, *args, **kwargs))
    return result  # noqa: RET504 - mypy: a return inside a scope that may swallow exceptions


async def store_call(store: object, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`call(*args, **kwargs)`, one call on `store`: in a worker thread when the store waits
    on a server (after the calls made before it on that store from this event loop), in place
    otherwise."""
    if waits_on_server(store):
        # Shielded from the turn on: a cancelled caller's call still runs in its turn (a
        # cleanup call made while a cancellation is under way must not be skipped).
        with anyio.CancelScope(shield=True):
            async with _lane(store):
                result = await anyio.to_thread.run_sync(functools.partial(call, *args, **kwargs))
        return result
    return call(*args, **kwargs)


def _lane(store: object) -> anyio.Lock:
    try:
        lanes = _lanes.get()
    except LookupError:
        lanes = weakref.WeakKeyDictionary()
        _lanes.set(lanes)
    lane = lanes.get(store)
    if lane is None:
        lane = lanes[store] = anyio.Lock()
    return lane
