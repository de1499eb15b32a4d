"""Deadlocks between `lockyard serve` processes, resolved with no monitor started by hand:
every serve stands in the election of the process that resolves them, one leads, and
another takes over when the leader is killed. Both backends, real processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from lockyard.infra.crossproc.leader_file import current_leader
from lockyard.infra.crossproc.sources import monitor_source
from lockyard.infra.lockstore import LockBackend, open_backend
from polling_support import wait_until, wait_until_async

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(900)]
STARTS = 300.0
"""Seconds a serve may take to start and stand (minutes on a loaded 2-core machine)."""

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


@pytest.fixture(params=["lockdir", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the serves keep their locks: a lock directory, or a PostgreSQL schema."""
    if request.param == "postgresql":
        spec: str = request.getfixturevalue("pg_backend")
        return spec
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir(mode=0o700)
    return str(lock_dir)


@pytest.fixture
def store(repo: Path, backend: str) -> Iterator[LockBackend]:
    """The test's own view of the serves' lock store."""
    opened = open_backend(repo, backend)
    yield opened
    opened.close()


def child_env() -> dict[str, str]:
    env = {"PATH": os.environ["PATH"]}
    env.update({k: v for k, v in os.environ.items() if k.startswith(("COVERAGE_", "PYTHONPATH"))})
    return env


def serve_args(agent: str, repo: Path, backend: str) -> list[str]:
    return ["serve", "--agent-id", agent, "--repo", str(repo), "--backend", backend]


def serve(agent: str, repo: Path, backend: str) -> Client:
    return Client(
        StdioServerParameters(
            command=LOCKYARD, args=serve_args(agent, repo, backend), env=child_env()
        )
    )


@contextlib.contextmanager
def idle_serve(agent: str, repo: Path, backend: str) -> Iterator[subprocess.Popen[bytes]]:
    """A serve nobody calls (its stdin stays open): a candidate of the election only."""
    process = subprocess.Popen(
        [LOCKYARD, *serve_args(agent, repo, backend)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=child_env(),
    )  # fmt: skip
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait()


def who_leads(store: LockBackend) -> str | None:
    return monitor_source(store).who_leads()


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    data: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return data


@contextlib.asynccontextmanager
async def two_agents(repo: Path, backend: str) -> AsyncIterator[tuple[Client, Client]]:
    """alice holds f1.py, bob (who locked later: the younger) holds f2.py."""
    async with serve("alice", repo, backend) as alice, serve("bob", repo, backend) as bob:
        assert (await call(alice, "lock_acquire", {"filepaths": ["f1.py"]}))["all_acquired"]
        assert (await call(bob, "lock_acquire", {"filepaths": ["f2.py"]}))["all_acquired"]
        yield alice, bob


async def cross(
    alice: Client,
    bob: Client,
    started: anyio.Event | None = None,
    *,
    alice_wants: str = "f2.py",
    bob_wants: str = "f1.py",
) -> dict[str, Any]:
    """alice waits for f2.py while bob waits for f1.py (or what they are told to want): a
    deadlock; both results."""
    results: dict[str, dict[str, Any]] = {}

    async def blocked(name: str, client: Client, path: str) -> None:
        results[name] = await call(
            client, "lock_acquire", {"filepaths": [path], "timeout_seconds": 240}
        )

    with anyio.fail_after(STARTS):
        async with anyio.create_task_group() as group:
            group.start_soon(blocked, "alice", alice, alice_wants)
            group.start_soon(blocked, "bob", bob, bob_wants)
            if started is not None:
                started.set()
    return results


def assert_bob_gave_way(results: dict[str, Any]) -> None:
    deadlock = results["bob"]["deadlock"]
    assert deadlock["victim"] == "bob"
    assert sorted(deadlock["agents"]) == ["alice", "bob"]
    assert sorted(deadlock["files"]) == ["f1.py", "f2.py"]
    assert deadlock["released"] == ["f2.py"]
    assert results["bob"]["all_acquired"] is False
    assert results["alice"]["all_acquired"] is True
    assert "deadlock" not in results["alice"]


async def test_a_deadlock_between_two_serves_is_resolved_with_no_monitor_running(
    repo: Path, backend: str, store: LockBackend
) -> None:
    async with two_agents(repo, backend) as (alice, bob):
        leader = wait_until(
            lambda: who_leads(store), "a serve leading deadlock detection", within=STARTS
        )
        if not backend.startswith("postgresql"):
            assert "lockyard serve (agent " in leader
        assert_bob_gave_way(await cross(alice, bob))
    # Both ended cleanly: nobody leads any more, and nothing is left locked.
    wait_until(lambda: who_leads(store) is None, "the last serve resigning", within=STARTS)
    assert store.snapshot().holds == {}


async def test_when_the_leader_is_killed_mid_deadlock_another_serve_takes_over(
    repo: Path, backend: str, store: LockBackend
) -> None:
    with idle_serve("leader", repo, backend) as first:
        if backend.startswith("postgresql"):
            wait_until(lambda: who_leads(store), "the first serve leading", within=STARTS)
        else:
            wait_until(
                lambda: (found := current_leader(backend)) is not None and found.pid == first.pid,
                "the first serve leading",
                within=STARTS,
            )
        async with two_agents(repo, backend) as (alice, bob):
            # The leader freezes (it still holds the leader lock, so nobody else resolves),
            # the two agents deadlock, then the frozen leader is killed outright.
            first.send_signal(signal.SIGSTOP)
            started = anyio.Event()
            results: dict[str, Any] = {}

            async def deadlock() -> None:
                results.update(await cross(alice, bob, started))

            async with anyio.create_task_group() as group:
                group.start_soon(deadlock)
                await started.wait()
                await wait_until_async(
                    lambda: len(store.snapshot().waits) == 2, "both agents waiting", within=STARTS
                )
                assert results == {}  # nobody resolves while the leader is frozen
                first.kill()  # SIGKILL: no code of it runs; its leader lock goes with it
            assert_bob_gave_way(results)
            if not backend.startswith("postgresql"):
                now = current_leader(backend)
                assert now is not None
                assert now.pid != first.pid
                assert "lockyard serve (agent " in now.role


async def test_two_upgrading_serves_deadlock_on_postgresql_and_one_gives_way(
    repo: Path, pg_backend: str
) -> None:
    """Both read f1.py, then both ask for it exclusively: the first holds the lock waiting
    for the other's read, the other queues behind it. The elected serve sees the cycle
    through a read (`holds_graph.py`) and the victim's call returns the deadlock, giving its
    read back; the other's upgrade is then granted by push."""
    async with serve("alice", repo, pg_backend) as alice, serve("bob", repo, pg_backend) as bob:
        for client in (alice, bob):
            shared = {"filepaths": ["f1.py"], "mode": "shared"}
            assert (await call(client, "lock_acquire", shared))["all_acquired"]
        results: dict[str, dict[str, Any]] = {}

        async def upgrade(name: str, client: Client) -> None:
            results[name] = await call(
                client, "lock_acquire", {"filepaths": ["f1.py"], "timeout_seconds": 240}
            )

        with anyio.fail_after(STARTS):
            async with anyio.create_task_group() as group:
                group.start_soon(upgrade, "alice", alice)
                group.start_soon(upgrade, "bob", bob)
    [victim] = [name for name, result in results.items() if "deadlock" in result]
    [winner] = {"alice", "bob"} - {victim}
    deadlock = results[victim]["deadlock"]
    assert deadlock["victim"] == victim
    assert sorted(deadlock["agents"]) == ["alice", "bob"]
    assert deadlock["released"] == ["f1.py"]  # its read
    assert results[victim]["all_acquired"] is False
    assert results[winner]["all_acquired"] is True


async def test_two_serves_deadlock_through_a_directory_lock_on_postgresql_and_one_gives_way(
    repo: Path, pg_backend: str
) -> None:
    """alice holds the directory src/, bob holds docs/x.md; alice then waits for docs/x.md
    while bob waits for src/a.py, under alice's directory (in its line). The elected serve
    sees the cycle through the directory and names it; the victim's call returns the
    deadlock, giving its lock back, and the other is granted."""
    async with serve("alice", repo, pg_backend) as alice, serve("bob", repo, pg_backend) as bob:
        assert (await call(alice, "lock_acquire", {"filepaths": ["src/"]}))["all_acquired"]
        assert (await call(bob, "lock_acquire", {"filepaths": ["docs/x.md"]}))["all_acquired"]
        results = await cross(alice, bob, alice_wants="docs/x.md", bob_wants="src/a.py")
    [victim] = [name for name, result in results.items() if "deadlock" in result]
    [winner] = {"alice", "bob"} - {victim}
    deadlock = results[victim]["deadlock"]
    assert deadlock["victim"] == victim
    assert sorted(deadlock["agents"]) == ["alice", "bob"]
    assert sorted(deadlock["files"]) == ["docs/x.md", "src/"]
    assert deadlock["released"] == (["src/"] if victim == "alice" else ["docs/x.md"])
    assert results[victim]["all_acquired"] is False
    assert results[winner]["all_acquired"] is True


async def test_two_serves_deadlock_through_a_draining_directory_lock_and_one_gives_way(
    repo: Path, backend: str
) -> None:
    """alice holds src/api/a.py, bob holds docs/x.md; alice then waits for docs/x.md while
    bob takes src/: bob's directory lock holds its line and waits for alice's hold below it
    (it is draining, with no queue entry). The elected serve sees that wait as an edge, finds
    the cycle and names it; the victim's call returns the deadlock, the other is granted."""
    async with serve("alice", repo, backend) as alice, serve("bob", repo, backend) as bob:
        assert (await call(alice, "lock_acquire", {"filepaths": ["src/api/a.py"]}))["all_acquired"]
        assert (await call(bob, "lock_acquire", {"filepaths": ["docs/x.md"]}))["all_acquired"]
        results = await cross(alice, bob, alice_wants="docs/x.md", bob_wants="src/")
    [victim] = [name for name, result in results.items() if "deadlock" in result]
    [winner] = {"alice", "bob"} - {victim}
    deadlock = results[victim]["deadlock"]
    assert deadlock["victim"] == victim
    assert sorted(deadlock["agents"]) == ["alice", "bob"]
    assert sorted(deadlock["files"]) == ["docs/x.md", "src/api/a.py"]
    assert deadlock["released"] == (["src/api/a.py"] if victim == "alice" else ["docs/x.md"])
    assert results[victim]["all_acquired"] is False
    assert results[winner]["all_acquired"] is True
