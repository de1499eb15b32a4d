"""The lock store against a simple model, driven by hypothesis through random operations.

Two `LockStore` objects on one lock directory play two processes (only one of them knows a
grant's token in memory), and "ghost" holders play processes that died holding a lock.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lock_dir_listing import lock_dir_entries
from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.liveness import current_process
from lockyard.infra.lockstore.paths import lock_name

FILES = ["a.py", "src/b.py", "__schema__"]
AGENTS = ["alice", "bob", "carol"]
GHOST = "ghost"

files = st.sampled_from(FILES)
agents = st.sampled_from(AGENTS)
stores = st.integers(min_value=0, max_value=1)


class LockStoreModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.base = tempfile.mkdtemp(prefix="lockyard-stateful-")
        os.mkdir(f"{self.base}/repo")
        self.stores = [LockStore(f"{self.base}/repo", f"{self.base}/locks") for _ in range(2)]
        self.holders: dict[str, str] = {}  # file -> agent (GHOST: a dead process)

    def teardown(self) -> None:
        for store in self.stores:
            store.close()
        shutil.rmtree(self.base)

    def key(self, filepath: str) -> str:
        return self.stores[0].canonicalize(filepath)

    @rule(which=stores, agent=agents, filepath=files)
    def try_lock(self, which: int, agent: str, filepath: str) -> None:
        holder = self.holders.get(filepath)
        expected = holder in (None, agent, GHOST)
        assert self.stores[which].try_lock(filepath, agent) is expected
        if expected:
            self.holders[filepath] = agent

    @rule(which=stores, agent=agents, filepath=files)
    def acquire_without_waiting(self, which: int, agent: str, filepath: str) -> None:
        expected = self.holders.get(filepath) in (None, agent, GHOST)
        assert self.stores[which].acquire(filepath, agent, timeout_seconds=0) is expected
        if expected:
            self.holders[filepath] = agent

    @rule(which=stores, agent=agents, filepath=files)
    def release(self, which: int, agent: str, filepath: str) -> None:
        expected = self.holders.get(filepath) == agent
        assert self.stores[which].release(filepath, agent) is expected
        if expected:
            del self.holders[filepath]

    @rule(which=stores, agent=agents)
    def cleanup(self, which: int, agent: str) -> None:
        mine = sorted(self.key(f) for f, holder in self.holders.items() if holder == agent)
        assert self.stores[which].cleanup_agent_locks(agent) == mine
        self.holders = {f: h for f, h in self.holders.items() if h != agent}

    @precondition(lambda self: len(self.holders) < len(FILES))
    @rule(filepath=files)
    def a_process_dies_holding(self, filepath: str) -> None:
        if filepath in self.holders:
            return
        store = self.stores[0]
        key = self.key(filepath)
        me = current_process()
        record = {
            "agent_id": GHOST,
            "token": "ghost0",
            "pid": 1,
            "start_time": -1,
            "host": me.host,
            "boot_id": me.boot_id,
            "pid_ns": me.pid_ns,
            "lock_path": key,
            "namespace": store.namespace,
            "acquired_at": 0.0,
        }
        name = lock_name(store.namespace, key)
        assert store.directory.publish(name, "ghost0", json.dumps(record))
        self.holders[filepath] = GHOST

    @rule(which=stores)
    def reclaim_stale(self, which: int) -> None:
        ghosts = sorted(self.key(f) for f, holder in self.holders.items() if holder == GHOST)
        reclaimed = self.stores[which].reclaim_stale()
        assert sorted(r.lock_path for r in reclaimed) == ghosts
        self.holders = {f: h for f, h in self.holders.items() if h != GHOST}

    @invariant()
    def holders_match_the_model(self) -> None:
        for filepath in FILES:
            for store in self.stores:
                assert store.holder(filepath) == self.holders.get(filepath)
                assert store.is_locked(filepath) == (filepath in self.holders)

    @invariant()
    def listing_matches_the_model_and_leaves_no_debris(self) -> None:
        listed = {info.lock_path: info.holder.agent_id for info in self.stores[1].list_locks()}
        assert listed == {self.key(f): h for f, h in self.holders.items()}
        entries = lock_dir_entries(self.stores[0].lock_dir)
        assert all(entry.endswith((".lock", ".card")) for entry in entries), entries


LockStoreModel.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
test_lock_store_behaves_like_the_model = LockStoreModel.TestCase
