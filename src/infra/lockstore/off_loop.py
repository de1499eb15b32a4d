"""Store calls made from an event loop, without stalling it on a server.

A lock directory answers in a few system calls, so its calls run in place. A store whose
calls are round trips to a server (PostgreSQL: 0.3 ms on a local one, a whole network
latency on a remote one, up to the liveness bound while the network is cut) says so with a
true `waits_on_server`, and its calls run in a worker thread: the loop keeps serving every
other agent of the process meanwhile.

Either way a call that has started completes and its result reaches the caller, as a call
made in place does: the worker's await is shielded, so a cancellation arrives at the
caller's next checkpoint, never between a grant and the code that records it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")


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
    on a server, in place otherwise."""
    if waits_on_server(store):
        return await in_worker(call, *args, **kwargs)
    return call(*args, **kwargs)
