"""A release hands the lock to a head waiting in the same process and accepts it for that
head at once: the races around that acceptance, and the parked wake-up that ends the wait.

The acceptance is the head's own (removing its queue entry), done by the releasing thread
while the head's thread is outside its rounds; the lock directory stays what every other
process reads. Waits are `waiting.Waiting`s driven round by round (as the sync and async
loops drive them), or real `acquire_async` tasks and `acquire` threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from handover_support import FILE, leftovers, looked_once, name_of, queued, waiting_agents

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.lockdir import disk
from lockyard.infra.lockstore.wakeup import Waker


def test_a_release_accepts_the_grant_for_a_head_in_this_process(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.try_lock(FILE, "holder")
    head = looked_once(store, "b")
    assert store.release(FILE, "holder")
    assert store.holder(FILE) == "b"
    assert waiting_agents(store) == []  # accepted: b left the queue at the release
    assert not store.try_lock(FILE, "newcomer")

    def no_look(*_args: object, **_options: object) -> None:
        raise AssertionError("the head looked at the lock directory again")

    for call in ("readlink", "access", "lstat", "rename", "unlink"):
        monkeypatch.setattr(disk.os, call, no_look)
    assert head.advance()  # returns at once: nothing left to read or write
    monkeypatch.undo()
    head.__exit__(None, None, None)
    assert store.holder(FILE) == "b"
    assert leftovers(store) == []
    assert store.release(FILE, "b")
    assert store.holder(FILE) is None


def test_the_successor_becomes_first_when_the_release_accepts_for_the_head(
    store: LockStore,
) -> None:
    assert store.try_lock(FILE, "holder")
    head = looked_once(store, "b")
    behind = queued(store, "c")
    assert not behind.advance()
    assert store.release(FILE, "holder")
    assert waiting_agents(store) == ["c"]
    assert not behind.advance()  # first now, behind b's lock: it stages its grant
    assert head.advance()
    head.__exit__(None, None, None)
    assert store.release(FILE, "b")
    assert store.holder(FILE) == "c"  # handed on, and accepted for c in turn
    assert waiting_agents(store) == []
    assert behind.advance()
    behind.__exit__(None, None, None)
    assert store.release(FILE, "c")
    assert leftovers(store) == []


@pytest.mark.parametrize("successor", [True, False])
def test_a_wait_that_ends_after_the_release_accepted_for_it_passes_the_lock_on(
    store: LockStore, successor: bool
) -> None:
    """Timed out or cancelled between the release and its next look: it never returns the
    lock, so it must not keep it."""
    assert store.try_lock(FILE, "holder")
    head = looked_once(store, "b")
    behind = queued(store, "c") if successor else None
    if behind is not None:
        assert not behind.advance()
    assert store.release(FILE, "holder")
    assert store.holder(FILE) == "b"
    head.__exit__(None, None, None)
    if behind is None:
        assert store.holder(FILE) is None
        assert store.try_lock(FILE, "newcomer")
    else:
        assert store.holder(FILE) is None  # c's turn: it had not staged yet
        assert not store.try_lock(FILE, "newcomer")
        assert behind.advance()
        behind.__exit__(None, None, None)
        assert store.holder(FILE) == "c"
    assert waiting_agents(store) == []
    assert leftovers(store) == []


def test_a_head_in_its_own_round_is_left_to_accept_for_itself(store: LockStore) -> None:
    """The release runs while the head's thread is inside a round (its guard held): the
    release only hands over and wakes it; the head accepts in its next round."""
    assert store.try_lock(FILE, "holder")
    head = looked_once(store, "b")
    with head._guard:
        assert store.release(FILE, "holder")
    assert store.holder(FILE) == "b"
    assert waiting_agents(store) == ["b"]  # handed over, not accepted yet
    assert head.advance()
    assert waiting_agents(store) == []
    head.__exit__(None, None, None)
    assert store.holder(FILE) == "b"
    assert leftovers(store) == []


def test_a_head_passed_over_as_the_lock_is_handed_to_it_queues_again(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its entry is ended (`lockyard clean`) between the handover and the acceptance: the
    acceptance fails, the grant goes back with the entry, and the head queues again."""
    assert store.try_lock(FILE, "holder")
    head = looked_once(store, "b")
    name = name_of(store)
    [(entry, record)] = store.read_queue(name)
    hand_over = store._dir.hand_over

    def ended_before_acceptance(
        lock: str, to: str, *, accept: Callable[[str], bool] | None = None
    ) -> bool:
        assert accept is not None  # the head is in this process

        def ended_then_accept(grant: str) -> bool:
            assert store._queues.end_wait(name, entry, record)  # takes the grant back too
            return accept(grant)

        return hand_over(lock, to, accept=ended_then_accept)

    monkeypatch.setattr(store._dir, "hand_over", ended_before_acceptance)
    assert store.release(FILE, "holder")
    monkeypatch.undo()
    assert store.holder(FILE) is None
    assert waiting_agents(store) == []
    assert head.advance()  # out of line: it queues again, first at a free lock, and takes it
    head.__exit__(None, None, None)
    holder = store.holder_record(FILE)
    assert holder is not None
    assert holder.agent_id == "b"
    assert holder.token != record.token
    assert leftovers(store) == []


def test_a_release_that_remembers_an_ended_head_whose_ticket_was_taken_again_grants_in_order(
    store: LockStore, repo: Path, lock_dir: Path
) -> None:
    """The release remembers b as first, but b's wait was ended (`lockyard clean`) and a
    waiter of another store took b's ticket in a new queue: the grant handed to b is passed
    on to that waiter, and b queues again behind it."""
    assert store.try_lock(FILE, "holder")
    ended = looked_once(store, "b")
    assert store.end_waits("b")
    with LockStore(repo, lock_dir) as other:
        key = other.canonicalize(FILE)
        newcomer = other._waiting(name_of(other), key, "c", 0.05)
        newcomer.__enter__()
        assert not newcomer.advance()  # first in the new queue, under b's old ticket
        assert store.release(FILE, "holder")
        assert store.holder(FILE) == "b"  # handed to b, which is out of line
        assert not ended.advance()  # b passes it on, and queues again
        assert store.holder(FILE) == "c"
        assert waiting_agents(store) == ["b"]
        assert newcomer.advance()
        newcomer.__exit__(None, None, None)
    assert store.release(FILE, "c")
    assert store.holder(FILE) == "b"
    assert ended.advance()
    ended.__exit__(None, None, None)
    assert leftovers(store) == []


def test_a_head_withdrawing_its_grant_as_the_release_renames_it_is_not_accepted_for(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head is leaving (its record taken back) when the release renames its staging
    onto the lock: the acceptance is refused (the head's exit holds its guard), the release
    finds no grant in the lock and frees it."""
    assert store.try_lock(FILE, "holder")
    head = looked_once(store, "b")
    discard = store._dir.discard_staging
    released: list[bool] = []

    def release_in_between(staging: str, token: str) -> None:
        if not released:
            released.append(store.release(FILE, "holder"))
        discard(staging, token)

    monkeypatch.setattr(store._dir, "discard_staging", release_in_between)
    head.__exit__(None, None, None)
    assert released == [True]
    assert store.holder(FILE) is None
    assert not (store.lock_dir / f"{name_of(store)}.lock").exists()  # no empty lock left
    assert waiting_agents(store) == []
    assert leftovers(store) == []
    assert store.try_lock(FILE, "newcomer")


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
async def test_a_task_cancelled_as_the_release_accepts_for_it_passes_the_lock_on(
    store: LockStore,
) -> None:
    """Cancelled while parked, then accepted for by the release before it runs again: the
    wait ends cancelled, so the lock goes on."""
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
        assert store.release(FILE, "holder")  # accepted for b, which has not run since
        assert store.holder(FILE) == "b"
        assert waiting_agents(store) == []
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
