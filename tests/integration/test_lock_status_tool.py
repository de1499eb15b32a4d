"""`lock_status`: who holds and waits for files, and whether an acquire now would be granted,
without queueing or changing anything. Over the real MCP protocol (`lockyard serve`) on a lock
directory, and through the same tools on a real PostgreSQL server."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from test_serve_stdio import LOCKYARD, child_env

from lockyard.infra.lockstore import LockBackend, LockStore, open_backend
from lockyard.infra.tools.lock_tools import LockTools
from pg_support import PgServer
from polling_support import wait_until

pytestmark = pytest.mark.anyio


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    (path / "src").mkdir(parents=True)
    return path


def waiting_thread(store: LockBackend, key: str, agent: str) -> threading.Thread:
    """`agent` waits for `key` in another thread until the test releases it."""
    thread = threading.Thread(
        target=store.acquire, args=(key, agent), kwargs={"timeout_seconds": 900}
    )
    thread.start()
    wait_until(lambda: [w.agent_id for w in store.waiters(key)] == [agent], f"{agent} to queue")
    return thread


def by_file(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["filepath"]: entry for entry in payload["locks"]}


def check_the_look(looks: dict[str, dict[str, Any]]) -> None:
    held = looks["src/a.py"]
    assert [h["agent"] for h in held["held_by"]] == ["bob"]
    assert [w["agent"] for w in held["waiting"]] == ["carol"]
    assert held["would_be_granted"] is False
    assert held["you_hold"] is False
    assert held["you_wait"] is False
    assert "held by bob" in held["summary"]
    assert "1 waiting" in held["summary"]
    free = looks["src/b.py"]
    assert free["held_by"] == []
    assert free["waiting"] == []
    assert free["would_be_granted"] is True
    mine = looks["src/c.py"]
    assert mine["you_hold"] is True
    assert mine["would_be_granted"] is True


async def test_lock_status_over_mcp_tells_holders_waiters_and_the_verdict_and_changes_nothing(
    repo: Path, lock_dir: Path
) -> None:
    store = LockStore(str(repo), lock_dir)
    assert store.try_lock("src/a.py", "bob")
    carol = waiting_thread(store, "src/a.py", "carol")
    params = StdioServerParameters(
        command=LOCKYARD,
        args=["serve", "--agent-id", "alice", "--repo", str(repo)],
        env=child_env(lock_dir),
    )
    try:
        async with Client(params) as client:
            taken = await client.call_tool("lock_acquire", {"filepaths": ["src/c.py"]})
            assert not taken.is_error
            before = [(i.lock_path, i.holder and i.holder.agent_id) for i in store.list_locks()]
            result = await client.call_tool(
                "lock_status", {"filepaths": ["src/a.py", str(repo / "src/b.py"), "src/c.py"]}
            )
            assert not result.is_error
            check_the_look(by_file(json.loads(result.content[0].text)))  # type: ignore[union-attr]
            # A look takes nothing and queues nowhere.
            after = [(i.lock_path, i.holder and i.holder.agent_id) for i in store.list_locks()]
            assert after == before
            assert [w.agent_id for w in store.waiters("src/a.py")] == ["carol"]
            assert store.waiters("src/b.py") == []
            bad = await client.call_tool("lock_status", {"filepaths": []})
            assert bad.is_error
            assert "Nothing was looked at" in bad.content[0].text  # type: ignore[union-attr]
    finally:
        store.release("src/a.py", "bob")
        carol.join(timeout=60)


async def test_lock_status_on_postgresql_gives_the_same_answer(
    repo: Path, pg_server: PgServer, pg_schema: str
) -> None:
    store = open_backend(str(repo), pg_server.spec(pg_schema))
    try:
        assert store.try_lock("src/a.py", "bob")
        carol = waiting_thread(store, "src/a.py", "carol")
        try:
            tools = LockTools(store, "alice")
            assert (await tools.call("lock_acquire", {"filepaths": ["src/c.py"]})).data
            outcome = await tools.call(
                "lock_status", {"filepaths": ["src/a.py", "src/b.py", "src/c.py"]}
            )
            assert outcome.data is not None, outcome.text
            looks = by_file(dict(outcome.data))
            check_the_look(looks)
            assert looks["src/c.py"]["held_by"][0]["fence"] >= 1  # the grant's fencing number
            assert [w.agent_id for w in store.waiters("src/a.py")] == ["carol"]
        finally:
            store.release("src/a.py", "bob")
            carol.join(timeout=60)
    finally:
        store.close()
