"""Glob locks on both backends (a real lock directory, a real PostgreSQL server):
`src/api/**/*.py` covers every file it matches (created later too) and overlaps directories
and globs by their literal directories, in both directions; waits keep their turn, time out
and cancel leaving nothing; a SIGKILLed holder is taken back; a deadlock through a glob is
found and named; the guards honour globs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from lockstore_support import expect_line, kill, spawn

from lock_dir_listing import leftovers
from lockyard.domain.monitor import DeadlockMonitor
from lockyard.infra.crossproc.state import WaitForSnapshot
from lockyard.infra.hooks.shell_guard.decide import decide_shell_command
from lockyard.infra.hooks.write_guard.decide import judge_write
from lockyard.infra.lockstore import (
    InvalidPathError,
    LockStore,
    PathOutsideRepoError,
    open_backend,
)
from lockyard.infra.lockstore.backend import LockBackend
from lockyard.infra.tools.lock_look import lock_look
from lockyard.infra.tools.lock_tools import LockTools
from polling_support import wait_until_async

ACQUIRE = "lock_acquire"
GLOB = "src/api/**/*.py"
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


@pytest.fixture
def dir_store(tree: Path, lock_dir: Path) -> LockStore:
    """A lock directory's store, for what only it does (the keys are the checkout's, alike)."""
    return LockStore(tree, lock_dir)


def test_a_glob_key_resolves_its_directory_and_keeps_its_pattern(dir_store: LockStore) -> None:
    store = dir_store
    for spelling in (GLOB, "./src/../src/api/**/*.py", "api-link/**/*.py", "src//api/**/*.py"):
        assert store.canonicalize(spelling) == GLOB, spelling
    assert store.canonicalize("**/*.md") == "**/*.md"  # from the checkout's root
    assert store.canonicalize(f"{store.root}/src/*.py") == "src/*.py"
    refusals = {
        "!src/*.py": "negated",
        "src/*/": "trailing slash",
        "src/\\*.py": "no escapes",
        "src/*/../x.py": "components",
        "src/api/a.py/*.py": "is a file",
    }
    for text, why in refusals.items():
        with pytest.raises(InvalidPathError, match=why):
            store.canonicalize(text)
    with pytest.raises(PathOutsideRepoError, match="inside the repository only"):
        store.canonicalize("../*.py")


def test_brackets_are_literal_so_a_route_directory_is_a_file_key_a_glob_matches(
    store: LockBackend, tree: Path
) -> None:
    (tree / "app" / "[id]").mkdir(parents=True)
    assert store.canonicalize("app/[id]/page.tsx") == "app/[id]/page.tsx"
    assert store.canonicalize("app/[id]/") == "app/[id]/"
    assert store.try_lock("app/[id]/*.tsx", "ann")
    assert not store.try_lock("app/[id]/page.tsx", "bob")
    assert store.try_lock("app/i/page.tsx", "bob")  # no [class]: [id] is no wildcard


def test_a_glob_covers_the_files_it_matches_and_overlaps_by_directory_both_ways(
    store: LockBackend,
) -> None:
    assert store.try_lock(GLOB, "ann")
    for covered in ("src/api/a.py", "src/api/later/new.py", "api-link/deep/b.py"):
        assert not store.try_lock(covered, "bob"), covered
        assert not store.try_lock(covered, "bob", mode="shared"), covered
    for overlapping in ("src/", "src/api/", "src/api/deep/", "src/**/*.md", "src/api/*.txt"):
        assert not store.try_lock(overlapping, "bob"), overlapping
    for beside in ("src/api/a.txt", "src/b.py", "docs/", "docs/*.py", "src/apix/*.py"):
        assert store.try_lock(beside, "bob"), beside
    assert store.try_lock("src/api/a.py", "ann")  # under one's own glob
    for agent in ("ann", "bob"):
        store.cleanup_agent_locks(agent)
    assert store.try_lock("src/api/deep/c.py", "bob")  # now bob holds a file it matches
    assert not store.try_lock(GLOB, "ann")
    assert not store.try_lock("**/*.py", "ann")
    assert store.try_lock("**/*.md", "ann")  # matches no file bob holds
    assert not store.try_lock("docs/x.md", "bob")
    for agent in ("ann", "bob"):
        store.cleanup_agent_locks(agent)
    assert leftovers(store) == []


def test_shared_globs_admit_readers_and_exclude_writers(store: LockBackend) -> None:
    assert store.try_lock(GLOB, "ann", mode="shared")
    assert store.try_lock("src/**/*.py", "bob", mode="shared")
    assert store.try_lock("src/api/a.py", "cid", mode="shared")
    assert sorted(store.readers(GLOB)) == ["ann"]
    assert not store.try_lock("src/api/a.py", "dan")
    assert not store.try_lock("src/api/*.py", "dan")
    assert not store.try_lock("src/", "dan")
    assert store.try_lock("src/api/a.txt", "dan")  # not matched


async def test_waits_keep_their_turn_through_a_glob_and_a_glob_waits_for_what_it_matches(
    store: LockBackend,
) -> None:
    assert store.try_lock(GLOB, "ann")
    order: list[str] = []

    async def wait(path: str, agent: str) -> None:
        assert await store.acquire_async(path, agent, 60, 10)
        order.append(agent)

    async with anyio.create_task_group() as group:
        group.start_soon(wait, "src/api/a.py", "bob")
        await wait_until_async(lambda: [w.agent_id for w in store.waiters(GLOB)] == ["bob"])
        group.start_soon(wait, "src/api/*.py", "cid")
        await wait_until_async(lambda: len(store.waiters(GLOB)) == 2)
        assert store.release(GLOB, "ann")
        await wait_until_async(lambda: order == ["bob"])
        await wait_until_async(lambda: store.holder("src/api/*.py") == "cid")  # waits for bob
        assert order == ["bob"]
        assert store.release("src/api/a.py", "bob")
    assert order == ["bob", "cid"]
    assert store.release("src/api/*.py", "cid")
    assert leftovers(store) == []


async def test_asking_again_for_a_held_glob_or_directory_keeps_it_whatever_else_waits(
    store: LockBackend,
) -> None:
    """A second acquire of what one holds answers at once (it waited in its own line, and
    its timeout or cancellation gave the first grant back)."""
    for key in (GLOB, "src/api/"):
        assert store.try_lock(key, "ann")
        async with anyio.create_task_group() as group:
            group.start_soon(store.acquire_async, "src/api/a.py", "bob", 60, 10)
            await wait_until_async(lambda: len(store.waiters(key)) == 1)  # noqa: B023
            assert await store.acquire_async(key, "ann", 0.05)
            assert store.holder(key) == "ann"
            group.cancel_scope.cancel()
        assert store.release(key, "ann")


async def test_a_cancelled_or_timed_out_wait_for_a_glob_leaves_nothing(store: LockBackend) -> None:
    assert store.try_lock("src/api/a.py", "ann")
    assert not store.acquire(GLOB, "bob", timeout_seconds=0.05, poll_interval_ms=10)
    assert not store.acquire("src/*/*.py", "bob", timeout_seconds=0.05, mode="shared")
    async with anyio.create_task_group() as group:
        group.start_soon(store.acquire_async, GLOB, "bob", 60, 10)
        await wait_until_async(lambda: store.holder(GLOB) == "bob")  # waiting for ann's file
        group.cancel_scope.cancel()
    assert store.holder(GLOB) is None
    assert store.try_lock("src/api/b.py", "cid")  # nothing of bob's is left in the way
    for agent in ("ann", "cid"):
        store.cleanup_agent_locks(agent)
    assert leftovers(store) == []


def test_overlapping_globs_taken_at_once_from_threads_never_wait_for_each_other(
    store: LockBackend,
) -> None:
    """Same literal directory, nested ones, a file: one order (`scope_keys.is_above`)."""
    keys = ["src/api/*.py", "src/api/a*", "src/**/*.py", "src/api/a.py", "src/api/"]
    inside: list[str] = []
    guard = threading.Lock()
    failures: list[str] = []

    def work(agent: str, key: str) -> None:
        for _ in range(15):
            if not store.acquire(key, agent, timeout_seconds=30, poll_interval_ms=5):
                failures.append(f"{agent} timed out on {key}")
                return
            with guard:
                inside.append(agent)
                if len(inside) > 1:
                    failures.append(f"{inside} at once")
            with guard:
                inside.remove(agent)
            assert store.release(key, agent)

    threads = [
        threading.Thread(target=work, args=(f"agent-{i}", key)) for i, key in enumerate(keys)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_a_sigkilled_holder_of_a_glob_is_taken_back(
    tree: Path, store: LockBackend, backend_spec: str
) -> None:
    """By proof of its death on the lock directory, with its database session on PostgreSQL."""
    holder = spawn(tree, backend_spec, GLOB, "ann", "hold")
    expect_line(holder, "locked")
    assert not store.try_lock("src/api/a.py", "bob")
    kill(holder)
    assert store.acquire("src/api/a.py", "bob", timeout_seconds=30)
    holder = spawn(tree, backend_spec, "src/api/deep/x.py", "ann", "hold")
    expect_line(holder, "locked")
    assert not store.try_lock("src/**/*.py", "cid")
    kill(holder)
    assert store.release("src/api/a.py", "bob")
    assert store.acquire("src/**/*.py", "cid", timeout_seconds=30)
    assert store.release("src/**/*.py", "cid")
    store.reclaim_stale()  # the dead's glob goes from the index (PostgreSQL) or its mark
    assert leftovers(store) == []


async def test_a_deadlock_through_a_glob_is_found_and_names_the_glob(store: LockBackend) -> None:
    assert store.try_lock(GLOB, "ann")
    assert store.try_lock("docs/guide.md", "bob")
    async with anyio.create_task_group() as group:
        group.start_soon(store.acquire_async, "src/api/a.py", "bob", 60, 10)
        await wait_until_async(lambda: len(store.waiters(GLOB)) == 1)
        group.start_soon(store.acquire_async, "docs/guide.md", "ann", 60, 10)
        await wait_until_async(lambda: len(store.waiters("docs/guide.md")) == 1)
        snapshot = WaitForSnapshot.from_store_snapshot(store.snapshot())
        monitor = DeadlockMonitor(verify_cycle=snapshot.has_cycle)
        monitor.rebuild(snapshot.holders(), snapshot.wait_pairs())
        [deadlock] = await monitor.check_all()
        named = {step.lock_path.rpartition("::")[2] for step in deadlock.cycle}
        assert named == {GLOB, "docs/guide.md"}
        group.cancel_scope.cancel()


async def test_a_glob_waiting_for_a_file_it_matches_is_an_edge_and_guards_nothing_yet(
    store: LockBackend, tree: Path
) -> None:
    assert store.try_lock("src/api/a.py", "ann")
    async with anyio.create_task_group() as group:
        group.start_soon(store.acquire_async, "src/**/*.py", "bob", 60, 10)
        await wait_until_async(lambda: store.holder("src/**/*.py") == "bob")
        assert ("bob", "src/api/a.py") in store.snapshot().waits
        # Not granted yet: the files it matches that nobody holds are not bob's to write.
        reason = judge_write(store, "bob", str(tree / "src" / "new.py"), str(tree), ACQUIRE)[0]
        assert reason is not None
        assert "Your lock of src/**/*.py is not granted yet: it waits for ann" in reason
        group.cancel_scope.cancel()


def test_the_guards_honour_globs(store: LockBackend, tree: Path) -> None:
    path = str(tree / "src" / "api" / "deep" / "new.py")
    assert store.try_lock(GLOB, "ann")
    assert judge_write(store, "ann", path, str(tree), ACQUIRE)[0] is None  # created later too
    reason = judge_write(store, "bob", path, str(tree), ACQUIRE)[0]
    assert reason is not None
    assert f"matches the glob {GLOB}, which is locked by agent ann" in reason
    other = str(tree / "src" / "api" / "notes.txt")
    assert judge_write(store, "ann", other, str(tree), ACQUIRE)[0] is not None  # not matched
    refused = decide_shell_command("rm src/api/a.py", tree, "bob", store)
    assert not refused.allowed
    assert f"matching the glob {GLOB}" in (refused.reason or "")
    assert decide_shell_command("rm src/api/a.py", tree, "ann", store).allowed
    assert store.release(GLOB, "ann")
    assert store.try_lock(GLOB, "ann", mode="shared")  # a reader's glob: no writes
    assert judge_write(store, "ann", path, str(tree), ACQUIRE)[0] is not None


async def test_lock_acquire_and_lock_status_take_a_glob(store: LockBackend) -> None:
    ann = LockTools(store, "ann")
    outcome = await ann.acquire({"filepaths": [GLOB, "docs/x.md"], "timeout_seconds": 0})
    assert outcome.data is not None, outcome.text
    assert outcome.data["all_acquired"] is True
    refused = await LockTools(store, "bob").acquire(
        {"filepaths": ["api-link/a.py"], "timeout_seconds": 0}
    )
    assert refused.data is not None
    assert refused.data["all_acquired"] is False
    assert refused.data["results"][0]["blocked_by"] == [f"{GLOB} held by ann"]
    looked = lock_look(store, "bob", store.canonicalize("api-link/**/*.py"))
    assert [entry["agent"] for entry in looked["held_by"]] == ["ann"]
    assert looked["would_be_granted"] is False
    # A file the glob matches, and a directory over it: the glob is what overlaps them.
    locks = store.list_locks()
    under = lock_look(store, "bob", "src/api/v1/a.py", locks=locks)
    assert [(o["filepath"], o["where"]) for o in under["overlapping"]] == [(GLOB, "above")]
    assert under["would_be_granted"] is False
    over = lock_look(store, "bob", "src/", locks=locks)
    assert [(o["filepath"], o["where"]) for o in over["overlapping"]] == [(GLOB, "below")]
    assert lock_look(store, "bob", "src/api/a.md", locks=locks)["would_be_granted"] is True
    await ann.release({"all": True})
    assert leftovers(store) == []
