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

HOLD_LIMIT = 30.0
"""The longest the blocking transaction holds the table: a timer thread ends it then, so that a
loop stalled by the call under test still comes back (and the test fails, not hangs). A served
loop ends it much sooner, as soon as it has shown that it runs."""

TICKS = 5
"""The served loop's proof: this many ticks of its 10 ms ticker while the call is held."""


@contextmanager
def table_held_by_another_transaction(
    pg_server: PgServer, schema: str
) -> Iterator[threading.Event]:
    """Every statement on `holds` waits until the yielded event is set (or HOLD_LIMIT)."""
    conn = psycopg.connect(pg_server.dsn)
    conn.execute(f'LOCK TABLE "{schema}".holds IN ACCESS EXCLUSIVE MODE')
    done = threading.Event()

    def hold() -> None:
        done.wait(HOLD_LIMIT)
        conn.commit()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        yield done
    finally:
        done.set()
        holder.join()
        conn.close()


async def loop_progress_during(
    call: Callable[[], Awaitable[Any]], answer: threading.Event
) -> tuple[bool, Any]:
    """Run `call` beside a 10 ms ticker: whether `call` was still running once the ticker had
    ticked TICKS times (then `answer` is set: the server may answer it), and what it returned.
    Counted, not timed: a loaded machine slows a served loop's ticks but never stops them,
    while a loop that `call` stalls ticks only after the server answered it."""
    ticks = 0
    ticked = anyio.Event()
    results: list[Any] = []
    returned = anyio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1
            if ticks == TICKS:
                ticked.set()

    async def run_call() -> None:
        results.append(await call())
        returned.set()

    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        group.start_soon(run_call)
        await ticked.wait()
        running_after_ticks = not returned.is_set()
        answer.set()
        await returned.wait()
        group.cancel_scope.cancel()
    return running_after_ticks, results[0]


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

    async def scenario() -> tuple[bool, Any]:
        with table_held_by_another_transaction(pg_server, schema) as answer:
            return await loop_progress_during(call, answer)

    running_after_ticks, result = anyio.run(scenario)
    assert running_after_ticks, f"the loop ticked {TICKS} times only once the server answered"
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
