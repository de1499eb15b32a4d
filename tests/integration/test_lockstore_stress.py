"""Many processes x thousands of critical sections on a few shared files, then with SIGKILLs.

Every critical section appends one line `<agent> <seq>` to a shared file by read-modify-write,
so a lost update shows as a missing line, and drops a marker that a second live holder would
find (an overlap). Sizes keep the file around half a minute on 2 busy cores.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from lockstore_support import expect_line, kill, read_edits, spawn_worker

from lockyard.infra.lockstore import LockStore

FILES = 3


def _prepare(tmp_path: Path) -> tuple[Path, Path, Path]:
    repo, lock_dir, data = tmp_path / "repo", tmp_path / "locks", tmp_path / "data"
    repo.mkdir()
    data.mkdir()
    for n in range(FILES):
        (data / f"shared-{n}.txt").write_text("")
    return repo, lock_dir, data


@pytest.mark.slow
def test_stress_no_lost_updates_and_no_overlaps(tmp_path: Path) -> None:
    repo, lock_dir, data = _prepare(tmp_path)
    processes, iterations = 4, 1000
    workers = [
        spawn_worker(repo, lock_dir, data, f"worker-{n}", iterations, FILES)
        for n in range(processes)
    ]
    for worker in workers:
        expect_line(worker, "started")
    for worker in workers:
        expect_line(worker, "done")
        assert worker.wait() == 0
    assert not (data / "overlaps").exists()
    edits = read_edits(data, FILES)
    assert edits == {f"worker-{n}": list(range(iterations)) for n in range(processes)}
    store = LockStore(repo, lock_dir)
    assert store.list_locks() == []
    assert store.snapshot().waits == ()


@pytest.mark.slow
def test_chaos_sigkilled_holders_are_reclaimed_and_nothing_overlaps(tmp_path: Path) -> None:
    repo, lock_dir, data = _prepare(tmp_path)
    rng = random.Random(7)
    survivors, iterations, kills = 3, 400, 8
    workers = [
        spawn_worker(repo, lock_dir, data, f"survivor-{n}", iterations, FILES)
        for n in range(survivors)
    ]
    for worker in workers:
        expect_line(worker, "started")
    killed: list[str] = []
    for n in range(kills):
        # Victims linger in their critical sections, so a kill usually hits a holder.
        victim = spawn_worker(repo, lock_dir, data, f"doomed-{n}", 100_000, FILES, 0.01)
        expect_line(victim, "started")
        time.sleep(rng.uniform(0.02, 0.2))
        kill(victim)
        killed.append(f"doomed-{n}")
    for worker in workers:
        expect_line(worker, "done")
        assert worker.wait() == 0
    assert not (data / "overlaps").exists()
    edits = read_edits(data, FILES)
    for n in range(survivors):
        assert edits[f"survivor-{n}"] == list(range(iterations))
    for agent in killed:  # a killed agent's edits are a gap-free prefix: none was lost
        seqs = edits.get(agent, [])
        assert seqs == list(range(len(seqs)))
    reclaimed_log = data / "reclaimed"
    during_run = reclaimed_log.read_text().split() if reclaimed_log.exists() else []
    store = LockStore(repo, lock_dir)
    leftovers = [r.holder.agent_id for r in store.reclaim_stale()]  # nobody needed them since
    assert during_run + leftovers, "no killed holder's lock was reclaimed: the run tested nothing"
    assert set(during_run + leftovers) <= set(killed)
    assert store.list_locks() == []
    assert store.snapshot().waits == ()


@pytest.mark.slow
@pytest.mark.parametrize("use_inotify", [True, False])
@pytest.mark.anyio
async def test_many_tasks_in_one_process_never_overlap_and_never_stall(
    tmp_path: Path, use_inotify: bool
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    # Several stores on one directory: tasks of one process, and "processes" among themselves.
    stores = [LockStore(repo, tmp_path / "locks", use_inotify=use_inotify) for _ in range(3)]
    inside: dict[str, str | None] = {"a.py": None, "b.py": None}
    counts = {"a.py": 0, "b.py": 0}
    overlaps: list[str] = []

    async def agent(n: int) -> None:
        store = stores[n % len(stores)]
        me = f"task-{n}"
        for i in range(40):
            name = "a.py" if (n + i) % 3 else "b.py"
            assert await store.acquire_async(name, me, timeout_seconds=60, poll_interval_ms=5)
            if inside[name] is not None:
                overlaps.append(f"{me} entered {name} held by {inside[name]}")
            inside[name] = me
            value = counts[name]
            # Let every other task run inside the critical section.
            await anyio.lowlevel.checkpoint()
            counts[name] = value + 1
            inside[name] = None
            assert store.release(name, me)

    with anyio.fail_after(120):
        async with anyio.create_task_group() as group:
            for n in range(12):
                group.start_soon(agent, n)
    assert overlaps == []
    assert sum(counts.values()) == 12 * 40
    assert stores[0].list_locks() == []
    assert stores[0].snapshot().waits == ()
