"""A deadlock between two `lockyard serve` processes, found and resolved by `lockyard monitor`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


def child_env(lock_dir: Path) -> dict[str, str]:
    env = {"LOCKYARD_LOCK_DIR": str(lock_dir), "PATH": os.environ["PATH"]}
    env.update({k: v for k, v in os.environ.items() if k.startswith(("COVERAGE_", "PYTHONPATH"))})
    return env


def serve(agent: str, repo: Path, lock_dir: Path) -> Client:
    return Client(
        StdioServerParameters(
            command=LOCKYARD,
            args=["serve", "--agent-id", agent, "--repo", str(repo)],
            env=child_env(lock_dir),
        )
    )


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    data: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return data


async def start_monitor(lock_dir: Path) -> Process:
    return await anyio.open_process(
        [LOCKYARD, "monitor", "--json"],
        env={**os.environ, "LOCKYARD_LOCK_DIR": str(lock_dir)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def stop(process: Process) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    with anyio.fail_after(20):
        code = await process.wait()
    assert process.stdout is not None
    output = b""
    async for chunk in process.stdout:
        output += chunk
    return code, output.decode()


async def test_two_serve_processes_deadlock_and_the_monitor_resolves_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir(mode=0o700)
    f1, f2 = "f1.py", "f2.py"  # repository-relative keys, also in the monitor's cycle
    monitor = await start_monitor(lock_dir)
    try:
        async with serve("alice", repo, lock_dir) as alice, serve("bob", repo, lock_dir) as bob:
            assert (await call(alice, "lock_acquire", {"filepaths": ["f1.py"]}))["all_acquired"]
            assert (await call(bob, "lock_acquire", {"filepaths": ["f2.py"]}))["all_acquired"]
            results: dict[str, dict[str, Any]] = {}

            async def blocked(name: str, client: Client, path: str) -> None:
                results[name] = await call(
                    client, "lock_acquire", {"filepaths": [path], "timeout_seconds": 60}
                )

            with anyio.fail_after(45):
                async with anyio.create_task_group() as group:
                    group.start_soon(blocked, "alice", alice, "f2.py")
                    group.start_soon(blocked, "bob", bob, "f1.py")

            # Both hold one lock; bob took his later, so he is the younger: the victim.
            deadlock = results["bob"]["deadlock"]
            assert deadlock["victim"] == "bob"
            assert sorted(deadlock["agents"]) == ["alice", "bob"]
            assert sorted(deadlock["files"]) == [f1, f2]
            assert deadlock["released"] == [f2]
            assert results["bob"]["all_acquired"] is False
            assert results["alice"]["all_acquired"] is True
            assert results["alice"]["results"] == [
                {"filepath": f2, "acquired": True, "holder": "alice"}
            ]
            assert "deadlock" not in results["alice"]
    finally:
        code, output = await stop(monitor)
    assert code == 0
    reports = [json.loads(line) for line in output.splitlines()]
    found = [d for report in reports for d in report["deadlocks"]]
    assert [d["victim"] for d in found] == ["bob"]
    assert found[0]["notice_posted"] is True
    assert os.listdir(lock_dir / "victims") == []  # consumed
