"""The guards read PostgreSQL a fixed number of times per decision, however deep the file: its
lock and the locks of every directory over it come in one query (`holds_of`), where each
directory cost two round trips (its holder, its readers); the globs that match it in one more
(`globs_over`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lockyard.infra.hooks.guard_common import holder_over
from lockyard.infra.hooks.write_guard.decide import judge_write
from lockyard.infra.lockstore.postgres import PgLockStore

ACQUIRE = "mcp__lockyard__lock_acquire"
DEEP = "a/b/c/d/e/f.py"


@pytest.fixture
def stores(repo: Path, pg_backend: str) -> Iterator[list[PgLockStore]]:
    (repo / "a/b/c/d/e").mkdir(parents=True)
    opened = [PgLockStore(repo, pg_backend) for _ in range(2)]
    yield opened
    for store in opened:
        store.close()


def counted(store: PgLockStore) -> list[int]:
    """The store's round trips from now on (one per `Session.run`), counted as they pass."""
    calls: list[int] = []
    run = store.session.run

    def counting(operation: Callable[..., Any]) -> Any:
        calls.append(1)
        return run(operation)

    store.session.run = counting  # type: ignore[method-assign]
    return calls


def test_a_deep_file_nobody_holds_costs_no_round_trip_per_directory(
    stores: list[PgLockStore],
) -> None:
    guard, _ = stores
    guard.connect()
    trips = counted(guard)
    assert holder_over(guard, "f.py", "ann") == (None, "f.py")
    shallow = len(trips)
    assert shallow == 2  # the file and its directories in one query; the globs matching it
    assert holder_over(guard, DEEP, "ann") == (None, DEEP)
    assert len(trips) == 2 * shallow  # five directories deeper, not one trip more
    del trips[:]
    reason, _ = judge_write(guard, "ann", DEEP, guard.root, ACQUIRE)
    assert reason is not None
    assert "is not locked by you" in reason
    deep_judgement = len(trips)
    del trips[:]
    judge_write(guard, "ann", "f.py", guard.root, ACQUIRE)
    assert deep_judgement == len(trips)


def test_one_query_finds_the_directory_reader_or_own_lock_that_decides(
    stores: list[PgLockStore],
) -> None:
    guard, other = stores
    assert other.try_lock("a/b/", "bob", mode="shared")
    assert holder_over(guard, DEEP, "ann") == ("bob", "a/b/")
    assert other.try_lock("a/", "ann", mode="shared")  # outermost first
    assert holder_over(guard, DEEP, "carl") == ("ann", "a/")
    assert other.release("a/", "ann")
    assert other.release("a/b/", "bob")
    assert other.try_lock("a/b/c/", "ann")
    assert holder_over(guard, DEEP, "ann") == ("ann", "a/b/c/")
    assert holder_over(guard, DEEP, "bob") == ("ann", "a/b/c/")
    assert other.try_lock(DEEP.replace("f.py", "g.py"), "bob") is False  # under ann's lock
    assert other.release("a/b/c/", "ann")
    assert other.try_lock(DEEP, "bob")
    assert holder_over(guard, DEEP, "ann") == ("bob", DEEP)
    assert judge_write(guard, "bob", DEEP, guard.root, ACQUIRE)[0] is None
