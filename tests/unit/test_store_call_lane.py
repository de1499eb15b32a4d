"""Calls of one store that waits on a server run one at a time and in the order they were
made from the event loop (off_loop.store_call): the server then sees them in that order."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from lockyard.infra.lockstore.off_loop import store_call


class ServerStore:
    """A store whose calls are round trips: each takes a while in its thread."""

    waits_on_server = True

    def __init__(self) -> None:
        self.order: list[int] = []
        self.running = 0
        self.most_at_once = 0
        self._guard = threading.Lock()

    def call(self, number: int) -> int:
        with self._guard:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(0.002)
        with self._guard:
            self.order.append(number)
            self.running -= 1
        return number


@pytest.mark.anyio
async def test_calls_run_one_at_a_time_in_the_order_they_were_made() -> None:
    store = ServerStore()
    results: list[int] = []

    async def one(number: int) -> None:
        results.append(await store_call(store, store.call, number))

    async with anyio.create_task_group() as group:
        for number in range(40):
            group.start_soon(one, number)
    assert store.order == list(range(40))
    assert store.most_at_once == 1
    assert sorted(results) == list(range(40))


@pytest.mark.anyio
async def test_two_stores_have_lanes_of_their_own() -> None:
    first, second = ServerStore(), ServerStore()
    async with anyio.create_task_group() as group:
        for number in range(10):
            group.start_soon(store_call, first, first.call, number)
            group.start_soon(store_call, second, second.call, number)
    assert first.order == second.order == list(range(10))


@pytest.mark.anyio
async def test_a_call_made_while_its_caller_is_cancelled_still_runs_in_its_turn() -> None:
    # A cleanup (leaving a server's queue) is often made from a cancelled task: skipping it
    # would leave the server's state behind.
    store = ServerStore()
    with anyio.CancelScope() as scope:
        scope.cancel()
        assert await store_call(store, store.call, 7) == 7
    assert store.order == [7]
