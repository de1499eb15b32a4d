"""`snapshot()` reads the lock directory once: every queue one time, as `list_locks()` does."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from lockyard.infra.lockstore import LockStore
from polling_support import wait_until_async

pytestmark = pytest.mark.anyio


def count_queue_reads(store: LockStore) -> Counter[str]:
    reads: Counter[str] = Counter()
    read: Callable[[str], list[tuple[str, str]]] = store.directory.queues.queue_entries

    def counting(name: str) -> list[tuple[str, str]]:
        reads[name] += 1
        return read(name)

    store.directory.queues.queue_entries = counting  # type: ignore[method-assign]
    return reads


async def test_a_snapshot_reads_each_queue_once(repo: Path, lock_dir: Path) -> None:
    store = LockStore(repo, lock_dir)
    files = ["a.py", "b.py", "c.py"]
    for name in files:
        assert store.try_lock(name, "holder")
    async with anyio.create_task_group() as group:
        for name in files:
            group.start_soon(store.acquire_async, name, f"waiter-{name}", 60.0)
        await wait_until_async(
            lambda: len(store.snapshot().waits) >= len(files), "every waiter queued"
        )
        reads = count_queue_reads(store)
        snapshot = store.snapshot()
        assert sorted(snapshot.waits) == [
            (f"waiter-{name}", store.canonicalize(name)) for name in files
        ]
        assert len(reads) == len(files)
        assert set(reads.values()) == {1}
        reads.clear()
        assert len(store.list_locks()) == len(files)
        assert set(reads.values()) == {1}
        group.cancel_scope.cancel()
