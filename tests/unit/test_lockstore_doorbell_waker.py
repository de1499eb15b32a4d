"""A waker that listens to a doorbell (a FIFO other processes write to) wakes through it:
the FIFO replaces the eventfd as the one descriptor its thread or task waits on."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from lockyard.infra.lockstore.wakeup import Waker


@pytest.fixture
def doorbell(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    path = tmp_path / "bell"
    os.mkfifo(path, 0o600)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    yield fd, path
    os.close(fd)


@pytest.fixture
def waker() -> Iterator[Waker]:
    waker = Waker()
    yield waker
    waker.close()


def _ring(path: Path) -> None:
    """What a release in another process does."""
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, b"\0")
    finally:
        os.close(fd)


def test_a_ring_wakes_a_waker_listening_to_its_doorbell(
    waker: Waker, doorbell: tuple[int, Path]
) -> None:
    fd, path = doorbell
    waker.listen(fd)
    assert waker.fileno() == fd  # one descriptor to wait on: the doorbell itself
    assert not waker.wait(0)
    _ring(path)
    assert waker.wait(0)
    assert waker.wait(0)  # level-triggered until cleared
    waker.clear()
    assert not waker.wait(0)


def test_a_wake_in_this_process_goes_through_the_doorbell(
    waker: Waker, doorbell: tuple[int, Path]
) -> None:
    fd, _path = doorbell
    waker.listen(fd)
    waker.wake()
    assert waker.wait(0)
    waker.clear()
    assert not waker.wait(0)


def test_a_wake_pending_when_the_doorbell_opens_is_carried_over(
    waker: Waker, doorbell: tuple[int, Path]
) -> None:
    fd, _path = doorbell
    eventfd = waker.fileno()
    waker.wake()
    waker.listen(fd)
    assert waker.fileno() == fd != eventfd
    assert waker.wait(0)
    waker.clear()
    assert not waker.wait(0)


def test_wakes_go_through_an_eventfd_again_once_the_doorbell_is_left(
    waker: Waker, doorbell: tuple[int, Path]
) -> None:
    fd, path = doorbell
    waker.listen(fd)
    waker.unlisten(fd)
    assert waker.fileno() != fd
    _ring(path)
    assert not waker.wait(0)  # not listened to any more
    waker.wake()
    assert waker.wait(0)


def test_a_thread_waiting_on_a_doorbell_is_woken_by_a_ring(
    waker: Waker, doorbell: tuple[int, Path]
) -> None:
    fd, path = doorbell
    waker.listen(fd)
    woken: list[bool] = []
    waiting = threading.Thread(target=lambda: woken.append(waker.wait(30)))
    waiting.start()
    _ring(path)
    waiting.join(30)
    assert woken == [True]


def test_a_wake_from_another_thread_reaches_a_waiter_on_its_doorbell(
    waker: Waker, doorbell: tuple[int, Path]
) -> None:
    fd, _path = doorbell
    waker.listen(fd)
    woken: list[bool] = []
    waiting = threading.Thread(target=lambda: woken.append(waker.wait(30)))
    waiting.start()
    waker.wake()  # the wake-up reader's, for a process exit
    waiting.join(30)
    assert woken == [True]


@pytest.mark.anyio
async def test_a_task_waiting_on_a_doorbell_is_woken_by_a_ring(
    waker: Waker, doorbell: tuple[int, Path]
) -> None:
    fd, path = doorbell
    waker.listen(fd)
    woken: list[bool] = []

    async def wait() -> None:
        woken.append(await waker.wait_async(30))

    async with anyio.create_task_group() as group:
        group.start_soon(wait)
        await anyio.lowlevel.checkpoint()
        _ring(path)
    assert woken == [True]
    assert await waker.wait_async(0)  # still rung until cleared
    waker.clear()
    assert not await waker.wait_async(0.01)
