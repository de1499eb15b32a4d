"""Directory locks on both backends (a real lock directory, a real PostgreSQL server):
`src/api/` covers every file and directory under it (created later too) in both directions,
through symlinks and `..`; waits keep their turn, time out and cancel leaving nothing; a
SIGKILLed holder is taken back (by proof of death, or with its database session); a deadlock
through a directory is found and named."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest
from lockstore_support import expect_line, kill, spawn, tell

from lock_dir_listing import leftovers
from lockyard.domain.monitor import DeadlockMonitor
from lockyard.infra.agentcli.lockdir_reader import LockDirReader
from lockyard.infra.crossproc.state import WaitForSnapshot
from lockyard.infra.hooks.commit_guard.decide import unlocked_files
from lockyard.infra.hooks.shell_guard.decide import decide_shell_command
from lockyard.infra.hooks.write_guard.decide import judge_write
from lockyard.infra.lockstore import InvalidPathError, LockStore, open_backend
from lockyard.infra.lockstore.backend import LockBackend
from lockyard.infra.tools.lock_tools import LockTools
from lockyard.infra.transports.ipc.guard_check import check_locks
from polling_support import wait_until, wait_until_async

ACQUIRE = "lock_acquire"
pytestmark = pytest.mark.anyio


@pytest.fixture
def tree(repo: Path) -> Path:
    (repo / "src" / "api" / "deep").mkdir(parents=True)
    (repo / "src" / "api" / "a.py").write_text("")
    (repo / "docs").mkdir()
    (repo / "api-link").symlink_to(repo / "src" / "api")
    return repo


@pytest.fixture
def store(tree: Path, backend_spec: str) -> Iterator[LockBackend]:
    """A store on each backend in turn."""
    opened = open_backend(tree, backend_spec)
    yield opened
    opened.close()


def test_a_directory_key_ends_with_a_slash_whatever_the_spelling(store: LockBackend) -> None:
    for spelling in ("src/api/", "src/api//", "./src/../src/api/", "api-link/", "src/api/deep/../"):
        assert store.canonicalize(spelling) == "src/api/"
    assert store.canonicalize("src/not-yet/") == "src/not-yet/"  # may be created later
    with pytest.raises(InvalidPathError, match="drop the slash"):
        store.canonicalize("src/api/a.py/")


def test_a_directory_lock_covers_every_file_and_directory_under_it_both_ways(
    store: LockBackend,
) -> None:
    assert store.try_lock("src/api/", "ann")
    for under in ("src/api/a.py", "src/api/later/new.py", "api-link/a.py", "src/api/deep/"):
        assert not store.try_lock(under, "bob"), under
        assert not store.try_lock(under, "bob", mode="shared"), under
    for over in ("src/", "src/api/"):
        assert not store.try_lock(over, "bob"), over
    assert store.try_lock("src/other.py", "bob")  # beside it: free
    assert store.try_lock("src/api-2/x.py", "bob")  # a sibling sharing a name prefix
    assert store.try_lock("src/api/a.py", "ann")  # under one's own directory lock
    assert store.release("src/api/", "ann")
    assert store.release("src/api/a.py", "ann")
    assert store.try_lock("src/api/deep/b.py", "bob")  # now bob holds something under it
    assert not store.try_lock("src/api/", "ann")
    assert not store.try_lock("src/", "ann")
    assert not store.try_lock("src/", "ann", mode="shared")
    assert store.try_lock("docs/", "ann")
    for agent in ("ann", "bob"):
        store.cleanup_agent_locks(agent)
    assert leftovers(store) == []


def test_shared_directory_holds_admit_readers_and_exclude_writers(store: LockBackend) -> None:
    assert store.try_lock("src/api/", "ann", mode="shared")
    assert store.try_lock("src/", "bob", mode="shared")  # readers over readers
    assert store.try_lock("src/api/a.py", "cid", mode="shared")
    assert sorted(store.readers("src/api/")) == ["ann"]
    assert not store.try_lock("src/api/a.py", "dan")  # a write under readers
    assert not store.try_lock("src/api/deep/", "dan")
    assert not store.try_lock("src/api/", "dan")
    assert store.release("src/", "bob")
    assert store.release("src/api/a.py", "cid")
    assert store.try_lock("src/api/a.py", "ann")  # ann reads the directory alone: she may write
    assert not store.try_lock("src/", "bob", mode="shared")  # ann's write under it now


async def test_waits_under_a_directory_keep_their_turn_and_a_wait_for_a_directory_waits_for_holds(
    store: LockBackend,
) -> None:
    assert store.try_lock("src/api/", "ann")
    order: list[str] = []

    async def wait(path: str, agent: str) -> None:
        assert await store.acquire_async(path, agent, 60, 10)
        order.append(agent)

    async with anyio.create_task_group() as group:
        group.start_soon(wait, "src/api/a.py", "bob")
        await wait_until_async(lambda: [w.agent_id for w in store.waiters("src/api/")] == ["bob"])
        group.start_soon(wait, "src/api/", "cid")
        await wait_until_async(lambda: len(store.waiters("src/api/")) == 2)
        assert store.release("src/api/", "ann")
        await wait_until_async(lambda: order == ["bob"])
        await wait_until_async(lambda: store.holder("src/api/") == "cid")  # waits for bob's file
        assert order == ["bob"]
        assert store.release("src/api/a.py", "bob")
    assert order == ["bob", "cid"]
    assert store.release("src/api/", "cid")
    assert leftovers(store) == []


async def test_a_directory_waiting_for_holds_under_it_is_woken_when_the_last_one_goes(
    tree: Path, store: LockBackend, backend_spec: str
) -> None:
    holder = spawn(tree, backend_spec, "src/api/a.py", "bob", "hold")
    expect_line(holder, "locked")
    granted = anyio.Event()

    async def take_directory() -> None:  # a poll interval no test waits out: woken by push
        assert await store.acquire_async("src/api/", "ann", 60, 30_000)
        granted.set()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(take_directory)
            await wait_until_async(lambda: store.holder("src/api/") == "ann")  # bob's turn
            tell(holder, "release")
            expect_line(holder, "released")
            with anyio.fail_after(10):  # by inotify on the lock directory, or by NOTIFY
                await granted.wait()
    finally:
        kill(holder)
    assert store.release("src/api/", "ann")
    assert leftovers(store) == []


async def test_a_cancelled_or_timed_out_wait_for_a_directory_leaves_nothing(
    store: LockBackend,
) -> None:
    assert store.try_lock("src/api/a.py", "ann")
    assert not store.acquire("src/", "bob", timeout_seconds=0.05, poll_interval_ms=10)
    assert not store.acquire("src/api/", "bob", timeout_seconds=0.05, mode="shared")
    async with anyio.create_task_group() as group:
        group.start_soon(store.acquire_async, "src/", "bob", 60, 10)
        await wait_until_async(lambda: store.holder("src/") == "bob")  # waiting for ann's file
        group.cancel_scope.cancel()
    assert store.holder("src/") is None
    assert store.try_lock("src/api/b.py", "cid")  # nothing of bob's is left in the way
    for agent in ("ann", "cid"):
        store.cleanup_agent_locks(agent)
    assert leftovers(store) == []


def waits_or_holds(store: LockBackend, agent: str, keys: tuple[str, ...]) -> bool:
    """Whether `agent` stands in the line of one of `keys`, or holds the last one (a directory
    holding its line while it waits for the holds under it)."""
    lines = [waiter.agent_id for key in keys for waiter in store.waiters(key)]
    return agent in lines or store.holder(keys[-1]) == agent


def test_a_sigkilled_holder_of_a_directory_or_of_a_file_under_it_is_taken_back(
    tree: Path, store: LockBackend, backend_spec: str
) -> None:
    """Each wait is queued before its holder dies (so the waiter finds the death itself, at a
    liveness re-check): in the directory's line, as a directory waiting for a file under it,
    and in a file's own line under a directory."""
    for held, wanted in (
        ("src/api/", "src/api/a.py"),
        ("src/api/deep/x.py", "src/"),
        ("src/api/b.py", "src/api/b.py"),
    ):
        holder = spawn(tree, backend_spec, held, "ann", "hold")
        expect_line(holder, "locked")
        assert not store.try_lock(wanted, "bob")
        with ThreadPoolExecutor(1) as pool:
            waited = pool.submit(store.acquire, wanted, "bob", 30)
            wait_until(functools.partial(waits_or_holds, store, "bob", (held, wanted)))
            kill(holder)
            assert waited.result(60), (held, wanted)
        assert store.holder(wanted) == "bob"
        assert store.release(wanted, "bob")
    assert store.try_lock("src/", "cid")


async def test_a_deadlock_through_a_directory_lock_is_found_and_names_the_directory(
    store: LockBackend,
) -> None:
    assert store.try_lock("src/api/", "ann")
    assert store.try_lock("docs/guide.md", "bob")
    async with anyio.create_task_group() as group:
        group.start_soon(store.acquire_async, "src/api/a.py", "bob", 60, 10)
        await wait_until_async(lambda: len(store.waiters("src/api/")) == 1)
        group.start_soon(store.acquire_async, "docs/guide.md", "ann", 60, 10)
        await wait_until_async(lambda: len(store.waiters("docs/guide.md")) == 1)
        snapshot = WaitForSnapshot.from_store_snapshot(store.snapshot())
        monitor = DeadlockMonitor(verify_cycle=snapshot.has_cycle)
        monitor.rebuild(snapshot.holders(), snapshot.wait_pairs())
        [deadlock] = await monitor.check_all()
        named = {step.lock_path.rpartition("::")[2] for step in deadlock.cycle}
        assert named == {"src/api/", "docs/guide.md"}
        group.cancel_scope.cancel()


async def test_a_directory_waiting_for_a_hold_under_it_is_an_edge_of_the_wait_for_graph(
    store: LockBackend,
) -> None:
    assert store.try_lock("src/api/a.py", "ann")
    async with anyio.create_task_group() as group:
        group.start_soon(store.acquire_async, "src/", "bob", 60, 10)
        await wait_until_async(lambda: store.holder("src/") == "bob")
        assert ("bob", "src/api/a.py") in store.snapshot().waits
        group.cancel_scope.cancel()


async def test_a_draining_shared_directory_waits_only_for_the_writes_below_it_and_keeps_its_edges(
    store: LockBackend,
) -> None:
    """cid asks to read src/ while ann writes src/api/a.py and rob reads src/b.py: cid waits
    for ann alone (a read waits for no read), even while it also waits for dan elsewhere.
    So rob, waiting for cid, closes no cycle; ann, waiting for cid, closes a real one."""
    assert store.try_lock("src/api/a.py", "ann")
    assert store.try_lock("src/b.py", "rob", mode="shared")
    assert store.try_lock("docs/x.md", "cid")
    assert store.try_lock("docs/y.md", "dan")

    async def deadlocks() -> list[set[str]]:
        snapshot = WaitForSnapshot.from_store_snapshot(store.snapshot())
        monitor = DeadlockMonitor(verify_cycle=snapshot.has_cycle)
        monitor.rebuild(snapshot.holders(), snapshot.wait_pairs())
        found = await monitor.check_all()
        return [{step.lock_path.rpartition("::")[2] for step in info.cycle} for info in found]

    async with anyio.create_task_group() as group:
        group.start_soon(
            functools.partial(store.acquire_async, "src/", "cid", 60, 10, mode="shared")
        )
        group.start_soon(store.acquire_async, "docs/y.md", "cid", 60, 10)
        group.start_soon(store.acquire_async, "docs/x.md", "rob", 60, 10)
        await wait_until_async(
            lambda: (
                ("cid", "src/api/a.py") in store.snapshot().waits
                and len(store.waiters("docs/y.md")) == 1
                and len(store.waiters("docs/x.md")) == 1
            )
        )
        waits = store.snapshot().waits
        assert ("cid", "src/b.py (shared by rob)") not in waits
        assert ("cid", "docs/y.md") in waits
        assert await deadlocks() == []
        group.start_soon(store.acquire_async, "docs/x.md", "ann", 60, 10)
        await wait_until_async(lambda: len(store.waiters("docs/x.md")) == 2)
        assert await deadlocks() == [{"src/api/a.py", "docs/x.md"}]
        group.cancel_scope.cancel()


def test_the_marks_make_file_locks_look_only_while_a_directory_is_held_or_wanted(
    tree: Path, lock_dir: Path
) -> None:
    store = LockStore(tree, lock_dir)
    assert store.try_lock("src/api/a.py", "ann")
    assert "scopes" not in os.listdir(lock_dir)
    assert not store.try_lock("src/", "bob")  # refused: its mark went with the request
    assert "scopes" not in os.listdir(lock_dir)
    assert store.try_lock("docs/", "bob")
    assert store.try_lock("docs/", "bob", mode="shared")  # held already: still one mark
    assert len(os.listdir(lock_dir / "scopes")) == 1
    assert store.release("docs/", "bob")
    assert "scopes" not in os.listdir(lock_dir)


def test_the_write_and_shell_guards_honour_directory_locks_both_ways(
    store: LockBackend, tree: Path
) -> None:
    path = str(tree / "src" / "api" / "new.py")
    assert store.try_lock("src/api/", "ann")
    assert judge_write(store, "ann", path, str(tree), ACQUIRE)[0] is None  # created later too
    reason = judge_write(store, "bob", path, str(tree), ACQUIRE)[0]
    assert reason is not None
    assert "under the directory src/api/, which is locked by agent ann" in reason
    for command in ("ruff format src/api", "mkdir -p src/api/x", "rm -r src/api/deep"):
        assert decide_shell_command(command, tree, "ann", store).allowed, command
        refused = decide_shell_command(command, tree, "bob", store)
        assert not refused.allowed, command
    # A removed tree is asked for as the directory, not as it and each of its files.
    assert '{"filepaths": ["src/api/deep/"]}' in str(refused.reason)
    (tree / "src" / "other.py").write_text("")
    assert not decide_shell_command("ruff format src", tree, "ann", store).allowed  # src/ is more
    assert store.release("src/api/", "ann")
    assert store.try_lock("src/api/", "bob", mode="shared")  # a reader's directory: no writes
    assert store.try_lock("src/api/", "ann", mode="shared")
    assert judge_write(store, "ann", path, str(tree), ACQUIRE)[0] is not None


def test_a_write_under_a_revoked_directory_lock_is_refused_with_the_revocations_reason(
    store: LockBackend, tree: Path, backend_spec: str
) -> None:
    assert store.try_lock("src/api/", "ann")
    operator = open_backend(tree, backend_spec)
    try:
        assert operator.revoke("ann", "stalled for 50 min") == ["src/api/"]
    finally:
        operator.close()
    path = str(tree / "src" / "api" / "new.py")  # nobody's lock covers it now
    reason = judge_write(store, "ann", path, str(tree), ACQUIRE)[0]
    assert str(reason).startswith("revoked: stalled for 50 min"), reason
    assert '{"filepaths": ["src/api/"]}' in str(reason)
    refused = decide_shell_command("touch src/api/new.py", tree, "ann", store)
    assert not refused.allowed
    assert "stalled for 50 min" in str(refused.reason)
    [lost] = store.take_lost_locks("ann")  # told: from now on, simply not locked
    assert lost.filepath == "src/api/"
    assert "not locked by you" in str(judge_write(store, "ann", path, str(tree), ACQUIRE)[0])


async def test_a_directory_lock_still_draining_lets_its_holder_write_nothing_under_it(
    store: LockBackend, tree: Path, lock_dir: Path
) -> None:
    """bob's lock of src/ holds its line while it waits for ann's src/api/a.py: until it is
    granted (its acquire may still time out), no guard lets bob write under src/, not even a
    file nobody holds; the agent CLI hooks' reader and a sandbox host's answer say the same.
    Once ann has released, bob may."""
    assert store.try_lock("src/api/a.py", "ann")
    new, root = str(tree / "src" / "new.py"), str(tree)
    guards = [store] if not isinstance(store, LockStore) else [store, LockDirReader(tree, lock_dir)]
    granted = anyio.Event()

    async def take_src() -> None:
        assert await store.acquire_async("src/", "bob", 60, 10)
        granted.set()

    async with anyio.create_task_group() as group:
        group.start_soon(take_src)
        await wait_until_async(lambda: store.holder("src/") == "bob")
        for guard in guards:
            reason = judge_write(guard, "bob", new, root, ACQUIRE)[0]
            assert reason is not None
            assert "Your lock of src/ is not granted yet: it waits for ann" in reason
            for command in ("touch src/new.py", "rm -r src/api/deep", "ruff format src"):
                refused = decide_shell_command(command, tree, "bob", guard)
                assert not refused.allowed, command
                assert "waits for ann" in (refused.reason or ""), command
            assert unlocked_files(guard, "bob", ["src/new.py"]) == [("src/new.py", "bob")]
        [answer] = [a for a in check_locks(store, "bob", ["src/"]) if a["path"] == "src/"]
        assert answer["below"] == "ann"
        assert store.release("src/api/a.py", "ann")
        with anyio.fail_after(30):
            await granted.wait()
    for guard in guards:
        assert judge_write(guard, "bob", new, root, ACQUIRE)[0] is None
        assert decide_shell_command("ruff format src", tree, "bob", guard).allowed
        assert unlocked_files(guard, "bob", ["src/new.py"]) == []
    assert store.release("src/", "bob")


async def test_lock_acquire_takes_a_directory(store: LockBackend) -> None:
    ann = LockTools(store, "ann")
    outcome = await ann.acquire({"filepaths": ["src/api/", "docs/x.md"], "timeout_seconds": 0})
    assert outcome.data is not None, outcome.text
    assert outcome.data["all_acquired"] is True
    refused = await LockTools(store, "bob").acquire(
        {"filepaths": ["api-link/a.py"], "timeout_seconds": 0}
    )
    assert refused.data is not None
    assert refused.data["all_acquired"] is False
    [entry] = refused.data["results"]  # the file's own lock is free: the result says who blocks
    assert (entry["holder"], entry["blocked_by"]) == (None, ["src/api/ held by ann"])
    await ann.release({"all": True})
    assert leftovers(store) == []
