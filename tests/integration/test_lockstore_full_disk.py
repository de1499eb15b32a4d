"""A full lock file system (a real 64 KiB tmpfs, filled up): a clear error that names the
directory, nothing left behind, and waiters queued before it filled keep their place."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from lockyard.infra.lockstore import LockDirFullError, LockStore
from lockyard.infra.tools.lock_tools import LockTools
from polling_support import wait_until_async
from stepped_waits import SteppedWait

pytestmark = pytest.mark.anyio


SMALL_DISK_OPTIONS = "size=64k,nr_inodes=256,mode=0700"


class SmallDisk:
    """A 64 KiB tmpfs mounted for the test; `fill()` takes every free byte, `free()` gives
    them back."""

    def __init__(self, mount_point: Path) -> None:
        self.mount_point = mount_point
        self.filler = mount_point / "filler"
        self.inodes = mount_point / "inodes"
        self.inodes.mkdir(exist_ok=True)

    def fill(self) -> None:
        """Take every free byte and every free inode (a lock's grant needs no byte: its
        record lives in its symlink's inode)."""
        filler = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for size in (4096, 1):  # whole pages, then the last bytes
                while True:
                    try:
                        os.write(filler, b"x" * size)
                    except OSError as error:
                        if error.errno != errno.ENOSPC:
                            raise
                        break
        finally:
            os.close(filler)
        while True:
            try:
                os.close(os.open(self.inodes / str(len(os.listdir(self.inodes))), os.O_CREAT))
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                break

    def free(self) -> None:
        self.filler.unlink()
        for entry in os.listdir(self.inodes):
            os.unlink(self.inodes / entry)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", SMALL_DISK_OPTIONS, "tmpfs", str(mount_point)],
        check=True,
        capture_output=True,
    )
    try:
        yield SmallDisk(mount_point)
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True, capture_output=True)


@pytest.fixture
def full_store(repo: Path, small_disk: SmallDisk) -> LockStore:
    return LockStore(repo, small_disk.mount_point / "locks")


def only_entries(lock_dir: Path) -> list[str]:
    return sorted(os.listdir(lock_dir))


async def test_locking_on_a_full_disk_says_which_directory_is_full(
    full_store: LockStore, small_disk: SmallDisk
) -> None:
    assert full_store.try_lock("held.py", "alice")
    small_disk.fill()
    before = only_entries(full_store.lock_dir)
    for attempt in (
        lambda: full_store.try_lock("a.py", "bob"),
        lambda: full_store.acquire("a.py", "bob", timeout_seconds=0.05),
        lambda: full_store.acquire("held.py", "bob", timeout_seconds=0.05),
    ):
        with pytest.raises(LockDirFullError) as refused:
            attempt()
        message = str(refused.value)
        assert f"the lock directory {full_store.lock_dir} is full" in message
        assert "LOCKYARD_LOCK_DIR" in message
        assert "agent_id" not in message  # not the raw holder record
    with pytest.raises(LockDirFullError):
        await full_store.acquire_async("held.py", "bob", timeout_seconds=0.05)
    assert only_entries(full_store.lock_dir) == before  # no queue, no staging left behind
    assert full_store.holder("held.py") == "alice"
    assert full_store.release("held.py", "alice")  # releasing needs no space
    small_disk.free()
    assert full_store.try_lock("a.py", "bob")


async def test_lock_acquire_on_a_full_disk_is_an_error_result_that_locks_nothing(
    full_store: LockStore, small_disk: SmallDisk
) -> None:
    tools = LockTools(full_store, "bob")
    small_disk.fill()
    outcome = await tools.acquire({"filepaths": ["a.py", "b.py"], "timeout_seconds": 1})
    assert outcome.is_error
    assert f"the lock directory {full_store.lock_dir} is full" in outcome.text
    assert "Nothing was locked by this call" in outcome.text
    assert '"agent_id"' not in outcome.text
    assert full_store.list_locks() == []
    small_disk.free()
    granted = json.loads((await tools.acquire({"filepaths": ["a.py"]})).text)
    assert granted["all_acquired"] is True


async def test_a_head_that_staged_its_grant_before_the_disk_filled_is_handed_the_lock(
    full_store: LockStore, small_disk: SmallDisk
) -> None:
    assert full_store.try_lock("a.py", "alice")
    got: list[bool] = []

    async def bob() -> None:
        got.append(await full_store.acquire_async("a.py", "bob", timeout_seconds=60))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(bob)
            await wait_until_async(lambda: full_store.waiters("a.py"), "bob queued for a.py")
            await wait_until_async(lambda: _staged(full_store), "bob staged his grant")
            small_disk.fill()
            assert full_store.release("a.py", "alice")  # hands over: writes nothing new
    assert got == [True]
    assert full_store.holder("a.py") == "bob"
    assert full_store.waiters("a.py") == []


def _staged(store: LockStore) -> bool:
    return any(".tmp-" in entry.name for entry in store.lock_dir.iterdir())


def test_a_waiter_queued_before_the_disk_filled_keeps_its_place(
    full_store: LockStore, small_disk: SmallDisk, caplog: pytest.LogCaptureFixture
) -> None:
    assert full_store.try_lock("a.py", "alice")
    wait = SteppedWait(full_store, "bob", "a.py")  # queued; it stages its grant at its turn
    small_disk.fill()
    assert full_store.release("a.py", "alice")
    small_disk.fill()  # the release freed the page of alice's record: take it too
    assert not wait.look()  # cannot stage its grant: keeps waiting, in its place
    assert "keeps waiting for" in caplog.text
    assert [w.agent_id for w in full_store.waiters("a.py")] == ["bob"]
    small_disk.free()
    assert wait.look()
    assert full_store.holder("a.py") == "bob"
    assert full_store.waiters("a.py") == []
