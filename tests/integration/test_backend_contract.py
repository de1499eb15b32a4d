"""The lock-store contract, run against both backends: the lock directory and PostgreSQL.

Each test gets a `make_store` that opens stores on one shared backend; two stores stand for
two processes (for PostgreSQL: two database sessions).
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from lockstore_support import until_queued

from lockyard.infra.lockstore import open_backend
from lockyard.infra.lockstore.backend import LockBackend
from lockyard.infra.lockstore.scope_keys import overlaps as overlaps_key
from lockyard.infra.tools.lock_tools import LockTools

MakeStore = Callable[[], LockBackend]


@pytest.fixture
def make_store(repo: Path, backend_spec: str) -> Iterator[MakeStore]:
    opened: list[LockBackend] = []

    def make() -> LockBackend:
        store = open_backend(repo, backend_spec)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def test_try_lock_grants_a_free_lock_and_refuses_a_held_one(make_store: MakeStore) -> None:
    one, two = make_store(), make_store()
    assert one.try_lock("a.py", "alice")
    assert not two.try_lock("a.py", "bob")
    assert two.try_lock("a.py", "alice"), "a lock is the agent's, whichever store asks"
    assert two.holder("a.py") == "alice"
    assert one.is_locked("a.py")
    assert not one.is_locked("b.py")
    assert one.holder("b.py") is None


def test_only_the_holder_releases(make_store: MakeStore) -> None:
    one, two = make_store(), make_store()
    assert one.try_lock("a.py", "alice")
    assert not two.release("a.py", "bob")
    assert two.holder("a.py") == "alice"
    assert one.release("a.py", "alice")
    assert not one.release("a.py", "alice"), "a second release touches nothing"
    assert two.try_lock("a.py", "bob")


def test_cleanup_releases_one_agents_locks_and_no_others(make_store: MakeStore) -> None:
    one, two = make_store(), make_store()
    assert one.try_lock("a.py", "alice")
    assert one.try_lock("__db__", "alice")
    assert two.try_lock("b.py", "bob")
    keys = sorted([one.canonicalize("a.py"), one.canonicalize("__db__")])
    assert two.cleanup_agent_locks("alice") == keys
    assert one.holder("a.py") is None
    assert one.holder("b.py") == "bob"
    assert one.cleanup_agent_locks("alice") == []


@pytest.mark.anyio
async def test_waiters_are_granted_in_arrival_order(make_store: MakeStore) -> None:
    holder = make_store()
    assert holder.try_lock("a.py", "alice")
    order: list[str] = []
    stores = {agent: make_store() for agent in ("bob", "carol", "dave")}

    async def wait(agent: str) -> None:
        assert await stores[agent].acquire_async("a.py", agent, timeout_seconds=60)
        order.append(agent)
        assert stores[agent].release("a.py", agent)

    async with anyio.create_task_group() as group:
        queued: list[str] = []
        for agent in stores:
            group.start_soon(wait, agent)
            queued.append(agent)
            await until_queued(holder, "a.py", queued)
        assert not holder.try_lock("a.py", "erin"), "a free turn goes to the queue, not to erin"
        holder.release("a.py", "alice")
    assert order == ["bob", "carol", "dave"]
    assert holder.waiters("a.py") == []


@pytest.mark.anyio
async def test_a_wait_ends_with_the_lock_or_false_on_timeout(make_store: MakeStore) -> None:
    one, two = make_store(), make_store()
    assert one.try_lock("a.py", "alice")
    assert await two.acquire_async("a.py", "bob", timeout_seconds=0) is False
    assert await two.acquire_async("a.py", "bob", timeout_seconds=0.05) is False
    assert two.acquire("a.py", "bob", timeout_seconds=0.05) is False
    assert one.waiters("a.py") == []
    assert one.holder("a.py") == "alice"


@pytest.mark.anyio
async def test_a_cancelled_wait_leaves_no_queue_entry_and_no_lock(make_store: MakeStore) -> None:
    one, two = make_store(), make_store()
    assert one.try_lock("a.py", "alice")
    async with anyio.create_task_group() as group:
        group.start_soon(two.acquire_async, "a.py", "bob", 60)
        await until_queued(one, "a.py", ["bob"])
        group.cancel_scope.cancel()
    assert one.waiters("a.py") == []
    assert one.release("a.py", "alice")
    assert one.holder("a.py") is None, "the lock did not pass to the cancelled waiter"
    assert one.try_lock("a.py", "carol")


def test_a_blocking_acquire_is_woken_by_a_release_in_another_store(make_store: MakeStore) -> None:
    one, two = make_store(), make_store()
    assert one.try_lock("a.py", "alice")
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(two.acquire("a.py", "bob", 60)))
    waiter.start()
    anyio.run(until_queued, one, "a.py", ["bob"])
    one.release("a.py", "alice")
    waiter.join(60)
    assert result == [True]
    assert one.holder("a.py") == "bob"


@pytest.mark.anyio
async def test_lock_acquire_waits_on_any_blocked_file(make_store: MakeStore) -> None:
    others, mine = make_store(), make_store()
    assert others.try_lock("a.py", "alice")
    assert others.try_lock("b.py", "carol")
    tools = LockTools(mine, "bob")
    outcome: list[dict[str, object]] = []

    async def call() -> None:
        result = await tools.acquire({"filepaths": ["a.py", "b.py"], "timeout_seconds": 60})
        assert result.data is not None
        outcome.append(dict(result.data))

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        await until_queued(others, "a.py", ["bob"])
        await until_queued(others, "b.py", ["bob"])
        others.release("b.py", "carol")
    acquired = {r["filepath"]: r["acquired"] for r in outcome[0]["results"]}  # type: ignore[attr-defined]
    assert acquired == {mine.canonicalize("a.py"): False, mine.canonicalize("b.py"): True}
    assert others.waiters("a.py") == [], "the other wait was withdrawn"
    assert others.holder("a.py") == "alice"


def test_threads_on_two_stores_never_hold_one_lock_together(make_store: MakeStore) -> None:
    stores = [make_store(), make_store()]
    inside: list[str] = []
    overlaps: list[tuple[str, ...]] = []
    guard = threading.Lock()

    def worker(agent: str, store: LockBackend) -> None:
        for _ in range(15):
            assert store.acquire("hot.py", agent, timeout_seconds=60)
            with guard:
                inside.append(agent)
                if len(inside) > 1:
                    overlaps.append(tuple(inside))
            with guard:
                inside.remove(agent)
            assert store.release("hot.py", agent)

    threads = [
        threading.Thread(target=worker, args=(f"agent-{n}", stores[n % 2])) for n in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert overlaps == []
    assert stores[0].holder("hot.py") is None


def test_readers_and_writers_racing_on_three_stores_never_overlap_a_writer(
    make_store: MakeStore,
) -> None:
    """Six agents on three stores (three processes, or database sessions) ask for one file,
    each round shared or exclusive: a writer is never inside with anyone, readers are inside
    together, and every request is granted in the end (no writer starved by the readers)."""
    stores = [make_store() for _ in range(3)]
    inside: dict[str, str] = {}
    overlaps: list[dict[str, str]] = []
    together: list[int] = []
    guard = threading.Lock()

    def worker(n: int) -> None:
        agent, store = f"agent-{n}", stores[n % 3]
        for round_ in range(8):
            mode = "exclusive" if (n + round_) % 3 == 0 else "shared"
            assert store.acquire("hot.py", agent, 60, mode=mode)  # type: ignore[arg-type]
            with guard:
                inside[agent] = mode
                if len(inside) > 1 and "exclusive" in inside.values():
                    overlaps.append(dict(inside))
                together.append(len(inside))
            # Inside for a round trip, and the store agrees on who reads.
            readers = store.readers("hot.py")
            assert agent in readers if mode == "shared" else readers == ()
            with guard:
                del inside[agent]
            assert store.release("hot.py", agent)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert overlaps == []
    assert len(together) == 6 * 8
    assert stores[0].holder("hot.py") is None
    assert stores[0].readers("hot.py") == ()
    assert stores[0].waiters("hot.py") == []


NESTED = [
    "src/",
    "src/api/",
    "src/api/deep/",
    "src/api/a.py",
    "src/api/b.py",
    "src/b.py",
    "src/api/*.py",
    "src/**/*.py",
]


def test_directory_glob_and_file_requests_racing_on_many_stores_never_overlap_a_writer(
    make_store: MakeStore,
) -> None:
    """Eight agents on eight stores (processes, or database sessions) ask for nested
    directories, globs and the files under them, shared or exclusive, one at a time: no two
    overlapping holds are granted together unless both read, and every request is granted in
    the end (no wake-up lost, no waiter starved). Writes the invariant of docs/postgres.md
    ("Directory locks") as the test sees it: a grant is registered after it returns and
    unregistered before its release, so an overlap seen here is one the store allowed."""
    stores = [make_store() for _ in range(8)]
    inside: dict[str, tuple[str, str]] = {}  # agent -> (key, mode)
    overlaps: list[str] = []
    granted: list[str] = []
    guard = threading.Lock()

    def worker(n: int) -> None:
        agent, store, pick = f"agent-{n}", stores[n], random.Random(n)
        for _round in range(10):
            key, mode = pick.choice(NESTED), pick.choice(["exclusive", "shared"])
            if pick.random() < 0.3:
                if not store.try_lock(key, agent, mode=mode):  # type: ignore[arg-type]
                    continue
            else:
                assert store.acquire(key, agent, 60, mode=mode)  # type: ignore[arg-type]
            with guard:
                for other, (their_key, their_mode) in inside.items():
                    if overlaps_key(key, their_key) and "exclusive" in (mode, their_mode):
                        overlaps.append(
                            f"{agent} {mode} {key} with {other} {their_mode} {their_key}"
                        )
                inside[agent] = (key, mode)
                granted.append(agent)
            # Inside for a look at the store (a round trip on PostgreSQL): a hold as long as
            # a take, so that a grant made wrongly beside it is seen here.
            assert agent in (store.readers(key) if mode == "shared" else (store.holder(key),))
            with guard:
                del inside[agent]
            assert store.release(key, agent)

    run_threads(worker, 8)
    assert overlaps == []
    assert len(granted) > 8 * 10 // 2
    assert [info.lock_path for info in stores[0].list_locks()] == []


def test_glob_and_file_writers_racing_on_many_stores_never_hold_together(
    make_store: MakeStore,
) -> None:
    """Two agents write through globs, four write files that the globs match (no directory
    over them is ever held, so only the glob look keeps them apart), the files' writers for
    as long as the globs' are at work: each holds its lock for a look at the store, and no
    file is granted while a glob over it is held. Sharp where the racing test above is
    broad: it fails at once without the glob look of a file's grant."""
    globs, files = ["src/api/*.py", "src/**/*.py"], ["src/api/a.py", "src/api/b.py", "src/c.py"]
    keys = globs + files + files[:1]
    stores = [make_store() for _ in keys]
    inside: dict[str, str] = {}
    overlaps: list[str] = []
    guard = threading.Lock()
    globs_done: list[str] = []  # the glob writers that finished

    def hold(agent: str, key: str, store: LockBackend) -> None:
        with guard:
            overlaps.extend(
                f"{agent} {key} with {other} {theirs}"
                for other, theirs in inside.items()
                if overlaps_key(key, theirs)
            )
            inside[agent] = key
        # Held for a look at the whole store (a scan of the lock directory, a query).
        held = {info.lock_path: info.holder for info in store.list_locks() if info.holder}
        assert held[key].agent_id == agent
        with guard:
            del inside[agent]
        assert store.release(key, agent)

    def worker(n: int) -> None:
        agent, key, store = f"agent-{n}", keys[n], stores[n]
        if key in globs:
            for _round in range(25):
                assert store.acquire(key, agent, 60)
                hold(agent, key, store)
            globs_done.append(agent)
            return
        round_ = 0
        while len(globs_done) < len(globs):
            round_ += 1
            if store.try_lock(key, agent) if round_ % 2 else store.acquire(key, agent, 60):
                hold(agent, key, store)

    run_threads(worker, len(keys))
    assert overlaps == []


def run_threads(worker: Callable[[int], None], count: int) -> None:
    """`worker(0)` ... `worker(count - 1)` in threads at once, all ended (the first failure
    of one raised here). Threads of one
    process (the lock directory's stores) take turns every few microseconds rather than
    every 5 ms meanwhile: a wrong grant can then land inside another thread's hold."""
    failures: list[BaseException] = []

    def run(n: int) -> None:
        try:
            worker(n)
        except BaseException as error:  # a worker's failure is the test's
            failures.append(error)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    finally:
        sys.setswitchinterval(switching)
    assert not any(thread.is_alive() for thread in threads)
    if failures:
        raise failures[0]


FILES = ["a.py", "src/b.py", "__schema__"]
AGENTS = ["alice", "bob", "carol"]


def test_interleaved_operations_match_a_model(make_store: MakeStore) -> None:
    """Random interleavings of try, release, cleanup and non-blocking acquire, from two
    stores: never two holders, and every answer the one a simple model predicts."""
    stores = [make_store(), make_store()]

    class Model(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.holders: dict[str, str] = {}
            for agent in AGENTS:
                stores[0].cleanup_agent_locks(agent)

        @rule(which=st.integers(0, 1), agent=st.sampled_from(AGENTS), path=st.sampled_from(FILES))
        def try_lock(self, which: int, agent: str, path: str) -> None:
            expected = self.holders.get(path) in (None, agent)
            assert stores[which].try_lock(path, agent) is expected
            if expected:
                self.holders[path] = agent

        @rule(which=st.integers(0, 1), agent=st.sampled_from(AGENTS), path=st.sampled_from(FILES))
        def acquire_now(self, which: int, agent: str, path: str) -> None:
            expected = self.holders.get(path) in (None, agent)
            assert stores[which].acquire(path, agent, timeout_seconds=0) is expected
            if expected:
                self.holders[path] = agent

        @rule(which=st.integers(0, 1), agent=st.sampled_from(AGENTS), path=st.sampled_from(FILES))
        def release(self, which: int, agent: str, path: str) -> None:
            expected = self.holders.get(path) == agent
            assert stores[which].release(path, agent) is expected
            if expected:
                del self.holders[path]

        @rule(which=st.integers(0, 1), agent=st.sampled_from(AGENTS))
        def cleanup(self, which: int, agent: str) -> None:
            mine = sorted(stores[0].canonicalize(p) for p, h in self.holders.items() if h == agent)
            assert stores[which].cleanup_agent_locks(agent) == mine
            self.holders = {p: h for p, h in self.holders.items() if h != agent}

        @invariant()
        def holders_match(self) -> None:
            for path in FILES:
                assert stores[1].holder(path) == self.holders.get(path)

    run_state_machine_as_test(
        Model,
        settings=settings(
            max_examples=20,
            stateful_step_count=15,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
