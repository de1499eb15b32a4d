"""The bounds of a wait, the same on every backend: `timeout_seconds` and `poll_interval_ms`.

A value out of range is refused with an error that names the range, before anything is
taken or queued.
"""

from __future__ import annotations

import math
from typing import Final

from .errors import InvalidTimeoutError

MAX_TIMEOUT_SECONDS: Final = 3600
"""An hour, for every wait (the store's and the lock tools'): longer is almost certainly a unit
mistake (milliseconds passed as seconds), and a wait that long should be a retry loop."""
MIN_POLL_INTERVAL_MS: Final = 1
MAX_POLL_INTERVAL_MS: Final = 60_000


def validate_timeout(timeout_seconds: object) -> float:
    if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, int | float):
        raise InvalidTimeoutError(
            f"timeout_seconds must be a number of seconds, got {type(timeout_seconds).__name__}"
        )
    value = float(timeout_seconds)
    if not math.isfinite(value) or value < 0 or value > MAX_TIMEOUT_SECONDS:
        raise InvalidTimeoutError(
            f"timeout_seconds={timeout_seconds!r} is out of range; "
            f"use 0 (do not wait) up to {MAX_TIMEOUT_SECONDS:g} seconds"
        )
    return value


def validate_poll_interval(poll_interval_ms: object) -> float:
    if isinstance(poll_interval_ms, bool) or not isinstance(poll_interval_ms, int | float):
        raise InvalidTimeoutError(
            f"poll_interval_ms must be a number of milliseconds, "
            f"got {type(poll_interval_ms).__name__}"
        )
    value = float(poll_interval_ms)
    if not math.isfinite(value) or not MIN_POLL_INTERVAL_MS <= value <= MAX_POLL_INTERVAL_MS:
        raise InvalidTimeoutError(
            f"poll_interval_ms={poll_interval_ms!r} is out of range; "
            f"use {MIN_POLL_INTERVAL_MS} to {MAX_POLL_INTERVAL_MS} milliseconds"
        )
    return value / 1000.0
