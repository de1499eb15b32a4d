"""The cross-process monitor on a real lock directory: detection, notices, agreement with the
in-process monitor, push and polling, and the `lockyard monitor` command itself."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from lockyard.core.deadlock_info import DeadlockInfo
from lockyard.domain.monitor import DeadlockMonitor
from lockyard.infra.crossproc.monitor_loop import CrossProcessMonitor, PassReport
from lockyard.infra.crossproc.notices import FileVictimNotices, VictimNotice, VictimNoticeBoard
from lockyard.infra.crossproc.state import WaitForReader, node_key
from lockyard.infra.crossproc.watch import TreeWatcher
from lockyard.infra.lockstore.lockdir.store import LockStore
from lockyard.infra.tools.lock_tools import LockTools
from polling_support import wait_until, wait_until_async


def node(store: LockStore, path: str) -> str:
    """The wait-for graph node of `path` as a monitor reading the lock directory names it."""
    return node_key(store.namespace, store.canonicalize(path))


pytestmark = pytest.mark.anyio

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


@pytest.fixture
def lock_dir(tmp_path: Path) -> Path:
    path = tmp_path / "locks"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> Iterator[LockStore]:
    opened = LockStore(str(repo), lock_dir)
    yield opened
    opened.close()


def run_monitor(lock_dir: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LOCKYARD_LOCK_DIR"}
    if lock_dir is not None:
        env["LOCKYARD_LOCK_DIR"] = str(lock_dir)
    return subprocess.run(
        [LOCKYARD, "monitor", *args], capture_output=True, text=True, timeout=60, env=env
    )


@asynccontextmanager
async def waiting(store: LockStore, *waits: tuple[str, str]) -> AsyncIterator[None]:
    """Agents blocked in `acquire_async` (queue entries on disk) for the duration."""
    async with anyio.create_task_group() as group:
        for agent, path in waits:
            group.start_soon(store.acquire_async, path, agent, 60)
        await wait_until_async(lambda: len(store.snapshot().waits) == len(waits))
        yield
        group.cancel_scope.cancel()


def two_agent_deadlock(store: LockStore) -> tuple[tuple[str, str], ...]:
    assert store.try_lock("f1", "a")
    time.sleep(0.01)  # b's lock is younger: b is the default victim
    assert store.try_lock("f2", "b")
    return (("a", "f2"), ("b", "f1"))


# --- the command --------------------------------------------------------------------------


def test_once_on_a_quiet_lock_dir_reports_no_deadlock(lock_dir: Path) -> None:
    done = run_monitor(lock_dir, "--once")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"no deadlock in {lock_dir} (0 locks held, 0 waits)")

    done = run_monitor(None, "--once", "--json", "--lock-dir", str(lock_dir))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "lock_dir": str(lock_dir),
        "deadlocks": [],
        "stale_notices_removed": [],
        "revocations": [],
        "holds": 0,
        "waits": 0,
        "leader": True,
        "resolving": True,
        "resolved_by": None,
    }


def test_a_monitor_started_before_any_agent_creates_the_lock_dir_and_watches(
    tmp_path: Path,
) -> None:
    lock_dir = tmp_path / "not-yet"
    process = subprocess.Popen(
        [LOCKYARD, "monitor", "--lock-dir", str(lock_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith(f"watching {lock_dir}")
        assert lock_dir.is_dir()
        assert oct(lock_dir.stat().st_mode & 0o777) == oct(0o700)
    finally:
        process.terminate()
        process.communicate(timeout=20)
    assert process.returncode == 0


@pytest.mark.parametrize("problem", ["symlink", "file"])
def test_an_unusable_lock_dir_is_a_clear_error(tmp_path: Path, problem: str) -> None:
    target = tmp_path / "locks"
    if problem == "symlink":
        (tmp_path / "real").mkdir()
        target.symlink_to(tmp_path / "real")
    elif problem == "file":
        target.write_text("not a directory")
    done = run_monitor(target, "--once")
    assert done.returncode == 3
    assert done.stdout == ""
    assert done.stderr.startswith(f"lockyard: error: lock directory {target}")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "real" / "victims").exists()


def test_bad_options_are_usage_errors(lock_dir: Path) -> None:
    done = run_monitor(lock_dir, "--poll-interval", "0")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


async def test_once_finds_resolves_and_does_not_repeat(store: LockStore, lock_dir: Path) -> None:
    waits = two_agent_deadlock(store)
    async with waiting(store, *waits):
        report_only = await anyio.to_thread.run_sync(
            run_monitor, lock_dir, "--once", "--json", "--no-resolve"
        )
        assert report_only.returncode == 6, report_only.stderr
        assert not (lock_dir / "victims").exists()  # reporting writes nothing

        done = await anyio.to_thread.run_sync(run_monitor, lock_dir, "--once", "--json")
        assert done.returncode == 6, done.stderr
        report = json.loads(done.stdout)
        assert report["holds"] == 2
        assert report["waits"] == 2
        [found] = report["deadlocks"]
        assert found["victim"] == "b"
        assert found["notice_posted"] is True
        # Keys as a person reads them (not `namespace::f1`), the repository once.
        assert found["summary"] == (
            f"b waits for f1 (held by a) -> a waits for f2 (held by b) (in {store.namespace})"
        )
        assert DeadlockInfo.model_validate(found["deadlock"]).victim_waits_on == node(store, "f1")
        notice = VictimNoticeBoard(lock_dir).read("b")
        assert notice is not None
        assert notice.deadlock.victim == "b"

        again = await anyio.to_thread.run_sync(run_monitor, lock_dir, "--once")
        assert again.returncode == 6
        assert "victim: b (already noticed)" in again.stdout
        assert "deadlock: b waits for f1 (held by a) -> a waits for f2" in again.stdout
        assert VictimNoticeBoard(lock_dir).read("b") == notice  # not replaced

    # The waits are over: the notice is stale, and the next pass removes it.
    done = await anyio.to_thread.run_sync(run_monitor, lock_dir, "--once")
    assert done.returncode == 0
    assert "removed a stale victim notice for b" in done.stdout
    assert VictimNoticeBoard(lock_dir).read("b") is None


def test_the_long_running_monitor_stops_cleanly_on_sigterm(lock_dir: Path) -> None:
    process = subprocess.Popen(
        [LOCKYARD, "monitor", "--lock-dir", str(lock_dir), "--verbose"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith(f"watching {lock_dir} for deadlocks")
    process.send_signal(signal.SIGTERM)
    _out, err = process.communicate(timeout=20)
    assert process.returncode == 0
    assert "Traceback" not in err


# --- agreement with the in-process monitor ------------------------------------------------


async def test_in_process_and_cross_process_monitors_agree(
    store: LockStore, lock_dir: Path
) -> None:
    """The same scenario through the tools with an orchestrator's monitor, and from disk."""
    seen: list[DeadlockInfo] = []
    in_process = DeadlockMonitor(on_deadlock=seen.append)
    agents = {}
    for name in ("carol", "alice", "bob"):  # registered (started) in this order
        in_process.register_agent(name)
        agents[name] = LockTools(store, name, emit_lock_event=in_process.handle_event)
        await anyio.sleep(0.01)
    # carol holds two locks, alice and bob one each: alice or bob gives way, the younger (bob).
    for name, files in (("carol", ["c1", "c2"]), ("alice", ["a1"]), ("bob", ["b1"])):
        assert (await agents[name].acquire({"filepaths": files})).data["all_acquired"]  # type: ignore[index]

    async with anyio.create_task_group() as group:
        for name, wanted in (("carol", "a1"), ("alice", "b1"), ("bob", "c2")):
            group.start_soon(agents[name].acquire, {"filepaths": [wanted], "timeout_seconds": 60})
        await wait_until_async(lambda: len(seen) == 1)
        cross = CrossProcessMonitor(lock_dir, resolve=False)
        report = await cross.check_once()
        group.cancel_scope.cancel()

    [mine] = [resolution.deadlock for resolution in report.resolutions]
    [theirs] = seen
    assert mine.victim == theirs.victim == "bob"
    assert mine.within(store.namespace).cycle == theirs.cycle  # both start at the victim
    assert mine.victim_waits_on == node(store, "c2")
    assert theirs.victim_waits_on == store.canonicalize("c2") == "c2"


async def test_agent_ages_and_counts_come_from_the_lock_records(store: LockStore) -> None:
    assert store.try_lock("old", "a")
    await anyio.sleep(0.01)
    assert store.try_lock("x", "b")
    assert store.try_lock("newer", "a")
    snapshot = WaitForReader(store).read()
    starts = snapshot.agent_start_times()
    assert starts["a"] == store.holder_record("old").acquired_at  # type: ignore[union-attr]
    assert starts["a"] < starts["b"]
    assert snapshot.holders() == {
        node(store, "old"): "a",
        node(store, "x"): "b",
        node(store, "newer"): "a",
    }


def test_a_dead_waiters_queue_entry_is_no_wait(
    store: LockStore, repo: Path, lock_dir: Path
) -> None:
    assert store.try_lock("f1", "a")
    code = (
        "import sys; from lockyard.infra.lockstore.lockdir.store import LockStore; "
        f"s = LockStore({str(repo)!r}, {str(lock_dir)!r}); print('go', flush=True); "
        "s.acquire('f1', 'ghost', 60)"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline() == "go\n"
    wait_until(lambda: store.waiters("f1"), "ghost queued for f1")
    assert WaitForReader(store).read().has_wait("ghost", node(store, "f1"), None)
    process.kill()
    process.wait()
    assert [w.agent_id for w in store.waiters("f1")] == ["ghost"]  # still on disk ...
    assert not WaitForReader(store).read().waits  # ... but not a wait


# --- the loop, in process: push and polling ------------------------------------------------


@pytest.mark.parametrize("polling", [False, True])
async def test_the_running_monitor_resolves_a_deadlock_between_tool_users(
    store: LockStore, lock_dir: Path, polling: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if polling:
        monkeypatch.setenv("LOCKYARD_NO_INOTIFY", "1")
    state = WaitForReader(store)
    alice, bob = (
        LockTools(
            store,
            name,
            victim_notices=FileVictimNotices(lock_dir, state.still_waiting, poll_interval=0.05),
        )
        for name in ("alice", "bob")
    )
    assert (await alice.acquire({"filepaths": ["f1"]})).data["all_acquired"]  # type: ignore[index]
    await anyio.sleep(0.01)
    assert (await bob.acquire({"filepaths": ["f2"]})).data["all_acquired"]  # type: ignore[index]
    reports: list[PassReport] = []
    results: dict[str, Any] = {}

    async def blocked(name: str, tools: LockTools, path: str) -> None:
        outcome = await tools.acquire({"filepaths": [path], "timeout_seconds": 30})
        results[name] = json.loads(outcome.text)

    monitor = CrossProcessMonitor(lock_dir)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: monitor.run(reports.append, poll_interval=0.05, rescan_seconds=0.5)
            )
            async with anyio.create_task_group() as agents:
                agents.start_soon(blocked, "alice", alice, "f2")
                agents.start_soon(blocked, "bob", bob, "f1")
            group.cancel_scope.cancel()

    assert results["bob"]["deadlock"]["victim"] == "bob"
    assert results["alice"]["all_acquired"] is True
    assert [r.deadlock.victim for report in reports for r in report.resolutions] == ["bob"]
    assert store.holder("f2") == "alice"


async def test_a_retried_wait_gets_a_fresh_notice(store: LockStore, lock_dir: Path) -> None:
    """A victim that ignored its notice and waits again (a new queue entry) in the same cycle
    is noticed again: the old notice named the old wait and is useless now."""
    waits = two_agent_deadlock(store)
    monitor = CrossProcessMonitor(lock_dir)
    async with waiting(store, *waits):
        first = await monitor.check_once()
        assert [r.deadlock.victim for r in first.resolutions] == ["b"]
        assert (await monitor.check_once()).resolutions == []  # same wait: not again
    async with waiting(store, *waits):
        second = await monitor.check_once()
    [again] = second.resolutions
    assert again.notice is not None
    assert again.notice.wait_id != first.resolutions[0].notice.wait_id  # type: ignore[union-attr]


async def test_a_notice_is_only_accepted_for_the_wait_it_names(
    store: LockStore, lock_dir: Path
) -> None:
    waits = two_agent_deadlock(store)
    state = WaitForReader(store)
    async with waiting(store, *waits):
        await CrossProcessMonitor(lock_dir).check_once()
        posted = VictimNoticeBoard(lock_dir).read("b")
        assert posted is not None
        assert state.still_waiting(posted)
        stale = VictimNotice(agent_id="b", waits_on=posted.waits_on, wait_id="gone",
                             deadlock=posted.deadlock)  # fmt: skip
        assert not state.still_waiting(stale)


# --- the watcher ---------------------------------------------------------------------------


async def test_the_watcher_sees_locks_and_queue_entries(lock_dir: Path) -> None:
    with TreeWatcher(lock_dir, descend=lambda name: name.endswith(".q")) as watcher:
        assert watcher.pushing
        assert await watcher.changed(0.05) is False
        (lock_dir / "x.q").mkdir()
        assert await watcher.changed(5) is True
        (lock_dir / "x.q" / "1-entry").write_text("{}")
        assert await watcher.changed(5) is True
        (lock_dir / "other").mkdir()
        assert await watcher.changed(5) is True
        (lock_dir / "other" / "ignored").write_text("{}")
        assert await watcher.changed(0.1) is False


async def test_the_watcher_falls_back_to_polling(
    lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKYARD_NO_INOTIFY", "1")
    with TreeWatcher(lock_dir, poll_interval=0.01) as watcher:
        assert not watcher.pushing
        assert await watcher.changed(5) is True


async def test_the_watcher_follows_queues_that_existed_before_it(lock_dir: Path) -> None:
    (lock_dir / "old.q").mkdir()
    with TreeWatcher(lock_dir, descend=lambda name: name.endswith(".q")) as watcher:
        (lock_dir / "old.q" / "1-entry").write_text("{}")
        assert await watcher.changed(5) is True


async def test_the_watcher_of_a_vanished_root_only_times_out(tmp_path: Path) -> None:
    with TreeWatcher(tmp_path / "missing") as watcher:
        assert watcher.pushing
        assert await watcher.changed(0.05) is False


async def test_literal_keys_of_two_repositories_are_different_locks(
    tmp_path: Path, lock_dir: Path
) -> None:
    """`__db__` of repo one and `__db__` of repo two are two locks: a cycle through one of
    them is found with the right holder (one node for both would lose a hold)."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    first, second = LockStore(str(one), lock_dir), LockStore(str(two), lock_dir)
    assert first.try_lock("__db__", "a")
    assert first.try_lock("f", "a")
    assert second.try_lock("__db__", "b")
    async with anyio.create_task_group() as group:
        group.start_soon(first.acquire_async, "f", "b", 60)  # b waits for a
        group.start_soon(second.acquire_async, "__db__", "a", 60)  # a waits for b, in repo two
        await wait_until_async(lambda: len(first.snapshot().waits) == 2)
        snapshot = WaitForReader(first).read()
        report = await CrossProcessMonitor(lock_dir).check_once()
        group.cancel_scope.cancel()
    assert snapshot.holders() == {
        f"{one}::__db__": "a",
        f"{one}::f": "a",
        f"{two}::__db__": "b",
    }
    [found] = report.resolutions
    assert {(s.agent_id, s.lock_path, s.held_by) for s in found.deadlock.cycle} == {
        ("b", f"{one}::f", "a"),
        ("a", f"{two}::__db__", "b"),
    }
    first.close()
    second.close()


def test_the_monitor_stops_with_an_error_when_its_lock_dir_is_removed(lock_dir: Path) -> None:
    process = subprocess.Popen(
        [LOCKYARD, "monitor", "--lock-dir", str(lock_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith("watching")
    shutil.rmtree(lock_dir)  # with the leader file the monitor made when it began to lead
    _out, err = process.communicate(timeout=20)
    assert process.returncode == 3
    assert err.startswith(f"lockyard: error: stopped watching {lock_dir}: lock directory")
    assert "Traceback" not in err
