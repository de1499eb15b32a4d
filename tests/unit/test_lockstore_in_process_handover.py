"""A release hands the lock to a head waiting in the same process: what the head finds when it
looks, and the parked wake-up that ends its wait.

Waits are the line's `wait` recipe driven one look at a time (`stepped_waits.SteppedWait`),
or real `acquire_async` tasks and `acquire` threads.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.lockdir import disk
from lockyard.infra.lockstore.lockdir.sleep import process_hub
from lockyard.infra.lockstore.wakeup import Waker
from stepped_waits import FILE, SteppedWait, leftovers, looked_once, name_of, waiting_agents


def test_a_release_hands_the_lock_to_a_head_here_which_accepts_it_when_it_looks(
    store: LockStore,
) -> None:
    assert store.try_lock(FILE, "holder")
    head = looked_once(store, "b")
    assert not head.rung()
    assert store.release(FILE, "holder")
    assert head.rung()  # notified in this process
    assert store.holder(FILE) == "b"  # never free in between
    assert waiting_agents(store) == ["b"]  # still its turn until it accepts
    assert not store.try_lock(FILE, "newcomer")
    assert head.look()  # accepted: it left the queue
    assert waiting_agents(store) == []
    assert leftovers(store) == []
    assert store.release(FILE, "b")
    assert store.holder(FILE) is None


def test_a_release_finds_the_newcomer_who_took_an_ended_heads_ticket_and_hands_it_the_lock(
    store: LockStore, repo: Path, lock_dir: Path
) -> None:
    """b's wait was ended (`lockyard clean`) and a waiter of another store took b's ticket in
    a new queue: the release hands the lock to that waiter, and b queues again behind it."""
    assert store.try_lock(FILE, "holder")
    ended = looked_once(store, "b")
    assert store.end_waits("b")
    with LockStore(repo, lock_dir) as other:
        newcomer = SteppedWait(other, "c")
        assert newcomer.place.entry == ended.place.entry  # b's old ticket
        assert not newcomer.look()  # first in the new queue: it stages its grant
        assert store.release(FILE, "holder")
        assert store.holder(FILE) == "c"
        assert not ended.look()  # out of line: it queues again
        assert waiting_agents(store) == ["c", "b"]
        assert newcomer.look()
    assert waiting_agents(store) == ["b"]
    assert store.release(FILE, "c")
    assert store.holder(FILE) is None  # b staged nothing behind c: freed, b's turn
    assert not store.try_lock(FILE, "newcomer")
    assert ended.look()
    assert store.holder(FILE) == "b"
    assert leftovers(store) == []


@pytest.mark.anyio
async def test_a_task_handed_the_lock_by_another_task_returns_it(store: LockStore) -> None:
    assert store.try_lock(FILE, "holder")
    got: list[bool] = []

    async def waiter() -> None:
        got.append(await store.acquire_async(FILE, "b", timeout_seconds=30))

    async with anyio.create_task_group() as group:
        group.start_soon(waiter)
        while not leftovers(store):  # first in line, its grant staged
            await anyio.lowlevel.checkpoint()
        assert store.release(FILE, "holder")
    assert got == [True]
    assert store.holder(FILE) == "b"
    assert leftovers(store) == []


@pytest.mark.anyio
async def test_a_task_cancelled_as_the_release_hands_it_the_lock_passes_the_lock_on(
    store: LockStore,
) -> None:
    """Cancelled while parked, then handed the lock by the release before it runs again:
    the wait ends cancelled, so the lock goes on."""
    assert store.try_lock(FILE, "holder")
    outcome: list[bool] = []

    async def waiter(scope: anyio.CancelScope) -> None:
        with scope:
            outcome.append(await store.acquire_async(FILE, "b", timeout_seconds=30))

    scope = anyio.CancelScope()
    async with anyio.create_task_group() as group:
        group.start_soon(waiter, scope)
        while not leftovers(store):
            await anyio.lowlevel.checkpoint()
        scope.cancel()
        assert store.release(FILE, "holder")  # handed to b, which has not run since
        assert store.holder(FILE) == "b"
    assert outcome == []
    assert store.holder(FILE) is None  # passed on: nobody else waits
    assert waiting_agents(store) == []
    assert leftovers(store) == []


def test_a_thread_handed_the_lock_by_another_thread_returns_it(store: LockStore) -> None:
    assert store.try_lock(FILE, "holder")
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(store.acquire(FILE, "b", 30)))
    waiter.start()
    while not leftovers(store):  # first in line, its grant staged
        threading.Event().wait(0.001)
    assert store.release(FILE, "holder")
    waiter.join()
    assert got == [True]
    assert store.holder(FILE) == "b"


class _Interrupted(BaseException):
    """An interrupt (as KeyboardInterrupt is) of the release's thread."""


def _stands_in(thread: threading.Thread, function: str) -> bool:
    """Whether `thread` is running `function` now (somewhere down its stack)."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


def _claimed_head(
    store: LockStore, then: Callable[[threading.Thread], None]
) -> tuple[bool | None, list[bool]]:
    """b waits in a thread and sleeps first in line with its grant staged; the holder's
    release claims it (`AsleepHeads.claim`), then `then(b's thread)` runs before the
    release goes on. What the release returned (None: interrupted), and what b's acquire
    returned."""
    assert store.try_lock(FILE, "holder")
    got: list[bool] = []
    # A daemon: a b that sleeps on for ever fails the test, and must not hang the run.
    waiter = threading.Thread(target=lambda: got.append(store.acquire(FILE, "b", 30)), daemon=True)
    claim = store.operations.claim_asleep

    def claim_then(token: str) -> str | None:
        entry = claim(token)
        assert entry is not None, "b was not asleep when the release claimed it"
        then(waiter)
        return entry

    store.operations.claim_asleep = claim_then  # type: ignore[method-assign]
    waiter.start()
    hub = process_hub()
    while not any(hub.heads.is_asleep(e.partition(disk.STAGING_MARK)[2]) for e in leftovers(store)):
        threading.Event().wait(0.001)  # until b sleeps, its grant staged
    released: bool | None = None
    with contextlib.suppress(_Interrupted):
        released = store.release(FILE, "holder")
    waiter.join(60)
    assert not waiter.is_alive(), "b sleeps on for ever"
    return released, got


def test_a_head_that_wakes_while_a_release_accepts_for_it_awaits_that_and_holds_the_lock(
    store: LockStore,
) -> None:
    """b wakes (as when its wait times out) while the release that claimed it accepts its
    grant: b waits for that verdict and ends holding the lock, the grant being its own."""

    def wake_it(waiter: threading.Thread) -> None:
        store.operations.lock_changed(name_of(store))  # what b listens to
        while not _stands_in(waiter, "_wake_up"):  # awake, awaiting the verdict
            threading.Event().wait(0.001)

    assert _claimed_head(store, wake_it) == (True, [True])
    assert store.holder(FILE) == "b"
    assert waiting_agents(store) == []
    assert leftovers(store) == []
    assert store.release(FILE, "b")


def test_a_release_interrupted_after_claiming_a_head_still_wakes_it(store: LockStore) -> None:
    """The release that claimed b is interrupted before it removed b's entry: b does not
    sleep on its verdict for ever; it wakes, finds the grant handed over to it, and takes
    it."""
    dequeue = store.operations.dequeue

    def interrupted(name: str, entry: str, token: str) -> bool:
        store.operations.dequeue = dequeue  # type: ignore[method-assign]
        raise _Interrupted

    def interrupt_the_removal(_waiter: threading.Thread) -> None:
        store.operations.dequeue = interrupted  # type: ignore[method-assign]

    assert _claimed_head(store, interrupt_the_removal) == (None, [True])
    assert store.holder(FILE) == "b"
    assert waiting_agents(store) == []
    assert leftovers(store) == []


# -- the parked wake-up --------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_wake_from_another_thread_ends_a_parked_wait() -> None:
    waker = Waker()
    try:
        async with anyio.create_task_group() as group:
            woken: list[bool] = []

            async def wait() -> None:
                woken.append(await waker.wait_async(30))

            group.start_soon(wait)
            await anyio.lowlevel.checkpoint()
            await anyio.to_thread.run_sync(waker.wake)
        assert woken == [True]
    finally:
        waker.close()


@pytest.mark.anyio
async def test_a_wake_before_the_wait_ends_it_at_once_until_cleared() -> None:
    waker = Waker()
    try:
        waker.wake()
        assert await waker.wait_async(30)
        assert await waker.wait_async(30)  # level-triggered: still woken
        waker.clear()
        assert not await waker.wait_async(0.01)
        waker.wake()
        assert waker.wait(0)  # a thread's wait reads the same wake-up
    finally:
        waker.close()


@pytest.mark.anyio
async def test_closing_a_waker_ends_the_wait_parked_on_it() -> None:
    waker = Waker()
    woken: list[bool] = []

    async def wait() -> None:
        woken.append(await waker.wait_async(30))

    async with anyio.create_task_group() as group:
        group.start_soon(wait)
        await anyio.lowlevel.checkpoint()
        waker.close()
    assert woken == [True]
