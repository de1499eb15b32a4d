"""Taking every lock of a set and keeping them: what `lockyard lock` does for a person or a script.

It goes through `LockTools`, exactly as an agent's `lock_acquire` does, so it waits in the
same FIFO queues, tells the monitor every hold and wait, and gives way when the monitor
chooses it to break a deadlock. An agent's `lock_acquire` returns as soon as ANY blocked file
is granted; a person wants them all, so the call is repeated until every lock is held, the
time is up, or a deadlock made it give way (then it releases everything and queues again).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..lockstore import MAX_TIMEOUT_SECONDS, LockMode, store_call
from .holder_text import UNREADABLE_HOLDER
from .lock_tools import ACQUIRE_TOOL, LockTools
from .wait_view import LineReader, LineView, line_view


class HoldError(Exception):
    """The locks cannot be taken (a store error, an unreadable lock record): nothing is held."""


class HoldTimedOutError(Exception):
    """The time given ran out before every lock was held: nothing is held."""

    def __init__(self, missing: list[str]) -> None:
        super().__init__(f"timed out waiting for {', '.join(missing)}")
        self.missing = missing


@dataclass(frozen=True, slots=True)
class WaitNote:
    """What the holder is told while it waits: the locks it still waits for, as it sees them,
    or the deadlock it gave way to (`gave_way`: its summary)."""

    views: list[LineView]
    gave_way: str | None = None


OnWait = Callable[[WaitNote], None]


async def hold_all(
    tools: LockTools,
    reader: LineReader,
    keys: list[str],
    timeout_seconds: float | None,
    on_wait: OnWait,
    mode: LockMode = "exclusive",
) -> dict[str, int | None]:
    """Hold every lock of `keys` (lock keys), waiting at most `timeout_seconds` (None: as
    long as it takes); returns each key's fencing number. On timeout, failure or cancellation
    every lock taken here is released before the exception propagates. `mode` "shared"
    holds them beside other readers."""
    deadline = math.inf if timeout_seconds is None else time.monotonic() + timeout_seconds
    try:
        while True:
            payload = await _acquire(tools, keys, 0, mode)
            if payload["all_acquired"]:
                return _fences(payload)
            missing = _missing(payload)
            left = deadline - time.monotonic()
            if left <= 0:
                raise HoldTimedOutError(missing)
            on_wait(WaitNote(await _views(tools, reader, missing)))
            payload = await _acquire(tools, keys, min(left, MAX_TIMEOUT_SECONDS), mode)
            if payload["all_acquired"]:
                return _fences(payload)
            deadlock = payload.get("deadlock")
            if deadlock is not None:  # every lock was released for it: queue again
                on_wait(WaitNote(await _views(tools, reader, missing), deadlock["summary"]))
    except BaseException:
        await store_call(tools.store, tools.store.cleanup_agent_locks, tools.agent_id)
        raise


async def _acquire(
    tools: LockTools, keys: list[str], timeout_seconds: float, mode: LockMode
) -> dict[str, Any]:
    outcome = await tools.call(
        ACQUIRE_TOOL, {"filepaths": keys, "timeout_seconds": timeout_seconds, "mode": mode}
    )
    if outcome.is_error or outcome.data is None:
        raise HoldError(outcome.text)
    return dict(outcome.data)


def _fences(payload: dict[str, Any]) -> dict[str, int | None]:
    return {result["filepath"]: result.get("fence") for result in payload["results"]}


def _missing(payload: dict[str, Any]) -> list[str]:
    """The keys not held; HoldError for a lock whose record cannot be read (it is never
    granted nor broken, so waiting for it could only end by timeout)."""
    results: list[dict[str, Any]] = payload["results"]
    unreadable = [r["filepath"] for r in results if r["holder"] == UNREADABLE_HOLDER]
    if unreadable:
        raise HoldError(
            f"the lock records of {', '.join(unreadable)} cannot be read; "
            "see them with `lockyard status`"
        )
    return [r["filepath"] for r in results if not r["acquired"]]


async def _views(tools: LockTools, reader: LineReader, keys: list[str]) -> list[LineView]:
    def read() -> list[LineView]:
        return [line_view(reader, tools.agent_id, key) for key in keys]

    return await store_call(tools.store, read)
