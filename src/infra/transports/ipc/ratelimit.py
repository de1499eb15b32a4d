"""A token bucket: how many requests per second one sandbox may send, with a burst allowance."""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    """`rate` requests per second on average, up to `burst` at once.

    `take()` spends one token if there is one; otherwise it returns how many seconds until one
    is available (what a refused request is told as `retry_after`).
    """

    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not rate > 0 or not burst >= 1:
            raise ValueError("rate must be > 0 requests per second and burst >= 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = burst
        self._stamp = clock()

    def take(self) -> float | None:
        """None when a token was spent; else the seconds to wait before the next one."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        if self._tokens >= 1:
            self._tokens -= 1
            return None
        return (1 - self._tokens) / self.rate
