"""A long-running command's task group ends cleanly on SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import os
import signal

import anyio
import pytest

from lockyard.infra.signals import cancel_on_signals


@pytest.mark.anyio
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_cancels_the_group_and_is_logged(
    signum: signal.Signals, caplog: pytest.LogCaptureFixture
) -> None:
    finished: list[str] = []
    log = logging.getLogger("lockyard.test.signals")
    with caplog.at_level(logging.INFO, logger=log.name), anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            await group.start(lambda **kw: cancel_on_signals(group.cancel_scope, log=log, **kw))
            os.kill(os.getpid(), signum)  # the handler is in place once started
            try:
                await anyio.sleep_forever()
            finally:
                finished.append("cleaned up")
    assert finished == ["cleaned up"]
    assert f"received {signum.name}, shutting down" in caplog.text
