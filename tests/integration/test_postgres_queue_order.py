"""Agents of one process that begin to wait in one order are queued by PostgreSQL in that
order, and get the lock in that order (issue 33, point 11: the store's calls used to race
for its one session from a pool of threads, so the server could queue them in any order)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from lockyard.infra.lockstore import store_call
from lockyard.infra.lockstore.postgres import PgLockStore
from polling_support import wait_until_async

WAITERS = 8


@pytest.mark.anyio
async def test_waits_begun_in_order_are_queued_and_granted_in_that_order(
    repo: Path, pg_backend: str
) -> None:
    agents = [f"waiter-{n}" for n in range(WAITERS)]
    granted: list[str] = []
    with PgLockStore(repo, pg_backend) as store:
        assert store.try_lock("a.py", "holder")

        async def wait(agent: str) -> None:
            assert await store.acquire_async("a.py", agent, 60)
            granted.append(agent)
            assert await store_call(store, store.release, "a.py", agent)

        async def queued() -> list[str]:
            return [w.agent_id for w in await store_call(store, store.waiters, "a.py")]

        async with anyio.create_task_group() as group:
            for agent in agents:
                group.start_soon(wait, agent)

            async def all_queued() -> bool:
                return len(await queued()) == WAITERS

            await wait_until_async(all_queued, "every waiter queued")
            assert await queued() == agents
            assert await store_call(store, store.release, "a.py", "holder")
    assert granted == agents
