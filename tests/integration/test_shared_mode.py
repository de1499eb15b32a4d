"""Shared holds on both backends (a real lock directory, a real PostgreSQL): a SIGKILLed
reader, two upgraders in a deadlock the monitor resolves, the guards' answers to readers,
`lock_acquire`'s mode, the journal, and what `status` shows."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from lockstore_support import expect_line, kill, spawn, tell
from rich.console import Console

from lock_dir_listing import lock_dir_entries
from lockyard.cli.status import render_status, status_payload
from lockyard.domain.monitor import DeadlockMonitor
from lockyard.infra.crossproc.state import WaitForSnapshot
from lockyard.infra.hooks.write_guard.decide import judge_write
from lockyard.infra.lockstore import JournalQuery, LockStore, open_backend, open_journal
from lockyard.infra.lockstore.backend import LockBackend
from lockyard.infra.tools.lock_tools import LockTools
from lockyard.infra.tools.wait_view import line_view
from polling_support import wait_until, wait_until_async

ACQUIRE = "lock_acquire"
pytestmark = pytest.mark.anyio


@pytest.fixture
def store(repo: Path, backend_spec: str) -> Iterator[LockBackend]:
    opened = open_backend(repo, backend_spec)
    yield opened
    opened.close()


def leftovers(store: LockBackend) -> list[str]:
    """What is left in the store: the lock directory's entries besides the journal and
    holder cards (kept on purpose), or the locks PostgreSQL lists."""
    if isinstance(store, LockStore):
        return [e for e in lock_dir_entries(store.lock_dir) if not e.endswith(".card")]
    return [info.lock_path for info in store.list_locks()]


def test_a_sigkilled_readers_hold_is_taken_back_by_proof_of_death(
    repo: Path, backend_spec: str, store: LockBackend
) -> None:
    """On the lock directory by proof of the process's death; on PostgreSQL with its
    database session, which ends with the process."""
    reader = spawn(repo, backend_spec, "a.py", "reader", "share")
    expect_line(reader, "locked")
    assert store.try_lock("a.py", "fox", mode="shared")  # readers hold it together
    assert not store.try_lock("a.py", "writer")  # an exclusive hold waits for them
    assert sorted(store.readers("a.py")) == ["fox", "reader"]
    assert store.release("a.py", "fox")
    kill(reader)
    # Granted with nobody's release: the dead reader's hold goes (on PostgreSQL when the
    # server sees the session end: the waiting writer's liveness re-check finds it gone).
    assert store.acquire("a.py", "writer", timeout_seconds=30)
    assert store.readers("a.py") == ()  # a dead reader reads nothing
    assert store.holder("a.py") == "writer"
    assert store.release("a.py", "writer")
    assert leftovers(store) == []


# A poll interval no test waits out: a writer granted well before it was woken by a push.
SLOW_POLL_MS = 30_000
WOKEN_WITHIN = 10.0


async def test_a_writer_outwaiting_readers_is_woken_when_the_last_one_in_another_process_leaves(
    repo: Path, lock_dir: Path
) -> None:
    reader = spawn(repo, lock_dir, "a.py", "reader", "share")
    expect_line(reader, "locked")
    store = LockStore(repo, lock_dir)
    granted = anyio.Event()

    async def write() -> None:
        assert await store.acquire_async("a.py", "writer", 60, SLOW_POLL_MS)
        granted.set()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(write)
            await wait_until_async(lambda: store.holder("a.py") == "writer")  # the readers' turn
            tell(reader, "release")
            expect_line(reader, "released")
            with anyio.fail_after(WOKEN_WITHIN):  # by inotify on the readers' directory
                await granted.wait()
    finally:
        kill(reader)
    assert store.readers("a.py") == ()
    assert store.release("a.py", "writer")
    assert leftovers(store) == []


def test_a_writer_outwaiting_a_reader_of_its_own_process_is_woken_without_inotify(
    repo: Path, lock_dir: Path
) -> None:
    store = LockStore(repo, lock_dir, use_inotify=False)  # this process's topics alone
    assert store.try_lock("a.py", "fox", mode="shared")
    granted = threading.Event()

    def write() -> None:
        assert store.acquire("a.py", "writer", 60, SLOW_POLL_MS)
        granted.set()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        wait_until(lambda: store.holder("a.py") == "writer")
        assert store.release("a.py", "fox")
        assert granted.wait(WOKEN_WITHIN)
    finally:
        writer.join()
    assert store.release("a.py", "writer")
    assert leftovers(store) == []


async def test_two_upgraders_deadlock_visibly_and_the_one_asked_to_give_way_unblocks_the_other(
    store: LockBackend,
) -> None:
    for agent in ("ann", "bob"):
        assert store.try_lock("a.py", agent, mode="shared")
    granted: dict[str, bool] = {}
    scopes: dict[str, anyio.CancelScope] = {}
    ended = {agent: anyio.Event() for agent in ("ann", "bob")}

    async def upgrade(agent: str) -> None:
        with anyio.CancelScope() as scopes[agent]:
            try:
                granted[agent] = await store.acquire_async("a.py", agent, 60, 10)
            finally:
                ended[agent].set()

    async with anyio.create_task_group() as group:
        group.start_soon(upgrade, "ann")
        await wait_until_async(lambda: store.holder("a.py") == "ann")  # waits for bob's read
        group.start_soon(upgrade, "bob")
        await wait_until_async(lambda: len(store.waiters("a.py")) == 1)  # bob waits for ann
        snapshot = WaitForSnapshot.from_store_snapshot(store.snapshot())
        monitor = DeadlockMonitor(verify_cycle=snapshot.has_cycle)
        monitor.rebuild(snapshot.holders(), snapshot.wait_pairs())
        [deadlock] = await monitor.check_all()
        assert {step.agent_id for step in deadlock.cycle} == {"ann", "bob"}
        # The victim gives way as lock_acquire makes it: its wait ends, then its locks go.
        victim = deadlock.victim
        scopes[victim].cancel()
        await ended[victim].wait()
        assert store.cleanup_agent_locks(victim) == ["a.py"]  # its read
    winner = "bob" if victim == "ann" else "ann"
    assert granted == {winner: True}
    assert store.holder("a.py") == winner
    assert store.readers("a.py") == ()
    store.cleanup_agent_locks(winner)
    assert leftovers(store) == []


def test_the_write_guard_refuses_a_readers_write_and_says_to_upgrade(
    repo: Path, store: LockBackend
) -> None:
    path = str(repo / "a.py")
    assert store.try_lock("a.py", "ann", mode="shared")
    reason, _notes = judge_write(store, "ann", path, str(repo), ACQUIRE)
    assert reason is not None
    assert "shared (for reading only)" in reason
    assert '"mode": "exclusive"' in reason
    assert store.try_lock("a.py", "ann")  # the upgrade: alone, it is granted at once
    assert store.readers("a.py") == ()
    assert judge_write(store, "ann", path, str(repo), ACQUIRE)[0] is None


async def test_a_holder_still_waiting_for_readers_may_not_write(
    repo: Path, store: LockBackend
) -> None:
    path = str(repo / "a.py")
    assert store.try_lock("a.py", "bob", mode="shared")
    async with anyio.create_task_group() as group:
        group.start_soon(store.acquire_async, "a.py", "ann", 60, 10)
        await wait_until_async(lambda: store.holder("a.py") == "ann")
        reason, _notes = judge_write(store, "ann", path, str(repo), ACQUIRE)
        assert reason is not None
        assert "still held shared by bob" in reason
        # Its progress names the reader it waits for, and not itself as a holder.
        waiting = line_view(store, "ann", "a.py").describe()
        assert waiting == "a.py: held by bob (shared), you are next", waiting
        group.cancel_scope.cancel()
    assert store.holder("a.py") is None  # the cancelled wait gave the lock back
    assert store.readers("a.py") == ("bob",)


async def test_lock_acquire_takes_mode_shared_and_status_shows_the_readers(
    store: LockBackend,
) -> None:
    ann, bob = LockTools(store, "ann"), LockTools(store, "bob")
    for tools in (ann, bob):
        outcome = await tools.acquire(
            {"filepaths": ["a.py"], "mode": "shared", "timeout_seconds": 0}
        )
        assert outcome.data is not None, outcome.text
        assert outcome.data["all_acquired"] is True
    outcome = await bob.acquire({"filepaths": ["a.py"], "timeout_seconds": 0})
    assert outcome.data is not None
    assert outcome.data["all_acquired"] is False
    assert outcome.data["results"][0]["blocked_by"] == ["a.py shared by ann"]  # not bob
    [info] = store.list_locks()
    assert sorted(m.agent_id for m in info.shared_holders) == ["ann", "bob"]
    assert {m.mode for m in info.shared_holders} == {"shared"}
    refused = await ann.acquire({"filepaths": ["a.py"], "mode": "read"})
    assert refused.is_error
    assert '"mode" must be "exclusive"' in refused.text
    await ann.release({"all": True})
    await bob.release({"all": True})
    assert leftovers(store) == []


def test_the_journal_records_a_shared_grant_as_such(store: LockBackend) -> None:
    assert store.try_lock("a.py", "ann", mode="shared")
    assert store.release("a.py", "ann")
    journal = open_journal(store)
    try:
        records = list(journal.records(JournalQuery.of()))
    finally:
        journal.close()
    kinds = [(r.kind, r.agent, r.outcome) for r in records if r.file == "a.py"]
    assert ("grant", "ann", "shared") in kinds
    assert any(kind == "release" and agent == "ann" for kind, agent, _ in kinds)


def test_an_upgrades_read_goes_into_its_hold_unjournalled(
    repo: Path, backend_spec: str, store: LockBackend
) -> None:
    """The lock directory journals an upgrade as the read's grant, the exclusive grant and
    one release; PostgreSQL the same, however the upgrade is completed (by the upgrader, or
    by the last other reader's release, in another session)."""
    assert store.try_lock("alone.py", "ann", mode="shared")
    assert store.try_lock("alone.py", "ann")  # a lone reader upgrades in place
    assert store.release("alone.py", "ann")
    other = open_backend(repo, backend_spec)
    try:
        assert store.try_lock("shared.py", "ann", mode="shared")
        assert other.try_lock("shared.py", "bob", mode="shared")
        upgrade = threading.Thread(target=store.acquire, args=("shared.py", "ann", 60, 10))
        upgrade.start()
        wait_until(lambda: store.holder("shared.py") == "ann")
        assert other.release("shared.py", "bob")  # ann's upgrade is complete now
        upgrade.join()
    finally:
        other.close()
    assert store.release("shared.py", "ann")
    journal = open_journal(store)
    try:
        records = list(journal.records(JournalQuery.of(agents=["ann"])))
    finally:
        journal.close()
    for name in ("alone.py", "shared.py"):
        ends = [r.kind for r in records if r.file == name and r.kind in ("release", "reclaim")]
        grants = [(r.kind, r.outcome) for r in records if r.file == name and r.kind == "grant"]
        assert (ends, grants[0]) == (["release"], ("grant", "shared")), name


async def test_status_and_lock_status_list_the_readers_at_80_columns(
    store: LockBackend,
) -> None:
    for agent in ("ann", "bob"):
        assert store.try_lock("b.py", agent, mode="shared")  # b.py: readers only
    assert store.try_lock("a.py", "bob", mode="shared")
    async with anyio.create_task_group() as group:  # a.py: ann holds it, waits for bob
        group.start_soon(store.acquire_async, "a.py", "ann", 60, 10)
        await wait_until_async(lambda: store.holder("a.py") == "ann")
        snapshot = store.snapshot()
        looks = (await LockTools(store, "carl").status({"filepaths": ["a.py", "b.py"]})).data
        group.cancel_scope.cancel()
    console = Console(width=80, record=True, file=io.StringIO())
    render_status(console, store.location, snapshot, [], [], {})
    shown = console.export_text()
    print(shown)
    text = " ".join(shown.split())  # the table folds cells at 80 columns
    assert "waiters (in order)" in text  # the column stays at 80 columns
    assert max(map(len, shown.splitlines())) <= 80
    # The holder column's text, its cells folded at 80 columns joined again (a fold may fall
    # anywhere: the other columns' widths move it, an age of `8.7ms` is wider than `0.0s`).
    holders = " ".join(
        " ".join(line.split("│")[2].split()) for line in shown.splitlines() if line.startswith("│")
    )
    assert "shared by ann, bob" in holders
    assert "waits for readers bob" in holders
    assert "free, reserved" not in text  # a lock held by readers is not free
    payload = status_payload(store.location, snapshot, [], [], {})
    locks = {info["lock_path"]: info for info in payload["locks"]}
    assert [m["agent_id"] for m in locks["b.py"]["shared_holders"]] == ["ann", "bob"]
    assert locks["b.py"]["holder"] is None
    assert locks["a.py"]["holder"]["agent_id"] == "ann"
    assert [m["liveness"] for m in locks["a.py"]["shared_holders"]] == ["alive"]
    assert looks is not None
    found = {entry["filepath"]: entry for entry in looks["locks"]}
    assert found["b.py"]["shared_by"] == ["ann", "bob"]
    assert found["b.py"]["would_be_granted"] is False  # an exclusive grant waits for them
    assert "held shared by ann, bob" in found["b.py"]["summary"]
    assert found["a.py"]["shared_by"] == ["bob"]
    assert [holder["agent"] for holder in found["a.py"]["held_by"]] == ["ann"]
    ann_looks = (await LockTools(store, "ann").status({"filepaths": ["b.py"]})).data
    assert ann_looks is not None
    [own] = ann_looks["locks"]
    assert own["you_hold_shared"] is True
    assert own["you_hold"] is False
    assert own["would_be_granted"] is False  # bob reads it too: ann's upgrade would wait
