"""Waiting in a test until a condition holds, where there is no event to await.

Another process, thread or task changes state the test can only look at: a queue entry in
the lock directory, a row in PostgreSQL, a line in a log, a file a sandbox writes. The test
checks the condition again and again until it holds. The deadline only ends a hang (the
machine may be loaded, so it is generous): no test asserts on how long the wait took. When
it passes, the failure names what was awaited and the condition's last value.

`wait_until` blocks the thread; `wait_until_async` sleeps in the event loop, so the tasks it
waits for keep running, and also takes a condition that is itself a coroutine function.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")
Description = str | Callable[[], str] | None

TIMEOUT_SECONDS = 30.0
"""How long a wait may take before the test fails (a hang, not a slow machine)."""

INTERVAL_SECONDS = 0.005
"""Pause between two checks: short, so a test does not wait long after the state changed."""


def wait_until(
    condition: Callable[[], T],
    what: Description = None,
    *,
    within: float = TIMEOUT_SECONDS,
    interval: float = INTERVAL_SECONDS,
) -> T:
    """Check `condition` until it returns a true value, and return that value.

    After `within` seconds, fails with an AssertionError that names `what` (a text, or a
    function that gives it when the wait fails, for state worth showing then), by default
    the condition's own source line.
    """
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(_timed_out(condition, what, within, value))
        time.sleep(interval)


async def wait_until_async(
    condition: Callable[[], T] | Callable[[], Awaitable[T]],
    what: Description = None,
    *,
    within: float = TIMEOUT_SECONDS,
    interval: float = INTERVAL_SECONDS,
) -> T:
    """`wait_until` for async tests: sleeps with anyio between checks; `condition` may be
    a plain function or a coroutine function (awaited on every check)."""
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise AssertionError(_timed_out(condition, what, within, value))
        await anyio.sleep(interval)


def _timed_out(condition: object, what: Description, within: float, last: object) -> str:
    if callable(what):
        what = what()
    if what is None:
        what = _source_of(condition)
    return f"timed out after {within:g} s waiting for: {what} (last checked: {last!r})"


def _source_of(condition: object) -> str:
    """The lines that define `condition` (for a lambda: the call it is written in)."""
    try:
        return " ".join(line.strip() for line in inspect.getsource(condition).splitlines())  # type: ignore[arg-type]
    except (OSError, TypeError):
        return repr(condition)
