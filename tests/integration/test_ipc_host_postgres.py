"""A `lockyard ipc-host` process on PostgreSQL, when the server cannot answer: a store error
in one sandbox's reclaim stops nobody (the reclaim is retried), and a reclaim the server
keeps waiting leaves the host serving the other sandboxes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from ipc_support import (
    answer_now,
    call_body,
    heartbeat,
    host_process,
    result_of,
    sandbox,
    write_request,
)

from lockyard.infra.lockstore.postgres import PgLockStore
from lockyard.infra.lockstore.postgres.cluster import ThrowawayCluster
from lockyard.infra.lockstore.postgres.listener import close_listeners
from pg_support import PgServer
from polling_support import wait_until

LIST_TOOLS = {"version": 1, "kind": "list_tools"}


def list_tools(request_id: str) -> dict[str, object]:
    return {**LIST_TOOLS, "id": request_id}


def lock_a(request_id: str, timeout: float = 0) -> dict[str, object]:
    return call_body(
        request_id, "lock_acquire", {"filepaths": ["a.py"], "timeout_seconds": timeout}
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "ipc"
    (path / "alice").mkdir(parents=True)
    (path / "bob").mkdir()
    return path


@pytest.fixture
def private_server() -> Iterator[ThrowawayCluster]:
    with ThrowawayCluster(max_connections=20) as cluster:
        try:
            yield cluster
        finally:
            close_listeners()


def test_an_unreachable_server_during_a_reclaim_stops_no_sandbox_and_the_reclaim_is_retried(
    repo: Path, root: Path, private_server: ThrowawayCluster
) -> None:
    (repo / "a.py").write_text("a = 1\n")
    alice, bob = sandbox(root, "alice"), sandbox(root, "bob")
    with host_process(root, repo, "--backend", private_server.dsn, "--stale-after", "1",
                      serving=("alice", "bob")) as host:  # fmt: skip
        with heartbeat(alice):
            write_request(alice, "alice-takes-a", lock_a("alice-takes-a"))
            assert result_of(answer_now(alice, "alice-takes-a"))["all_acquired"] is True
            private_server.stop("fast")
        # alice is silent now, and her reclaim cannot reach the server.
        wait_until(lambda: "cannot release the locks of alice" in host.log(), host.log)
        with heartbeat(bob):
            write_request(bob, "bob-lists-1", list_tools("bob-lists-1"))
            assert answer_now(bob, "bob-lists-1")["ok"] is True
            assert host.running(), host.log()
            private_server.start()
            wait_until(lambda: "sandbox alice silent for" in host.log(), host.log)
            write_request(bob, "bob-takes-a", lock_a("bob-takes-a", timeout=60))
            assert result_of(answer_now(bob, "bob-takes-a"))["all_acquired"] is True
        assert host.running(), host.log()
    with PgLockStore(repo, private_server.dsn) as store:
        assert store.holder("a.py") is None, "the host released bob's lock when it stopped"


def test_a_reclaim_the_server_keeps_waiting_leaves_the_host_serving_others(
    repo: Path, root: Path, pg_server: PgServer, pg_schema: str, pg_backend: str
) -> None:
    (repo / "a.py").write_text("a = 1\n")
    alice, bob = sandbox(root, "alice"), sandbox(root, "bob")
    with host_process(root, repo, "--backend", pg_backend, "--stale-after", "1",
                      serving=("alice", "bob")) as host:  # fmt: skip
        with heartbeat(alice):
            write_request(alice, "alice-takes-a", lock_a("alice-takes-a"))
            assert result_of(answer_now(alice, "alice-takes-a"))["all_acquired"] is True
        with psycopg.connect(pg_server.dsn) as blocker, heartbeat(bob):
            blocker.execute(f'LOCK TABLE "{pg_schema}".holds IN ACCESS EXCLUSIVE MODE')
            # alice's reclaim starts after 1 s of silence and waits for the table.
            wait_until(lambda: reclaim_waits_on_a_lock(pg_server), "the reclaim blocked")
            write_request(bob, "bob-lists-1", list_tools("bob-lists-1"))
            assert answer_now(bob, "bob-lists-1")["ok"] is True, "served during the reclaim"
            assert reclaim_waits_on_a_lock(pg_server), "the table was held all along"
            blocker.commit()
            write_request(bob, "bob-takes-a", lock_a("bob-takes-a", timeout=60))
            assert result_of(answer_now(bob, "bob-takes-a"))["all_acquired"] is True
        assert host.running(), host.log()


def reclaim_waits_on_a_lock(pg_server: PgServer) -> bool:
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND query LIKE '%cleanup(%'"
        ).fetchone()
    return row is not None and row[0] > 0
