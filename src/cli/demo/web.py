"""`lockyard demo --web`: the run's own page, served beside it on a thread of its own.

The page reads the run's store read-only, by push, as `lockyard web` does; the agents run
at a pace a person can follow; when the run is over the page stays up (with the run's
timeline) until Ctrl-C, and the throwaway repo and store are removed only then.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from ...infra.lockstore import LockBackend
from .._lockdir import open_store
from ..views.feed import BoardFeed
from ..web.access import Access
from ..web.serving import ServerThread, bind
from .agent import Pacing

WATCHABLE = Pacing(
    edit=(0.4, 1.6),
    think=(0.2, 0.8),
    back_off=(0.2, 0.6),
    wait_timeout=60.0,
    rendezvous_patience=60.0,
    act_hold=8.0,
)
"""A pace to watch: edits take about a second, so holds and queues stay on screen; the
readers of `tests/`, then its writer with the person in line, keep it 8 s each."""


class DemoPage:
    """The page of one demo run."""

    def __init__(self, port: int, say: Callable[[str], None]) -> None:
        self.port = port
        self.say = say
        self.server: ServerThread | None = None

    def start(self, lock_dir: Path, backend: str | None) -> str:
        """Serve the page of the run's store, and say its address."""

        def open_read_only() -> LockBackend:
            return open_store(lock_dir if backend is None else None, backend, read_only=True)

        feed = BoardFeed(open_read_only)
        self.server = ServerThread(feed, Access(None), bind("127.0.0.1", self.port)).start()
        # The timeline's window is the run's: from now to its latest event (the page's
        # `#from=`), so a run of half a minute fills its width, during the run and after.
        self.say(f"lockyard web: {self.server.address}#from={int(time.time())} (the run's page)")
        return self.server.address

    def linger(self) -> None:
        """Keep the page up until Ctrl-C (or SIGTERM)."""
        done = threading.Event()
        self.say("the run is over; its page stays up until Ctrl-C")

        def stop(_signal: int, _frame: FrameType | None) -> None:
            done.set()

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            while not done.wait(1.0):
                pass
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
