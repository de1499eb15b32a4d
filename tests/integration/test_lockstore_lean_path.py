"""The uncontended lock path's shortcuts keep every guarantee of the full path.

`take` publishes at once when no queue exists (the rename fails while anybody holds the
lock), `release` of a key the store granted skips canonicalising it (the grant's token names
the lock), and the contract functions remember their store per arguments. Each shortcut is
checked here against the interleavings it could get wrong: a queued waiter, another store
(another process) cleaning up or reclaiming, a second spelling of the same file, a symlink
retargeted under a cached store, and real processes racing for one lock.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from lockstore_support import dead_pid, plant_holder

from lock_dir_listing import lock_dir_entries
from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.liveness import ProcessIdentity, current_process, new_token
from lockyard.infra.lockstore.lockdir import line
from lockyard.infra.lockstore.lockdir.disk import LOCK_SUFFIX
from lockyard.infra.lockstore.lockdir.operations import run
from lockyard.infra.lockstore.paths import lock_name
from lockyard.infra.lockstore.records import encode_waiter
from lockyard.infra.tools import locking
from stepped_waits import SteppedWait


def _queue_waiter(
    store: LockStore, filepath: str, agent: str, process: ProcessIdentity
) -> tuple[str, str]:
    """Put a waiter of `process` in the queue of `filepath`, as a waiting store would: its
    (entry, wait token)."""
    key = store.canonicalize(filepath)
    token = new_token()
    entry = store.directory.queues.enqueue(
        lock_name(store.namespace, key),
        token,
        lambda ticket: encode_waiter(
            process, agent, token, ticket, key, store.namespace, store.root
        ),
    )
    return entry, token


def _lock_entries(store: LockStore) -> list[str]:
    return sorted(entry for entry in os.listdir(store.lock_dir) if entry.endswith(LOCK_SUFFIX))


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> LockStore:
    return LockStore(repo, lock_dir)


def test_a_newcomer_does_not_pass_a_live_queued_waiter_at_a_free_lock(store: LockStore) -> None:
    _queue_waiter(store, "a.py", "first", current_process())
    assert not store.try_lock("a.py", "newcomer")
    assert not store.acquire("a.py", "newcomer", timeout_seconds=0)
    assert store.holder("a.py") is None
    assert _lock_entries(store) == []


def test_the_holder_keeps_its_grant_while_others_queue(store: LockStore) -> None:
    assert store.try_lock("a.py", "alice")
    [entry] = _lock_entries(store)
    token = os.listdir(store.lock_dir / entry)
    _queue_waiter(store, "a.py", "bob", current_process())
    assert store.try_lock("a.py", "alice")  # already hers: kept, not refused for the queue
    assert os.listdir(store.lock_dir / entry) == token  # the same grant, not a second one
    assert store.release("a.py", "alice")
    assert store.holder("a.py") is None


def test_a_held_lock_is_not_taken_over_and_leaves_no_staging(store: LockStore) -> None:
    assert store.try_lock("a.py", "alice")
    assert not store.try_lock("a.py", "bob")
    assert not LockStore(store.root, store.lock_dir).try_lock("a.py", "bob")
    no_cards = [e for e in lock_dir_entries(store.lock_dir) if not e.endswith(".card")]
    assert sorted(no_cards) == _lock_entries(store)  # no staging debris
    assert store.holder("a.py") == "alice"


def test_a_dead_holders_lock_is_reclaimed_by_the_first_try(store: LockStore) -> None:
    plant_holder(store, "a.py", "ghost", pid=dead_pid(), start_time=None)
    assert store.try_lock("a.py", "alice")
    assert store.holder("a.py") == "alice"


def test_a_lock_left_empty_in_mid_release_is_taken(store: LockStore) -> None:
    name = lock_name(store.namespace, store.canonicalize("a.py"))
    os.mkdir(store.lock_dir / f"{name}{LOCK_SUFFIX}")  # a releaser between unlink and rmdir
    assert store.try_lock("a.py", "alice")
    assert store.holder("a.py") == "alice"


@pytest.mark.parametrize("after_the_removal", [False, True])
def test_a_waiter_that_queues_after_the_releases_look_takes_the_lock_unrung(
    store: LockStore, monkeypatch: pytest.MonkeyPatch, after_the_removal: bool
) -> None:
    """A release drops its grant, then looks for a queue: finding none, it removes the lock
    and rings nobody. A waiter (of another store: another process) that queues after that
    look finds the lock empty (or gone) and takes it in its first round."""
    assert store.try_lock("a.py", "alice")
    other = LockStore(store.root, store.lock_dir)
    rounds: list[bool] = []
    free = store.operations.free

    def bob_queues_and_looks(lock: str) -> None:
        if after_the_removal:
            free(lock)
        rounds.append(SteppedWait(other, "bob", "a.py").look())  # queues, then looks once
        if not after_the_removal:
            free(lock)  # fails: bob's lock is in place

    monkeypatch.setattr(store.operations, "free", bob_queues_and_looks)
    assert store.release("a.py", "alice")
    assert rounds == [True]
    assert store.holder("a.py") == "bob"
    assert store.waiters("a.py") == []


def test_a_release_after_a_cleanup_and_a_new_grant_leaves_the_new_grant(
    store: LockStore,
) -> None:
    assert store.try_lock("a.py", "alice")
    other = LockStore(store.root, store.lock_dir)  # another process of the same user
    assert other.cleanup_agent_locks("alice") == ["a.py"]
    assert other.try_lock("a.py", "bob")
    assert not store.release("a.py", "alice")  # her grant is gone; bob's is not hers
    assert store.holder("a.py") == "bob"


def test_a_release_of_the_same_agents_grant_made_elsewhere_still_works(
    store: LockStore,
) -> None:
    assert store.try_lock("a.py", "alice")
    other = LockStore(store.root, store.lock_dir)
    assert other.cleanup_agent_locks("alice") == ["a.py"]
    assert other.try_lock("a.py", "alice")  # the agent's lock again, granted by the other
    assert store.release("a.py", "alice")  # the lock belongs to the agent id
    assert store.holder("a.py") is None


def test_each_spelling_of_a_file_releases_the_one_lock(store: LockStore, repo: Path) -> None:
    assert store.try_lock(str(repo / "src" / ".." / "a.py"), "alice")
    assert store.release("a.py", "alice")
    assert store.try_lock("a.py", "alice")
    assert store.release(str(repo / "a.py"), "alice")
    assert not store.release("a.py", "alice")  # released once, by whichever spelling
    assert store.holder("a.py") is None


def test_another_agent_cannot_release_through_the_granted_key(store: LockStore) -> None:
    assert store.try_lock("a.py", "alice")
    assert not store.release("a.py", "bob")
    assert store.holder("a.py") == "alice"


def test_bad_arguments_to_release_still_raise_clear_errors(store: LockStore) -> None:
    assert store.try_lock("a.py", "alice")
    with pytest.raises(ValueError, match="agent_id"):
        store.release("a.py", ["alice"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="filepath"):
        store.release(["a.py"], "alice")  # type: ignore[arg-type]
    assert store.holder("a.py") == "alice"


# -- the contract's remembered stores ------------------------------------------------------


@pytest.fixture
def checkouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("LOCKYARD_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.delenv("LOCKYARD_NAMESPACE", raising=False)
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    return one, two


def test_a_retargeted_repository_symlink_reaches_the_new_checkout(
    checkouts: tuple[Path, Path], tmp_path: Path
) -> None:
    one, two = checkouts
    link = tmp_path / "current"
    link.symlink_to(one)
    assert locking.get_store(str(link)).root == str(one)
    assert locking.try_lock("a.py", "alice", str(link))
    link.unlink()
    link.symlink_to(two)
    assert locking.get_store(str(link)).root == str(two)
    assert locking.try_lock("a.py", "bob", str(link))  # another repository's a.py
    assert locking.get_lock_holder("a.py", str(one)) == "alice"


def test_the_working_directory_picks_the_store_of_each_call(
    checkouts: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = checkouts
    monkeypatch.chdir(one)
    assert locking.get_store().root == str(one)
    monkeypatch.chdir(two)
    assert locking.get_store().root == str(two)
    assert locking.get_store(str(one)) is locking.get_store(str(one))


def test_a_namespace_set_between_calls_is_used(
    checkouts: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, _two = checkouts
    default = locking.get_store(str(one))
    monkeypatch.setenv("LOCKYARD_NAMESPACE", "shared")
    assert locking.get_store(str(one)).namespace == "shared"
    monkeypatch.setenv("LOCKYARD_NAMESPACE", "bad/name")
    with pytest.raises(ValueError, match="LOCKYARD_NAMESPACE"):
        locking.get_store(str(one))
    monkeypatch.delenv("LOCKYARD_NAMESPACE")
    assert locking.get_store(str(one)) is default


# -- real processes racing for one lock through the shortcuts ------------------------------

RACER = r"""
import os, sys
from lockyard.infra.lockstore import LockStore
repo, lock_dir, data, agent, rounds = sys.argv[1:6]
store = LockStore(repo, lock_dir)
marker = os.path.join(data, "inside")
counter = os.path.join(data, "counter")
granted = 0
while granted < int(rounds):
    if not store.try_lock("shared.py", agent):
        continue
    fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # raises on an overlap
    os.close(fd)
    with open(counter) as current:
        value = int(current.read())
    with open(counter, "w") as updated:
        updated.write(str(value + 1))
    os.unlink(marker)
    assert store.release("shared.py", agent), "lost a lock I held"
    granted += 1
print("done", granted, flush=True)
"""


def test_processes_racing_through_the_shortcuts_never_overlap(
    repo: Path, lock_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "counter").write_text("0")
    racers, rounds = 3, 150
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                RACER,
                str(repo),
                str(lock_dir),
                str(data),
                f"r{n}",
                str(rounds),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(racers)
    ]
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        assert out.split() == ["done", str(rounds)]
    assert (data / "counter").read_text() == str(racers * rounds)  # no lost update
    # Every lock released, no staging left; the racers' holder cards go once they are dead.
    assert all(entry.endswith(".card") for entry in lock_dir_entries(lock_dir))
    LockStore(repo, lock_dir).reclaim_stale()
    assert lock_dir_entries(lock_dir) == []


# -- a model of the store, driven through both paths by hypothesis -------------------------

FILES = ["a.py", "src/b.py", "__schema__"]
AGENTS = ["alice", "bob"]
GHOST = "ghost"


class LeanPathModel(RuleBasedStateMachine):
    """Two stores (two processes) on one directory; each file spelled as its key or as an
    absolute path; live waiters queued by hand; holders that died."""

    def __init__(self) -> None:
        super().__init__()
        self.base = tempfile.mkdtemp(prefix="lockyard-lean-")
        os.mkdir(f"{self.base}/repo")
        # A turn that never expires: however slow the machine, the queued waiter keeps it.
        self.stores = [
            LockStore(f"{self.base}/repo", f"{self.base}/locks", turn_timeout=3600)
            for _ in range(2)
        ]
        self.holders: dict[str, str] = {}  # file -> agent (GHOST: a dead process)
        self.queued: dict[str, tuple[str, str]] = {}  # file -> (entry, token) of a live waiter

    def teardown(self) -> None:
        for store in self.stores:
            store.close()
        shutil.rmtree(self.base)

    def spell(self, filepath: str, absolute: bool) -> str:
        if absolute and not filepath.startswith("__"):
            return f"{self.base}/repo/{filepath}"
        return filepath

    def expect_take(self, filepath: str, agent: str) -> bool:
        holder = self.holders.get(filepath)
        if filepath in self.queued:
            if holder == GHOST:
                del self.holders[filepath]  # reclaimed on the way, yet the waiter comes first
            return holder == agent
        return holder in (None, agent, GHOST)

    @rule(
        which=st.integers(0, 1),
        agent=st.sampled_from(AGENTS),
        filepath=st.sampled_from(FILES),
        absolute=st.booleans(),
    )
    def try_lock(self, which: int, agent: str, filepath: str, absolute: bool) -> None:
        expected = self.expect_take(filepath, agent)
        assert self.stores[which].try_lock(self.spell(filepath, absolute), agent) is expected
        if expected:
            self.holders[filepath] = agent

    @rule(
        which=st.integers(0, 1),
        agent=st.sampled_from(AGENTS),
        filepath=st.sampled_from(FILES),
        absolute=st.booleans(),
    )
    def release(self, which: int, agent: str, filepath: str, absolute: bool) -> None:
        expected = self.holders.get(filepath) == agent
        assert self.stores[which].release(self.spell(filepath, absolute), agent) is expected
        if expected:
            del self.holders[filepath]

    @rule(which=st.integers(0, 1), agent=st.sampled_from(AGENTS))
    def cleanup(self, which: int, agent: str) -> None:
        mine = sorted(f for f, holder in self.holders.items() if holder == agent)
        assert self.stores[which].cleanup_agent_locks(agent) == mine
        self.holders = {f: h for f, h in self.holders.items() if h != agent}

    @precondition(lambda self: len(self.holders) < len(FILES))
    @rule(filepath=st.sampled_from(FILES))
    def a_process_dies_holding(self, filepath: str) -> None:
        if filepath in self.holders:
            return
        plant_holder(self.stores[0], filepath, GHOST, pid=dead_pid(), start_time=None)
        self.holders[filepath] = GHOST

    @rule(filepath=st.sampled_from(FILES))
    def a_live_waiter_queues(self, filepath: str) -> None:
        if filepath not in self.queued:
            self.queued[filepath] = _queue_waiter(
                self.stores[0], filepath, "waiter", current_process()
            )

    @rule(filepath=st.sampled_from(FILES))
    def the_waiter_leaves(self, filepath: str) -> None:
        ticket = self.queued.pop(filepath, None)
        if ticket is not None:
            store = self.stores[1]
            run(line.drop(store.operations, lock_name(store.namespace, filepath), *ticket))

    @invariant()
    def holders_match_the_model(self) -> None:
        for filepath in FILES:
            for store in self.stores:
                assert store.holder(filepath) == self.holders.get(filepath)

    @invariant()
    def no_debris(self) -> None:
        for entry in lock_dir_entries(f"{self.base}/locks"):
            assert entry.endswith((".lock", ".q", ".card")), entry


LeanPathModel.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
test_both_paths_behave_like_the_model = LeanPathModel.TestCase
