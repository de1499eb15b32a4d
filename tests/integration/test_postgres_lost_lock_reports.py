"""Lost-lock reports reach the agent even when the call that found them fails.

A lock tool call first takes the reports of locks the agent lost (here: an operator released
them), then does its own work. When that work fails with a store error (here: the server
gives up waiting for a table another transaction holds, after `lock_timeout`), the reports
must not be used up: that result or the next one tells the agent to lock and re-read those
files again. Real PostgreSQL server, real store, the tools as every transport runs them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lockyard.infra.lockstore.postgres import PgLockStore
from lockyard.infra.tools.lock_tools import LockTools
from pg_support import PgServer

pytestmark = pytest.mark.anyio


@contextmanager
def writes_to_the_locks_table_wait(pg_server: PgServer, schema: str) -> Iterator[None]:
    """Another transaction holds `holds` against writes (reads still pass) until the end."""
    with psycopg.connect(pg_server.dsn) as conn:
        conn.execute(f'LOCK TABLE "{schema}".holds IN EXCLUSIVE MODE')
        yield
        conn.rollback()


@pytest.fixture
def stores(
    repo: Path, pg_server: PgServer, pg_schema: str
) -> Iterator[tuple[PgLockStore, PgLockStore]]:
    for name in ("a.py", "b.py", "c.py"):
        (repo / name).write_text(f"# {name}\n")
    impatient = pg_server.spec(pg_schema) + "&options=-clock_timeout%3D200"
    with PgLockStore(repo, impatient) as mine, PgLockStore(repo, pg_server.spec(pg_schema)) as ops:
        yield mine, ops


def lost_files(result: dict[str, Any]) -> set[str]:
    return {item["filepath"] for item in result.get("lost_locks", [])}


def end_session(pg_server: PgServer, store: PgLockStore) -> None:
    """Cut the store's database session from the server side (as a lost link would)."""
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND objid = %s AND granted",
            (store.session_number,),
        )


@pytest.mark.parametrize("failing", ["lock_acquire", "lock_release"])
@pytest.mark.parametrize("lost_by", ["the operator", "a lost session"])
async def test_lost_locks_are_reported_after_a_call_that_failed_with_a_store_error(
    stores: tuple[PgLockStore, PgLockStore],
    pg_server: PgServer,
    pg_schema: str,
    failing: str,
    lost_by: str,
) -> None:
    mine, ops = stores
    tools = LockTools(mine, "alice")
    taken = await tools.acquire({"filepaths": ["a.py", "b.py"], "timeout_seconds": 0})
    assert taken.data is not None
    assert taken.data["all_acquired"], taken.text
    if lost_by == "the operator":
        assert ops.cleanup_agent_locks("alice") == ["a.py", "b.py"]
    else:
        end_session(pg_server, mine)
    with writes_to_the_locks_table_wait(pg_server, pg_schema):
        arguments: dict[str, Any] = (
            {"filepaths": ["c.py"], "timeout_seconds": 0}
            if failing == "lock_acquire"
            else {"filepaths": ["b.py"]}
        )
        failed = await tools.call(failing, arguments)
    assert failed.is_error, failed.text
    assert "lock_timeout" in failed.text or "lock timeout" in failed.text, failed.text
    # Told in the failed result's text, and again, as a field, in the next successful one.
    assert "you lost these locks without releasing them: a.py, b.py" in failed.text
    after = await tools.acquire({"filepaths": ["c.py"], "timeout_seconds": 0})
    assert after.data is not None
    assert after.data["all_acquired"], after.text
    assert lost_files(dict(after.data)) == {"a.py", "b.py"}, json.dumps(after.data)
    again = await tools.release({"all": True})
    assert again.data is not None
    assert "lost_locks" not in again.data, "reported until a result carried them, then no more"
