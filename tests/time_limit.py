"""A test that runs too long fails, and its pytest-xdist worker lives on.

pytest-timeout's thread method (pyproject.toml) ends a hung test by ending its whole process.
Under xdist the worker is replaced, and with `--dist loadgroup` the run can then wait for ever
for work nobody will send (pytest-xdist#1378): one slow test would hang a whole CI run. So each
test first gets SIGALRM at 80% of its timeout, which raises in the test's own thread and fails
that test alone. The thread method stays the backstop for a test the signal cannot reach (one
that swallows BaseException, or sets its own ITIMER_REAL and so clears this one).

conftest.py registers this module as a plugin; a pytest run elsewhere can load it with
`-p time_limit` (tests/ on the path).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Generator
from contextlib import contextmanager
from types import FrameType

import pytest

SHARE_OF_TIMEOUT = 0.8
_STARTED = pytest.StashKey[float]()


class TestRanTooLong(BaseException):
    """Raised in a test past its share of the timeout. A BaseException, not an Exception:
    hypothesis takes an Exception for a failing example and runs it again to shrink it."""

    __test__ = False  # a name pytest would otherwise collect


def limit_seconds(item: pytest.Item) -> float:
    """The test's timeout (its `timeout` mark, else the ini's) times SHARE_OF_TIMEOUT; 0: none."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0]) * SHARE_OF_TIMEOUT
    return float(item.config.getini("timeout") or 0) * SHARE_OF_TIMEOUT


@contextmanager
def _time_limit(item: pytest.Item) -> Generator[None, None, None]:
    """Arms SIGALRM for what is left of the test's time (set-up, call and teardown share it)."""
    limit = limit_seconds(item)
    if limit <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return
    left = limit - (time.monotonic() - item.stash.setdefault(_STARTED, time.monotonic()))

    def ran_too_long(signum: int, frame: FrameType | None) -> None:
        raise TestRanTooLong(
            f"still running after {limit:.0f} s, {SHARE_OF_TIMEOUT:.0%} of its timeout "
            "(pyproject.toml's, or its own timeout mark)"
        )

    previous = signal.signal(signal.SIGALRM, ran_too_long)
    signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with _time_limit(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _time_limit(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    with _time_limit(item):
        return (yield)
