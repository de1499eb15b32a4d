"""A PostgreSQL round trip never stalls the event loop it is made from.

While the server keeps a lock call waiting (here: someone's transaction holding the locks
table, as an operator's `LOCK TABLE` or a long migration would), the loop keeps serving
everything else in the process, such as the other agents of an orchestrator; the call
completes once the server answers.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from lockyard.infra.hooks.write_guard.hook import make_write_guard_hook
from lockyard.infra.lockstore.postgres import PgLockStore
from lockyard.infra.tools.lock_tools import LockTools
from pg_support import PgServer

HELD_SECONDS = 1.0
"""How long the blocking transaction holds the table: it ends from a timer thread, so that a
loop stalled by the call under test would still come back (and the test fail, not hang)."""

PROBE_SECONDS = 0.4
"""When the loop is asked how far it got, well inside the time the server keeps the call."""


@contextmanager
def table_held_by_another_transaction(pg_server: PgServer, schema: str) -> Iterator[None]:
    """Every statement on `holds` waits until HELD_SECONDS from now."""
    conn = psycopg.connect(pg_server.dsn)
    conn.execute(f'LOCK TABLE "{schema}".holds IN ACCESS EXCLUSIVE MODE')
    timer = threading.Timer(HELD_SECONDS, conn.commit)
    timer.start()
    try:
        yield
    finally:
        timer.join()
        conn.close()


async def loop_progress_during(call: Callable[[], Awaitable[Any]]) -> tuple[int, bool, Any]:
    """Run `call` beside a 10 ms ticker: the ticks and whether `call` was still running at
    PROBE_SECONDS, and what it returned."""
    ticks = 0
    results: list[Any] = []
    returned = anyio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    async def run_call() -> None:
        results.append(await call())
        returned.set()

    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        group.start_soon(run_call)
        await anyio.sleep(PROBE_SECONDS)
        ticks_at_probe, running_at_probe = ticks, not returned.is_set()
        await returned.wait()
        group.cancel_scope.cancel()
    return ticks_at_probe, running_at_probe, results[0]


@pytest.fixture
def stores(repo: Path, pg_backend: str) -> Iterator[tuple[PgLockStore, PgLockStore]]:
    (repo / "a.py").write_text("x = 1\n")
    with PgLockStore(repo, pg_backend) as mine, PgLockStore(repo, pg_backend) as theirs:
        assert theirs.try_lock("a.py", "bob")  # the lock's row exists from here on
        assert theirs.release("a.py", "bob")
        yield mine, theirs


def served_while_the_table_is_held(
    pg_server: PgServer, schema: str, call: Callable[[], Awaitable[Any]]
) -> Any:
    """What `call` returned, run while another transaction holds the locks table, once the
    loop is shown to have kept serving others meanwhile."""

    async def scenario() -> tuple[int, bool, Any]:
        with table_held_by_another_transaction(pg_server, schema):
            return await loop_progress_during(call)

    ticks_at_probe, running_at_probe, result = anyio.run(scenario)
    assert running_at_probe, "the server was still holding the call at the probe"
    # A stalled loop ticks not at all until the server answers; a served one about 40 times.
    assert ticks_at_probe >= 10, f"the loop ticked {ticks_at_probe} times in {PROBE_SECONDS} s"
    return result


def test_lock_acquire_leaves_the_loop_free_while_the_server_holds_it(
    pg_server: PgServer, pg_schema: str, stores: tuple[PgLockStore, PgLockStore]
) -> None:
    mine, _theirs = stores
    tools = LockTools(mine, "alice")
    outcome = served_while_the_table_is_held(
        pg_server, pg_schema, lambda: tools.acquire({"filepaths": ["a.py"]})
    )
    assert outcome.data["all_acquired"], outcome.text
    assert mine.holder("a.py") == "alice"


def test_lock_release_leaves_the_loop_free_while_the_server_holds_it(
    pg_server: PgServer, pg_schema: str, stores: tuple[PgLockStore, PgLockStore]
) -> None:
    mine, _theirs = stores
    tools = LockTools(mine, "alice")
    assert mine.try_lock("a.py", "alice")
    outcome = served_while_the_table_is_held(
        pg_server, pg_schema, lambda: tools.release({"filepaths": ["a.py"]})
    )
    assert outcome.data == {"released": ["a.py"], "count": 1}, outcome.text
    assert mine.holder("a.py") is None


def test_a_queued_wait_leaves_the_loop_free_while_the_server_holds_it(
    pg_server: PgServer, pg_schema: str, stores: tuple[PgLockStore, PgLockStore]
) -> None:
    mine, theirs = stores
    assert theirs.try_lock("a.py", "bob")
    granted = served_while_the_table_is_held(
        pg_server, pg_schema, lambda: mine.acquire_async("a.py", "alice", timeout_seconds=0.2)
    )
    assert granted is False, "bob still holds it: the wait timed out"
    assert mine.waiters("a.py") == [], "and left no queue entry behind"
    assert theirs.holder("a.py") == "bob"


def test_the_write_guard_leaves_the_loop_free_while_the_server_holds_it(
    pg_server: PgServer, pg_schema: str, stores: tuple[PgLockStore, PgLockStore]
) -> None:
    mine, _theirs = stores
    guard = make_write_guard_hook(mine, "alice")
    edit = {"tool_name": "Edit", "tool_input": {"file_path": "a.py"}, "cwd": str(mine.root)}
    output = served_while_the_table_is_held(
        pg_server, pg_schema, lambda: guard(edit, "t1", {"signal": None})
    )
    decision = output["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny", "alice holds no lock on a.py"
