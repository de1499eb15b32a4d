"""The wake-up reader thread survives a failing epoll: it says so and carries on."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from lockyard.infra.lockstore.lockdir.sleep import WakeHub
from lockyard.infra.lockstore.wakeup import Waker
from polling_support import wait_until


def test_a_failing_epoll_poll_is_logged_and_the_reader_restarts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, "lockyard")
    watched = tmp_path / "watched"
    watched.mkdir()
    hub = WakeHub()
    waker = Waker()
    try:
        assert hub.watch(str(watched))
        hub.subscribe(f"{watched}/first", waker)
        hub.subscribe(f"{watched}/second", waker)
        epoll = hub._epoll
        assert epoll is not None
        # Put a plain file where the epoll descriptor was: the reader's next epoll_wait
        # fails for real (EINVAL: not an epoll descriptor).
        devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        os.dup2(devnull, epoll.fileno())
        os.close(devnull)
        (watched / "first").touch()  # wakes the reader's current wait, then it fails
        assert waker.wait(20)
        wait_until(lambda: "epoll.poll() failed" in caplog.text)
        wait_until(lambda: hub._epoll is not epoll)
        waker.clear()
        (watched / "second").touch()  # heard through the new epoll
        assert waker.wait(20)
        assert hub.push_available
    finally:
        waker.close()
        hub.close()
    assert "restarting it" in caplog.text
