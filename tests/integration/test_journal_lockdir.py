"""The lock directory journals its own lock changes, as PostgreSQL's triggers do: grants,
waits and how they ended, releases with how long they were held, hand-overs, reclaims with
their proof of death, pass-overs and operators' releases."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import anyio
import pytest
from lockstore_support import dead_pid, expect_line, kill, plant_holder, spawn

from lockyard.infra.lockstore import FileJournal, JournalQuery, JournalRecord, LockStore
from lockyard.infra.lockstore.journal.causes import mark_victim, operator_release, unmark_victim
from lockyard.infra.lockstore.liveness import current_process, read_proc_stat
from lockyard.infra.lockstore.lockdir.disk import member_entry
from lockyard.infra.lockstore.lockdir.lock_journal import LockJournal
from lockyard.infra.lockstore.paths import lock_name
from polling_support import wait_until


def journalled(lock_dir: Path, **query: list[str]) -> list[JournalRecord]:
    return list(FileJournal(lock_dir).records(JournalQuery.of(**query)))


def test_a_grant_a_wait_a_hand_over_and_a_release_are_recorded(repo: Path, lock_dir: Path) -> None:
    one, two = LockStore(repo, lock_dir), LockStore(repo, lock_dir)
    assert one.try_lock("a.py", "alice")
    waiter = threading.Thread(target=lambda: two.acquire("a.py", "bob", timeout_seconds=120))
    waiter.start()
    wait_until(lambda: one.waiters("a.py"))
    assert one.release("a.py", "alice")
    waiter.join()
    assert two.release("a.py", "bob")
    records = journalled(lock_dir)
    assert [(r.kind, r.agent) for r in records] == [
        ("grant", "alice"), ("wait-begin", "bob"), ("release", "alice"),
        ("hand-over", "bob"), ("wait-end", "bob"), ("release", "bob"),
    ]  # fmt: skip
    me = current_process()
    for record in records:
        assert (record.namespace, record.file) == (one.namespace, "a.py")
        assert (record.pid, record.host) == (me.pid, me.host)
        assert record.session == f"{me.pid}.{me.start_time}"
        assert record.fence is None  # a lock directory issues no fencing numbers
    by = {(r.kind, r.agent): r for r in records}
    assert by["wait-end", "bob"].outcome == "granted"
    assert (by["wait-end", "bob"].waited or 0) > 0
    # The release is written when alice's grant is dropped, before bob is handed the lock:
    # no later than the hand-over, in the journal's order (above) and in time.
    assert by["release", "alice"].time <= by["hand-over", "bob"].time
    assert by["release", "alice"].held is not None
    assert by["release", "bob"].held is not None
    # Taking a lock one already holds changes nothing: no record.
    assert one.try_lock("a.py", "alice")
    assert one.try_lock("a.py", "alice")
    assert [r.kind for r in journalled(lock_dir)[len(records) :]] == ["grant"]


def test_a_release_by_another_store_reads_the_hold_time_from_the_lock(
    repo: Path, lock_dir: Path
) -> None:
    assert LockStore(repo, lock_dir).try_lock("a.py", "alice")
    assert LockStore(repo, lock_dir).release("a.py", "alice")
    [_grant, release] = journalled(lock_dir)
    assert release.kind == "release"
    assert release.held is not None
    assert release.held >= 0


def test_a_wait_that_times_out_or_is_cancelled_or_gives_way_says_so(
    repo: Path, lock_dir: Path
) -> None:
    one, two = LockStore(repo, lock_dir), LockStore(repo, lock_dir)
    assert one.try_lock("a.py", "alice")
    assert not two.acquire("a.py", "bob", timeout_seconds=0.2)

    async def cancelled(agent: str) -> None:
        with anyio.move_on_after(0.3):
            await two.acquire_async("a.py", agent, timeout_seconds=60)

    anyio.run(cancelled, "carol")
    mark_victim("dave")
    try:
        anyio.run(cancelled, "dave")
    finally:
        unmark_victim("dave")
    ended = {r.agent: r.outcome for r in journalled(lock_dir, kinds=["wait-end"])}
    assert ended == {"bob": "timed-out", "carol": "cancelled", "dave": "victim"}
    assert len(journalled(lock_dir, kinds=["wait-begin"])) == 3
    assert not two.acquire("a.py", "erin", timeout_seconds=0)  # no wait, no wait record
    assert len(journalled(lock_dir, kinds=["wait-begin"])) == 3


def test_a_dead_processs_lock_taken_back_is_a_reclaim_with_its_proof(
    repo: Path, lock_dir: Path
) -> None:
    store = LockStore(repo, lock_dir)
    plant_holder(store, "a.py", "alice", pid=dead_pid(), acquired_at=time.time() - 90)
    assert store.try_lock("a.py", "bob")
    [reclaim] = journalled(lock_dir, kinds=["reclaim"])
    assert (reclaim.agent, reclaim.file, reclaim.other) == ("alice", "a.py", "bob")
    assert reclaim.reason is not None
    assert "no longer exists" in reclaim.reason  # the proof of death
    assert (reclaim.held or 0) >= 90
    assert [r.agent for r in journalled(lock_dir, kinds=["grant"])] == ["bob"]


def test_a_killed_holders_lock_reclaimed_by_its_waiter(repo: Path, lock_dir: Path) -> None:
    holder = spawn(repo, lock_dir, "a.py", "alice", "hold")
    try:
        expect_line(holder, "locked")
        store = LockStore(repo, lock_dir)
        waiter = threading.Thread(target=lambda: store.acquire("a.py", "bob", timeout_seconds=120))
        waiter.start()
        wait_until(lambda: store.waiters("a.py"))
        holder.send_signal(signal.SIGKILL)
        waiter.join()
    finally:
        kill(holder)
    kinds = [(r.kind, r.agent) for r in journalled(lock_dir)]
    assert ("reclaim", "alice") in kinds
    assert kinds[-1] == ("wait-end", "bob")
    assert journalled(lock_dir, kinds=["wait-end"])[0].outcome == "granted"


def test_an_operators_release_names_the_operator_before_the_waiter_it_hands_on_to(
    repo: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = LockStore(repo, lock_dir), LockStore(repo, lock_dir)
    assert one.try_lock("a.py", "alice")
    assert one.try_lock("b.py", "alice")
    waiter = threading.Thread(target=lambda: one.acquire("a.py", "bob", timeout_seconds=120))
    waiter.start()
    wait_until(lambda: one.waiters("a.py"))
    holders_at_release: list[str | None] = []
    journal_release = LockJournal.released

    def released(journal: LockJournal, token: str, agent: str, key: str, *more: object) -> None:
        holders_at_release.append(two.holder(key))
        journal_release(journal, token, agent, key, *more)  # type: ignore[arg-type]

    monkeypatch.setattr(LockJournal, "released", released)
    with operator_release("lockyard clean --agent alice"):
        assert two.cleanup_agent_locks("alice", all_namespaces=True) == ["a.py", "b.py"]
    waiter.join()
    released = journalled(lock_dir, kinds=["operator-release"])
    assert sorted((r.file, r.agent, r.other) for r in released) == [
        ("a.py", "alice", "lockyard clean --agent alice"),
        ("b.py", "alice", "lockyard clean --agent alice"),
    ]
    assert all(r.held is not None for r in released)
    # Journalled as each grant was dropped, before a.py went on to bob (never bob's yet).
    assert holders_at_release == [None, None]
    order = [(r.kind, r.agent) for r in journalled(lock_dir, files=["a.py"])]
    assert order.index(("operator-release", "alice")) < order.index(("hand-over", "bob"))


def test_a_first_waiter_passed_over_is_recorded(repo: Path, lock_dir: Path, tmp_path: Path) -> None:
    store = LockStore(repo, lock_dir)
    assert store.try_lock("f.py", "A")
    waiter = spawn(repo, lock_dir, "f.py", "B", "wait", "100", str(tmp_path / "log"))
    try:
        expect_line(waiter, "waiting")
        wait_until(lambda: [w.agent_id for w in store.waiters("f.py")] == ["B"])
        waiter.send_signal(signal.SIGSTOP)  # alive and queued, unable to take its turn
        wait_until(lambda: _state(waiter.pid) == "T")
        assert store.release("f.py", "A")
        name = lock_name(store.namespace, "f.py")
        [first] = store.directory.queues.queue_order(name)
        then = time.time() - store.turn_timeout - 60
        token = store.directory.queues.entry_token(name, first)
        os.utime(f"{lock_dir}/{name}.q/{first}/{token}", (then, then), follow_symlinks=False)
        assert store.try_lock("f.py", "C")
    finally:
        waiter.send_signal(signal.SIGCONT)
        kill(waiter)
    [passed] = journalled(lock_dir, kinds=["pass-over"])
    assert (passed.agent, passed.file) == ("B", "f.py")
    assert passed.reason is not None
    assert "turn" in passed.reason


def test_the_journal_switched_off_writes_nothing(
    repo: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKYARD_JOURNAL", "off")
    store = LockStore(repo, lock_dir)
    assert store.try_lock("a.py", "alice")
    assert not store.acquire("a.py", "bob", timeout_seconds=0.1)
    assert store.release("a.py", "alice")
    assert journalled(lock_dir) == []


def _state(pid: int) -> str | None:
    stat = read_proc_stat(pid)
    return None if stat is None else stat[0]


def test_lines_passed_through_are_not_holds_only_the_locks_asked_for_are(
    repo: Path, lock_dir: Path
) -> None:
    (repo / "src").mkdir(exist_ok=True)
    one, two = LockStore(repo, lock_dir), LockStore(repo, lock_dir)
    assert one.try_lock("src/", "dir")
    for _ in range(3):  # refused: the file's line is taken and given back, no grant
        assert not two.try_lock("src/x.py", "file")
    waiter = threading.Thread(target=lambda: two.acquire("src/x.py", "file", timeout_seconds=120))
    waiter.start()
    wait_until(lambda: [r for r in journalled(lock_dir) if r.kind == "wait-begin"])
    assert one.release("src/", "dir")
    waiter.join()
    assert two.release("src/x.py", "file")
    # A writer waiting for a reader waits: no grant until the reader has gone.
    assert one.try_lock("a.py", "reader", mode="shared")
    writer = threading.Thread(target=lambda: two.acquire("a.py", "writer", timeout_seconds=120))
    writer.start()
    wait_until(lambda: len([r for r in journalled(lock_dir) if r.kind == "wait-begin"]) == 2)
    assert one.release("a.py", "reader")
    writer.join()
    records = journalled(lock_dir)
    assert [(r.kind, r.agent, r.file) for r in records if r.kind != "release"] == [
        ("grant", "dir", "src/"), ("wait-begin", "file", "src/x.py"),
        ("hand-over", "file", "src/x.py"), ("wait-end", "file", "src/x.py"),
        ("grant", "reader", "a.py"), ("wait-begin", "writer", "a.py"),
        ("hand-over", "writer", "a.py"), ("wait-end", "writer", "a.py"),
    ]  # fmt: skip
    stats = FileJournal(lock_dir).stats()
    assert {name: figures.holds for name, figures in stats.files.items()} == {
        "src/": 1, "src/x.py": 1, "a.py": 2
    }  # fmt: skip


def test_an_upgrade_is_one_hold_from_its_read_and_a_readers_release_comes_before_its_writer(
    repo: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = LockStore(repo, lock_dir), LockStore(repo, lock_dir)
    present_at_release: list[tuple[str, bool]] = []
    journal_release = LockJournal.released

    def released(journal: LockJournal, token: str, agent: str, key: str, *more: object) -> None:
        member = lock_dir / f"{lock_name(one.namespace, key)}.shared" / member_entry(agent)
        present_at_release.append((agent, os.path.lexists(member)))
        journal_release(journal, token, agent, key, *more)  # type: ignore[arg-type]

    monkeypatch.setattr(LockJournal, "released", released)
    assert one.try_lock("alone.py", "ann", mode="shared")
    assert one.try_lock("alone.py", "ann")  # a lone reader upgrades in place
    assert one.release("alone.py", "ann")
    assert one.try_lock("shared.py", "ann", mode="shared")
    assert two.try_lock("shared.py", "bob", mode="shared")
    upgrade = threading.Thread(target=lambda: one.acquire("shared.py", "ann", 120, 10))
    upgrade.start()
    wait_until(lambda: [r for r in journalled(lock_dir) if r.kind == "wait-begin"])
    assert two.release("shared.py", "bob")  # its going wakes ann's upgrade
    upgrade.join()
    assert one.release("shared.py", "ann")
    records = journalled(lock_dir)
    assert [(r.kind, r.agent, r.file, r.outcome) for r in records if r.kind != "wait-end"] == [
        ("grant", "ann", "alone.py", "shared"), ("grant", "ann", "alone.py", "upgrade"),
        ("release", "ann", "alone.py", None),
        ("grant", "ann", "shared.py", "shared"), ("grant", "bob", "shared.py", "shared"),
        ("wait-begin", "ann", "shared.py", None), ("release", "bob", "shared.py", None),
        ("hand-over", "ann", "shared.py", "upgrade"), ("release", "ann", "shared.py", None),
    ]  # fmt: skip
    # bob's release was journalled while his read still stood: before the writer it woke.
    assert ("bob", True) in present_at_release
    stats = FileJournal(lock_dir).stats()
    assert {name: figures.holds for name, figures in stats.files.items()} == {
        "alone.py": 1, "shared.py": 2
    }  # fmt: skip
    reads = {r.file: r.time for r in records if r.agent == "ann" and r.outcome == "shared"}
    ends = {r.file: r for r in records if r.agent == "ann" and r.kind == "release"}
    for name in ("alone.py", "shared.py"):  # held from the read's grant, not the upgrade's
        assert (ends[name].held or 0) >= ends[name].time - reads[name] - 1e-5
    assert stats.agents["ann"].holds == 2
