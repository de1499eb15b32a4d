"""Output lines that never hold up the caller: a long-running command (`lockyard monitor`)
must go on working when whoever reads its stdout stops reading.

A write to a full pipe blocks; in the monitor's event loop that would stop deadlock
resolution itself. Here lines go to a bounded queue that a thread writes out; when the queue
is full (the reader has stopped), lines are dropped and counted, and the count goes out as a
line of its own (made by `dropped_line`) before the next line that gets through, where the
lost lines were. A reader that closed the pipe ends the output.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Final

log = logging.getLogger("lockyard.output")

DEFAULT_CAPACITY: Final = 1000
"""Lines kept while the reader is slow; more than a reader that only lags will ever need."""


class DetachedOutput:
    """Lines written to `fd` by a daemon thread; `line()` never blocks."""

    def __init__(
        self,
        dropped_line: Callable[[int], str],
        *,
        fd: int = 1,
        capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        self._fd = fd
        self._dropped_line = dropped_line
        self._queue: queue.Queue[bytes] = queue.Queue(capacity)
        self._guard = threading.Lock()
        self._dropped = 0
        self._warned = False
        self._closed = False
        self._thread = threading.Thread(target=self._write_all, name="lockyard-output", daemon=True)
        self._thread.start()

    @property
    def dropped(self) -> int:
        """Lines dropped and not yet reported in the output."""
        with self._guard:
            return self._dropped

    def line(self, text: str) -> None:
        if self._closed:
            return
        with self._guard:
            # The count of dropped lines goes out first, so it sits where they were lost.
            if self._dropped and self._put(self._dropped_line(self._dropped)):
                self._dropped = 0
            if not self._dropped and self._put(text):
                return
            self._dropped += 1
            warn = not self._warned
            self._warned = True
        if warn:
            log.warning(
                "stdout is not being read: reports are dropped (and counted) until it is; "
                "deadlocks are still resolved"
            )

    def _put(self, text: str) -> bool:
        try:
            self._queue.put_nowait(text.encode("utf-8", "backslashreplace") + b"\n")
        except queue.Full:
            return False
        return True

    def drain(self, seconds: float) -> bool:
        """Wait up to `seconds` for the queued lines to be written; True when they were."""
        done = threading.Event()

        def wait() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=wait, daemon=True).start()
        return done.wait(seconds)

    def _write_all(self) -> None:
        while True:
            data = self._queue.get()
            try:
                if not self._closed:
                    self._write(data)
            except OSError:  # the reader closed the pipe (EPIPE): nobody will read again
                self._closed = True
            finally:
                self._queue.task_done()

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
