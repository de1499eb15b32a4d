"""`lockyard monitor --json` whose stdout pipe nobody reads goes on resolving deadlocks: its
reports wait in a bounded queue, then are dropped and counted, never written from the loop."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from lockyard.cli._detached_output import DetachedOutput
from lockyard.infra.crossproc.notices import VictimNoticeBoard
from lockyard.infra.lockstore.lockdir.store import LockStore
from polling_support import wait_until_async

pytestmark = pytest.mark.anyio

LOCKYARD = str(Path(sys.executable).parent / "lockyard")
ROUNDS = 12
"""Each resolution prints a report of about a kilobyte: far more than the 4 KiB pipe holds."""
_F_SETPIPE_SZ = 1031
_FIONREAD = 0x541B


@asynccontextmanager
async def deadlocked(store: LockStore, round_: int) -> AsyncIterator[str]:
    """Two agents of this round in a cycle (queue entries on disk); yields the victim."""
    first, second = f"a{round_}", f"b{round_}"
    one, two = f"one{round_}", f"two{round_}"
    assert store.try_lock(one, first)
    await anyio.sleep(0.01)  # the second lock is younger: its holder is the victim
    assert store.try_lock(two, second)
    async with anyio.create_task_group() as group:
        group.start_soon(store.acquire_async, two, first, 60)
        group.start_soon(store.acquire_async, one, second, 60)
        yield second
        group.cancel_scope.cancel()
    store.cleanup_agent_locks(first)
    store.cleanup_agent_locks(second)


@pytest.fixture
def unread_monitor(lock_dir: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`lockyard monitor --json` writing into a 4 KiB pipe that nobody reads."""
    lock_dir.mkdir(mode=0o700)
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, _F_SETPIPE_SZ, 4096)
    monitor = subprocess.Popen(
        [LOCKYARD, "monitor", "--json", "--lock-dir", str(lock_dir)],
        stdout=write_end,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    yield monitor, read_end
    monitor.kill()
    monitor.wait()
    os.close(read_end)


async def test_a_monitor_nobody_reads_still_resolves_every_deadlock(
    repo: Path, lock_dir: Path, unread_monitor: tuple[subprocess.Popen[bytes], int]
) -> None:
    monitor, read_end = unread_monitor
    store = LockStore(repo, lock_dir)
    board = VictimNoticeBoard(lock_dir)
    for round_ in range(ROUNDS):
        async with deadlocked(store, round_) as victim:
            await wait_until_async(
                lambda: board.read(victim) is not None, f"a notice for {victim}", within=60
            )
    unread = fcntl.ioctl(read_end, _FIONREAD, b"\0\0\0\0")
    assert int.from_bytes(unread, sys.byteorder) > 2048  # the pipe is full: nobody reads
    assert monitor.poll() is None


def test_reports_the_reader_missed_are_counted_in_the_next_one() -> None:
    """When the reader reads again, the count of dropped reports comes before the next one."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, _F_SETPIPE_SZ, 4096)
    output = DetachedOutput(lambda n: json.dumps({"dropped": n}), fd=write_end, capacity=2)
    for number in range(100):
        output.line(json.dumps({"n": number, "pad": "x" * 500}))  # never blocks
    assert output.dropped > 0
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.extend(iter(_reads(read_end))))
    reader.start()
    # The reader is back once the queued lines are out: then the count and the next line fit
    # (sent earlier, they could find the queue still full and be dropped in turn).
    assert output.drain(60)
    output.line(json.dumps({"n": "last"}))
    assert output.drain(60)
    os.close(write_end)
    reader.join(60)
    os.close(read_end)
    lines = [json.loads(line) for line in b"".join(received).splitlines()]
    printed = [line["n"] for line in lines if "n" in line]
    dropped = [line["dropped"] for line in lines if "dropped" in line]
    assert printed[-1] == "last"
    assert "dropped" in lines[-2]  # the count of the last lost lines, just before the next
    assert printed[:-1] == sorted(printed[:-1])  # in order
    assert len(printed) - 1 + sum(dropped) == 100  # every line printed or counted


def _reads(fd: int) -> Iterator[bytes]:
    while chunk := os.read(fd, 65536):
        yield chunk
