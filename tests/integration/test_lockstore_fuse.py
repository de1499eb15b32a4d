"""The lock directory on a FUSE file system (bindfs, a passthrough), where a directory removed
after it was opened is reported gone (ENOENT) instead of listed empty: every release then
makes an entry vanish under a polling waiter's feet. A vanishing entry is a normal event."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from lockstore_support import expect_line, kill, spawn

from lockyard.infra.lockstore import LockStore
from polling_support import wait_until_async

pytestmark = pytest.mark.skipif(
    shutil.which("bindfs") is None or not os.path.exists("/dev/fuse") or os.geteuid() != 0,
    reason="needs bindfs (Debian package bindfs), /dev/fuse and root to mount it",
)

ROUNDS = 30


@pytest.fixture
def fuse_dir(tmp_path: Path) -> Iterator[Path]:
    backing, mounted = tmp_path / "backing", tmp_path / "fuse"
    backing.mkdir()
    mounted.mkdir()
    subprocess.run(["bindfs", str(backing), str(mounted)], check=True, timeout=60)
    try:
        yield mounted
    finally:
        subprocess.run(["umount", "-l", str(mounted)], check=False, timeout=60)


def test_a_fuse_directory_lists_a_removed_directory_as_gone(fuse_dir: Path) -> None:
    """The file-system behaviour the store must live with (not a property of lockyard)."""
    (fuse_dir / "d").mkdir()
    fd = os.open(fuse_dir / "d", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rmdir(fuse_dir / "d")
        with pytest.raises(FileNotFoundError):
            os.listdir(fd)
    finally:
        os.close(fd)


async def _wait_through_a_release(store: LockStore, holder: subprocess.Popen[str]) -> bool:
    """Queue for the lock `holder` holds, let it release, and report whether we got it."""
    granted: list[bool] = []
    queued = anyio.Event()

    async def wait() -> None:
        granted.append(await store.acquire_async("a.py", "me", 60, 1))

    async def release_once_queued() -> None:
        await wait_until_async(lambda: store.waiters("a.py"), "me queued for a.py")
        queued.set()
        assert holder.stdin is not None
        holder.stdin.write("release\n")
        holder.stdin.flush()

    async with anyio.create_task_group() as group:
        group.start_soon(wait)
        group.start_soon(release_once_queued)
    return queued.is_set() and granted == [True]


def test_a_polling_waiter_gets_the_lock_at_each_release_on_fuse(repo: Path, fuse_dir: Path) -> None:
    lock_dir = fuse_dir / "locks"
    store = LockStore(repo, lock_dir, use_inotify=False)  # FUSE: no events from elsewhere
    holder = spawn(repo, lock_dir, "a.py", "holder", "wait-hold")
    assert holder.stdin is not None
    try:
        for round_ in range(ROUNDS):
            if round_:
                holder.stdin.write("again\n")  # one holder process takes the lock each round
                holder.stdin.flush()
            expect_line(holder, "waiting")
            expect_line(holder, "acquired")
            assert anyio.run(_wait_through_a_release, store, holder)
            expect_line(holder, "released")
            assert store.release("a.py", "me")
    finally:
        kill(holder)
