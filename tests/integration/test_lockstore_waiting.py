"""Waiting: push wake-ups, arrival order (also across processes), timeouts, cancel-safety."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest
from lockstore_support import expect_line, kill, spawn, until_queued

from lock_dir_listing import lock_dir_entries
from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.inotify import parse_events
from lockyard.infra.lockstore.lockdir import sleep
from lockyard.infra.lockstore.lockdir.sleep import WakeHub, process_hub
from lockyard.infra.lockstore.wakeup import Waker
from polling_support import wait_until


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> LockStore:
    return LockStore(repo, lock_dir)


def only_lock_entries(lock_dir: Path) -> list[str]:
    """Whatever is in the lock directory besides locks and holder cards."""
    return sorted(
        name for name in lock_dir_entries(lock_dir) if not name.endswith((".lock", ".card"))
    )


@pytest.mark.anyio
async def test_a_waiter_gets_the_lock_when_it_is_released(store: LockStore) -> None:
    assert store.try_lock("a.py", "alice")
    got: list[bool] = []

    async def bob() -> None:
        got.append(await store.acquire_async("a.py", "bob", timeout_seconds=30))

    async with anyio.create_task_group() as group:
        group.start_soon(bob)
        await until_queued(store, "a.py", ["bob"])
        assert [w.agent_id for w in store.waiters("a.py")] == ["bob"]
        assert store.snapshot().waits == (("bob", store.canonicalize("a.py")),)
        store.release("a.py", "alice")
    assert got == [True]
    assert store.holder("a.py") == "bob"
    assert store.waiters("a.py") == []


@pytest.mark.anyio
async def test_a_timed_out_wait_leaves_nothing_behind(store: LockStore, lock_dir: Path) -> None:
    assert store.try_lock("a.py", "alice")
    assert await store.acquire_async("a.py", "bob", timeout_seconds=0.05) is False
    assert store.acquire("a.py", "bob", timeout_seconds=0.05) is False
    assert store.waiters("a.py") == []
    assert only_lock_entries(lock_dir) == []
    assert store.holder("a.py") == "alice"


@pytest.mark.anyio
async def test_timeout_zero_never_blocks(store: LockStore) -> None:
    assert store.try_lock("a.py", "alice")
    assert await store.acquire_async("a.py", "bob", timeout_seconds=0) is False
    assert await store.acquire_async("b.py", "bob", timeout_seconds=0) is True
    assert store.waiters("a.py") == []


@pytest.mark.anyio
async def test_a_cancelled_wait_leaves_no_lock_and_no_queue_entry(
    store: LockStore, lock_dir: Path
) -> None:
    assert store.try_lock("a.py", "alice")
    with anyio.move_on_after(0.05) as scope:
        await store.acquire_async("a.py", "bob", timeout_seconds=30)
    assert scope.cancelled_caught
    assert store.waiters("a.py") == []
    assert only_lock_entries(lock_dir) == []
    store.release("a.py", "alice")
    assert store.holder("a.py") is None


@pytest.mark.anyio
async def test_cancelling_the_head_passes_the_turn_to_the_next_waiter(store: LockStore) -> None:
    assert store.try_lock("a.py", "alice")
    order: list[str] = []

    async def wait_for(agent: str) -> None:
        if await store.acquire_async("a.py", agent, timeout_seconds=30):
            order.append(agent)
            store.release("a.py", agent)

    async with anyio.create_task_group() as group:
        head_scope = anyio.CancelScope()
        group.start_soon(_run_in, head_scope, wait_for, "bob")
        await until_queued(store, "a.py", ["bob"])
        group.start_soon(wait_for, "carol")
        await until_queued(store, "a.py", ["bob", "carol"])
        head_scope.cancel()
        await until_queued(store, "a.py", ["carol"])
        store.release("a.py", "alice")
    assert order == ["carol"]


async def _run_in(scope: anyio.CancelScope, func: object, *args: object) -> None:
    with scope:
        await func(*args)  # type: ignore[operator]


@pytest.mark.anyio
async def test_waiters_are_granted_in_arrival_order(store: LockStore) -> None:
    assert store.try_lock("a.py", "holder")
    agents = [f"agent-{n}" for n in range(6)]
    order: list[str] = []

    async def wait_for(agent: str) -> None:
        assert await store.acquire_async("a.py", agent, timeout_seconds=30)
        order.append(agent)
        await anyio.sleep(0.001)
        assert store.release("a.py", agent)

    async with anyio.create_task_group() as group:
        for n, agent in enumerate(agents):
            group.start_soon(wait_for, agent)
            await until_queued(store, "a.py", agents[: n + 1])
        store.release("a.py", "holder")
    assert order == agents


def test_try_lock_does_not_jump_ahead_of_a_live_queued_waiter(
    repo: Path, lock_dir: Path, store: LockStore, tmp_path: Path
) -> None:
    assert store.try_lock("a.py", "holder")
    waiter = spawn(repo, lock_dir, "a.py", "queued", "wait", "100", str(tmp_path / "log"))
    expect_line(waiter, "waiting")
    wait_until(lambda: [w.agent_id for w in store.waiters("a.py")] == ["queued"])
    waiter.send_signal(signal.SIGSTOP)  # alive, queued, and unable to take its turn
    try:
        assert store.release("a.py", "holder")
        # free for the waiter, or handed over to it (when it staged its grant before it was
        # stopped): its turn either way
        assert store.holder("a.py") in (None, "queued")
        assert store.try_lock("a.py", "latecomer") is False
        assert store.acquire("a.py", "latecomer", timeout_seconds=0) is False
    finally:
        waiter.send_signal(signal.SIGCONT)
    expect_line(waiter, "acquired")
    waiter.wait()
    assert (tmp_path / "log").read_text().split() == ["queued"]
    assert store.try_lock("a.py", "latecomer")


@pytest.mark.anyio
async def test_the_holder_can_reacquire_while_others_queue(store: LockStore) -> None:
    assert store.try_lock("a.py", "holder")
    async with anyio.create_task_group() as group:
        group.start_soon(store.acquire_async, "a.py", "bob", 30)
        await until_queued(store, "a.py", ["bob"])
        assert store.try_lock("a.py", "holder")
        assert await store.acquire_async("a.py", "holder", timeout_seconds=5)
        assert store.release("a.py", "holder")
    assert store.holder("a.py") == "bob"


def test_fifo_across_processes(
    repo: Path, lock_dir: Path, store: LockStore, tmp_path: Path
) -> None:
    assert store.try_lock("a.py", "holder")
    log = tmp_path / "order.log"
    agents = [f"proc-{n}" for n in range(4)]
    children = []
    for n, agent in enumerate(agents):
        child = spawn(repo, lock_dir, "a.py", agent, "wait", "100", str(log))
        expect_line(child, "waiting")
        children.append(child)
        wait_until(lambda n=n: [w.agent_id for w in store.waiters("a.py")] == agents[: n + 1])
    assert store.release("a.py", "holder")
    for child in children:
        expect_line(child, "acquired")
        child.wait()
    assert log.read_text().split() == agents


def test_push_wakes_a_waiter_in_another_process_without_polling(repo: Path, lock_dir: Path) -> None:
    holder = spawn(repo, lock_dir, "a.py", "holder", "hold")
    expect_line(holder, "locked")
    # Polls every 60 s and re-checks liveness every 60 s: only a push can wake it in time.
    store = LockStore(repo, lock_dir, liveness_interval=60)
    assert process_hub().push_available
    result: list[bool] = []
    thread = threading.Thread(
        target=lambda: result.append(store.acquire("a.py", "bob", 20, poll_interval_ms=60_000))
    )
    thread.start()
    wait_until(lambda: [w.agent_id for w in store.waiters("a.py")] == ["bob"])
    release = (
        "from lockyard.infra.lockstore import LockStore; import sys; "
        "LockStore(sys.argv[1], sys.argv[2]).cleanup_agent_locks('holder')"
    )
    subprocess.run([sys.executable, "-c", release, str(repo), str(lock_dir)], check=True)
    thread.join(30)
    assert result == [True]
    kill(holder)


def test_polling_fallback_when_push_is_disabled(repo: Path, lock_dir: Path) -> None:
    holder = spawn(repo, lock_dir, "a.py", "holder", "hold")
    expect_line(holder, "locked")
    store = LockStore(repo, lock_dir, use_inotify=False)
    result: list[bool] = []
    thread = threading.Thread(
        target=lambda: result.append(store.acquire("a.py", "bob", 20, poll_interval_ms=10))
    )
    thread.start()
    wait_until(lambda: [w.agent_id for w in store.waiters("a.py")] == ["bob"])
    kill(holder)  # no release at all: found dead by the polling waiter
    thread.join(30)
    assert result == [True]


def test_inotify_can_be_disabled_by_environment(repo: Path, lock_dir: Path) -> None:
    probe = (
        "from lockyard.infra.lockstore.lockdir.sleep import process_hub; "
        "print(process_hub().push_available)"
    )
    env = {**os.environ, "LOCKYARD_NO_INOTIFY": "1"}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_a_blocking_waiter_in_a_thread_is_woken_in_process(store: LockStore) -> None:
    assert store.try_lock("a.py", "alice")
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(store.acquire("a.py", "bob", 20)))
    thread.start()
    wait_until(lambda: bool(store.waiters("a.py")))
    store.release("a.py", "alice")
    thread.join(30)
    assert result == [True]


def test_a_hub_without_inotify_still_notifies_in_process() -> None:
    hub = WakeHub(inotify_enabled=False)
    assert not hub.push_available
    assert not hub.watch("/tmp")
    hub.unwatch("/tmp")
    waker = Waker()
    hub.subscribe("/x/a", waker)
    hub.notify("/x/b")
    assert not waker.wait(0)
    hub.notify("/x/a")
    assert waker.wait(0)
    waker.clear()
    assert not waker.wait(0)
    hub.subscribe("/x/", waker)
    hub.notify("/x/anything")
    assert waker.wait(0)
    hub.unsubscribe("/x/a", waker)
    hub.unsubscribe("/x/", waker)
    hub.unsubscribe("/x/never", waker)
    waker.close()
    waker.wake()  # after close: ignored, never writes to a reused fd
    hub.close()


def test_inotify_events_are_parsed() -> None:
    import struct

    name = b"abc.lock\x00\x00\x00\x00"
    data = struct.pack("iIII", 3, 0x200, 0, len(name)) + name
    data += struct.pack("iIII", 4, 0x4000, 0, 0)
    assert list(parse_events(data)) == [(3, 0x200, "abc.lock"), (4, 0x4000, "")]


def test_a_hub_watches_and_reports_directory_events(tmp_path: Path) -> None:
    hub = WakeHub()
    assert hub.push_available
    waker = Waker()
    hub.subscribe(f"{tmp_path}/x", waker)
    assert hub.watch(str(tmp_path))
    assert hub.watch(str(tmp_path))  # counted, one kernel watch
    (tmp_path / "x").mkdir()
    assert waker.wait(10)
    hub.unwatch(str(tmp_path))
    hub.unwatch(str(tmp_path))
    assert not hub.watch(str(tmp_path / "missing"))
    sub = tmp_path / "sub"
    sub.mkdir()
    assert hub.watch(str(sub))
    sub.rmdir()  # the kernel drops the watch (IN_IGNORED)
    wait_until(lambda: str(sub) not in hub._watch_of_path)
    hub.unsubscribe(f"{tmp_path}/x", waker)
    waker.close()
    hub.close()


def test_a_hub_watching_one_entry_hears_of_its_end_and_of_nothing_else_in_its_directory(
    tmp_path: Path,
) -> None:
    hub = WakeHub()
    assert hub.push_available
    entry, other, sibling = (tmp_path / name for name in ("0001", "0002", "0003"))
    os.symlink("a waiter's record", entry)
    os.symlink("another record", other)
    woken = {path: Waker() for path in (entry, other, sibling)}
    for path, waker in woken.items():
        hub.subscribe(str(path), waker)
    assert hub.watch_entry(str(entry))
    assert hub.watch_entry(str(other))
    os.symlink("a newcomer", sibling)  # the directory changes: nobody watches it
    sibling.unlink()
    os.utime(entry, ns=(1, 1), follow_symlinks=False)  # a stamp of its turn is no end
    other.unlink()
    assert woken[other].wait(10)
    # One inotify instance reports in order: whatever came before `other`'s end is in.
    assert not woken[entry].wait(0)
    assert not woken[sibling].wait(0)
    entry.unlink()
    assert woken[entry].wait(10)
    assert hub.watch_entry(str(entry)) is None  # gone: the caller's next look sees it
    os.symlink("the ticket taken again", entry)  # the same name, a new entry
    woken[entry].clear()
    assert hub.watch_entry(str(entry))
    entry.unlink()
    assert woken[entry].wait(10)
    for path, waker in woken.items():
        hub.unwatch(str(path))
        hub.unsubscribe(str(path), waker)
        waker.close()
    hub.close()


@pytest.mark.anyio
async def test_a_waiter_whose_entry_vanished_queues_again(repo: Path, lock_dir: Path) -> None:
    store = LockStore(repo, lock_dir, liveness_interval=0.02)
    assert store.try_lock("a.py", "alice")
    async with anyio.create_task_group() as group:
        group.start_soon(store.acquire_async, "a.py", "bob", 30)
        await until_queued(store, "a.py", ["bob"])
        [queue] = [lock_dir / n for n in os.listdir(lock_dir) if n.endswith(".q")]
        shutil.rmtree(queue)  # someone wiped the queue under the waiter
        await until_queued(store, "a.py", ["bob"])
        store.release("a.py", "alice")
    assert store.holder("a.py") == "bob"


def test_a_forked_child_gets_its_own_identity_and_hub(store: LockStore) -> None:
    assert store.try_lock("a.py", "parent")
    assert store.acquire("a.py", "other", timeout_seconds=0.01) is False  # hub has inotify now
    parent_hub = process_hub()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, reported through the exit code
        ok = (
            process_hub() is not parent_hub
            and store.acquire("a.py", "child", timeout_seconds=0.05) is False
            and store.try_lock("b.py", "child")
            and store.holder_record("b.py").pid == os.getpid()  # type: ignore[union-attr]
        )
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.holder("b.py") == "child"


def test_a_holder_that_dies_wakes_the_head_at_once(repo: Path, lock_dir: Path) -> None:
    holder = spawn(repo, lock_dir, "a.py", "crasher", "hold")
    expect_line(holder, "locked")
    # Polls every 60 s and re-checks liveness every 60 s: only the holder's pidfd can wake it.
    store = LockStore(repo, lock_dir, liveness_interval=60)
    result: list[bool] = []
    thread = threading.Thread(
        target=lambda: result.append(store.acquire("a.py", "bob", 20, poll_interval_ms=60_000))
    )
    thread.start()
    wait_until(lambda: [w.agent_id for w in store.waiters("a.py")] == ["bob"])
    wait_until(lambda: bool(process_hub().exits._watch_of_pid))
    kill(holder)
    thread.join(30)
    assert result == [True]


def test_a_predecessor_that_dies_wakes_its_successor_at_once(
    repo: Path, lock_dir: Path, tmp_path: Path
) -> None:
    store = LockStore(repo, lock_dir, liveness_interval=60)
    assert store.try_lock("a.py", "holder")
    doomed = spawn(repo, lock_dir, "a.py", "doomed", "wait", "60000", str(tmp_path / "log"))
    expect_line(doomed, "waiting")
    wait_until(lambda: [w.agent_id for w in store.waiters("a.py")] == ["doomed"])
    doomed.send_signal(signal.SIGSTOP)  # alive and queued, but it will never take its turn
    result: list[bool] = []
    thread = threading.Thread(
        target=lambda: result.append(store.acquire("a.py", "bob", 20, poll_interval_ms=60_000))
    )
    thread.start()
    wait_until(lambda: [w.agent_id for w in store.waiters("a.py")] == ["doomed", "bob"])
    wait_until(lambda: doomed.pid in process_hub().exits._watch_of_pid)
    assert store.release("a.py", "holder")
    kill(doomed)
    thread.join(30)
    assert result == [True]
    assert store.holder("a.py") == "bob"


def test_a_hub_reports_process_exits() -> None:
    hub = WakeHub()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    waker = Waker()
    hub.subscribe(f"pid:{child.pid}", waker)
    assert hub.exits.watch(child.pid)
    assert hub.exits.watch(child.pid)  # counted: one pidfd
    hub.exits.unwatch(child.pid)
    assert child.pid in hub.exits._watch_of_pid
    kill(child)
    assert waker.wait(10)
    wait_until(lambda: child.pid not in hub.exits._watch_of_pid)  # an exited process is forgotten
    hub.exits.unwatch(child.pid)
    assert not hub.exits.watch(child.pid)  # reaped: no such process any more
    assert not WakeHub(inotify_enabled=False).exits.watch(os.getpid())
    assert hub.exits.watch(os.getpid())
    hub.close()
    waker.close()


def test_a_pidfd_nobody_follows_is_kept_for_the_next_wait_until_its_process_exits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sleep, "_IDLE_PIDFDS", 1)
    hub = WakeHub()
    children = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)
    ]
    first, second = children
    try:
        assert hub.exits.watch(first.pid)
        pidfd = hub.exits._watch_of_pid[first.pid][0]
        hub.exits.unwatch(first.pid)
        hub.exits.unwatch(first.pid)  # once too often: still kept, once
        assert hub.exits._watch_of_pid[first.pid] == (pidfd, 0)  # nobody follows it; still open
        assert hub.exits.watch(first.pid)
        assert hub.exits._watch_of_pid[first.pid] == (pidfd, 1)  # the same pidfd, not a new one
        hub.exits.unwatch(first.pid)
        waker = Waker()
        hub.subscribe(f"pid:{first.pid}", waker)
        kill(first)
        assert waker.wait(10)  # an idle pidfd still reports the exit ...
        wait_until(lambda: first.pid not in hub.exits._watch_of_pid)  # ... and is closed then
        waker.close()
        assert hub.exits.watch(second.pid)
        hub.exits.unwatch(second.pid)
        assert hub.exits.watch(os.getpid())
        hub.exits.unwatch(os.getpid())  # one idle pidfd at most here: the oldest goes
        assert second.pid not in hub.exits._watch_of_pid
        assert hub.exits._watch_of_pid[os.getpid()][1] == 0
    finally:
        for child in children:
            kill(child)
        hub.close()
