"""Wakers: the wake-up signal a waiter of either backend sleeps on.

A `Waker` is an eventfd (made only when a wait needs a descriptor), so both threads and
async tasks can wait on it; an asyncio task is parked on a future instead, so a wake-up from
its own process costs no system call. A waiter of another process rings it through a FIFO
the waker `listen`s to (a doorbell). The lock directory's waiters are woken through their
process's `WakeHub` (`lockdir/sleep.py`: in-process topics, inotify, pidfds); the
PostgreSQL backend's by its `LISTEN` connection (`postgres/listener.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import threading

import anyio
import anyio.lowlevel


class Waker:
    """A level-triggered wake-up signal that threads and async tasks can wait on.

    Woken by `wake` (this process) and, once it `listen`s to one, by a byte written to a
    FIFO by another process (a doorbell): the FIFO then replaces the eventfd as the one
    descriptor to wait on, and `wake` writes to it too, so a ring wakes the waiting thread
    or task directly, and no epoll joins the two.

    An asyncio task that waits on it while it listens to nothing else is parked on a future
    instead of a descriptor: `wake` settles that future (from the task's own thread
    directly, from another thread through the event loop), so an in-process wake-up costs
    no system call and no extra turn of the event loop. The eventfd is made only when a wait
    needs a descriptor (a thread's, or one together with other descriptors); `wake` writes
    it whenever nobody is parked."""

    def __init__(self) -> None:
        self._fd = -1
        """The eventfd (-1: none yet, or closed): holds a count while woken."""
        self._closed = False
        self._guard = threading.Lock()  # never write to an fd number reused after close
        self._bell = -1
        """The FIFO woken through instead of the eventfd (-1: none): see `listen`."""
        self._woken = False
        """Woken since the last `clear` (whether or not the wake went through the eventfd)."""
        self._parked: tuple[asyncio.AbstractEventLoop, int, asyncio.Future[bool]] | None = None
        """(loop, its thread, future) of the task parked on this waker."""

    def _eventfd(self) -> int:
        """The eventfd, made now if it is not yet (under the guard), readable at once when
        woken meanwhile; -1 once closed."""
        if self._fd < 0 and not self._closed:
            self._fd = os.eventfd(int(self._woken), os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        return self._fd

    def fileno(self) -> int:
        """The descriptor to wait on (readable when woken), for a caller that waits on it
        together with other descriptors."""
        with self._guard:
            return self._bell if self._bell >= 0 else self._eventfd()

    def listen(self, fd: int) -> None:
        """Wake through `fd` from now on: a FIFO other processes write to, opened by the
        caller read-write and non-blocking and kept open until `unlisten`. A wake-up
        pending on the eventfd is carried over; the eventfd goes (made again if needed
        after `unlisten`)."""
        with self._guard:
            if self._closed:
                return
            self._bell = fd
            if self._woken:
                _ring(fd)
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def unlisten(self, fd: int) -> None:
        """Stop waking through `fd` (before the caller closes it)."""
        with self._guard:
            if self._bell == fd:
                self._bell = -1

    def wake(self) -> None:
        with self._guard:
            if self._closed:
                return
            self._woken = True
            parked = self._parked
            if parked is None:
                if self._bell >= 0:
                    _ring(self._bell)
                elif self._fd >= 0:
                    os.eventfd_write(self._fd, 1)
                return
            self._parked = None
            loop, thread, future = parked
        if thread == threading.get_ident():
            _settle(future)
        else:
            with contextlib.suppress(RuntimeError):  # its loop closed: nobody waits
                loop.call_soon_threadsafe(_settle, future)

    def clear(self) -> None:
        with self._guard:
            woken, self._woken = self._woken, False
            if self._bell >= 0:
                # Always read: a ring from another process leaves `_woken` as it was.
                with contextlib.suppress(OSError):
                    os.read(self._bell, 512)  # a few bytes at most: each is one ring
            elif woken and self._fd >= 0:
                with contextlib.suppress(BlockingIOError):
                    os.eventfd_read(self._fd)

    def wait(self, timeout: float) -> bool:
        """Block until woken or `timeout` seconds pass; True when woken.

        poll, not select: select cannot take a descriptor numbered 1024 or more, which a
        busy process hands out.
        """
        poller = select.poll()
        poller.register(self.fileno(), select.POLLIN)
        return bool(poller.poll(max(timeout, 0.0) * 1000.0))

    async def wait_async(self, seconds: float) -> bool:
        """Wait until woken or `seconds` pass; True when woken."""
        loop = _running_asyncio_loop()
        if loop is not None:
            return await self._park(loop, seconds)
        with anyio.move_on_after(max(seconds, 0.0)):
            await anyio.wait_readable(self.fileno())
            return True
        return False

    async def _park(self, loop: asyncio.AbstractEventLoop, seconds: float) -> bool:
        future: asyncio.Future[bool] = loop.create_future()
        with self._guard:
            if self._woken or self._closed:
                woken = True  # level-triggered: a wake since the last clear counts
            else:
                woken = False
                self._parked = (loop, threading.get_ident(), future)
        if woken:
            await anyio.lowlevel.checkpoint()  # a wait is a checkpoint, woken or not
            return True
        timer = loop.call_later(max(seconds, 0.0), _settle, future, False)
        bell = self._bell  # a ring from another process settles the future too
        if bell >= 0:
            loop.add_reader(bell, _settle, future)
        try:
            return await future
        finally:
            timer.cancel()
            if bell >= 0:
                loop.remove_reader(bell)
            with self._guard:
                if self._parked is not None and self._parked[2] is future:
                    self._parked = None

    def close(self) -> None:
        with self._guard:
            self._closed = True
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._bell = -1  # the caller's, closed by it
            parked, self._parked = self._parked, None
        if parked is not None and parked[1] == threading.get_ident():
            _settle(parked[2])


def _ring(fd: int) -> None:
    try:  # noqa: SIM105 (contextlib.suppress costs more, at every wake-up)
        os.write(fd, b"\0")
    except OSError:
        pass  # full of rings already (EAGAIN): readable all the same


def _running_asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The asyncio loop running the current task; None under another anyio backend."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop if asyncio.current_task(loop) is not None else None


def _settle(future: asyncio.Future[bool], woken: bool = True) -> None:
    if not future.done():
        future.set_result(woken)
