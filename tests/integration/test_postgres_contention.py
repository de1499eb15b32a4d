"""Many agents crowding a few files: every grant in arrival order, and no transaction of
theirs ever caught in a deadlock the server has to break (each such break costs every waiter
in it `deadlock_timeout`, a second by default)."""

from __future__ import annotations

import logging
import random
import threading
import time
from pathlib import Path

import pytest

from lockyard.infra.lockstore.postgres import PgLockStore

AGENTS = 30
FILES = ("a.py", "b.py", "c.py")
SECONDS = 2.0
"""How long the agents crowd the files, at the least."""
TURNS = 3
"""Grants each agent takes, at the least: however slow a loaded machine, each gets its turns."""


def test_agents_crowding_a_few_files_are_never_rolled_back_by_the_server(
    repo: Path, pg_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="lockyard.infra.lockstore.postgres.session")
    stores = [PgLockStore(repo, pg_backend).connect() for _ in range(AGENTS)]
    holders: dict[str, str] = {}
    overlaps: list[str] = []
    grants = [0] * AGENTS
    guard = threading.Lock()
    stop = time.monotonic() + SECONDS

    def work(index: int) -> None:
        rng, store, agent = random.Random(index), stores[index], f"agent-{index}"
        while grants[index] < TURNS or time.monotonic() < stop:
            path = rng.choice(FILES)
            if not store.acquire(path, agent, timeout_seconds=60):
                continue
            with guard:
                if path in holders:
                    overlaps.append(f"{agent} and {holders[path]} on {path}")
                holders[path] = agent
            grants[index] += 1
            time.sleep(0.001)
            with guard:
                del holders[path]
            assert store.release(path, agent)

    threads = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(AGENTS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        rolled_back = [r.getMessage() for r in caplog.records if "rolled back" in r.getMessage()]
        assert rolled_back == []
        assert overlaps == []
        assert min(grants) >= TURNS, "every agent took its turns"
        assert all(stores[0].holder(path) is None for path in FILES)
    finally:
        for store in stores:
            store.close()
