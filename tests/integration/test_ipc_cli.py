"""`lockyard ipc-host` and `lockyard serve --ipc` as real processes, driven by a real MCP client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from lockyard.infra.lockstore.lockdir.store import LockStore
from polling_support import wait_until_async

pytestmark = pytest.mark.anyio

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


def child_env(**extra: str) -> dict[str, str]:
    env = {"PATH": os.environ["PATH"], **extra}
    env.update({k: v for k, v in os.environ.items() if k.startswith(("COVERAGE_", "PYTHONPATH"))})
    return env


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "ipc"
    (path / "alice").mkdir(parents=True)
    (path / "bob").mkdir()
    return path


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> LockStore:
    return LockStore(repo, lock_dir)


@pytest.fixture
def host(root: Path, repo: Path, lock_dir: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [LOCKYARD, "ipc-host", "--root", str(root), "--repo", str(repo), "--lock-dir",
         str(lock_dir), "--stale-after", "2", "--admin", "alice"],
        env=child_env(), stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    yield process
    if process.poll() is None:
        process.terminate()
        process.wait(20)


def serve_ipc(folder: Path, workspace: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=LOCKYARD,
        args=["serve", "--ipc", str(folder), "--repo", str(workspace), *args],
        env=child_env(),
    )


def lock_through_a_raw_serve(folder: Path, workspace: Path, name: str) -> subprocess.Popen[str]:
    """A `serve --ipc` process spoken to line by line, left running once it holds `name`."""
    process = subprocess.Popen(
        [LOCKYARD, "serve", "--ipc", str(folder), "--repo", str(workspace),
         "--heartbeat-interval", "0.2"],
        env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdin is not None
    assert process.stdout is not None
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "lock_acquire", "arguments": {"filepaths": [name]}}},
    ):  # fmt: skip
        process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
    replies = [json.loads(process.stdout.readline()) for _ in range(2)]
    assert json.loads(replies[1]["result"]["content"][0]["text"])["all_acquired"] is True
    return process


def text_of(result: object) -> str:
    return str(result.content[0].text)  # type: ignore[attr-defined]


async def test_an_agent_locks_through_serve_ipc_and_a_killed_sandbox_loses_its_locks(
    host: subprocess.Popen[str], root: Path, repo: Path, store: LockStore, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    async with Client(serve_ipc(root / "alice", workspace, "--heartbeat-interval", "0.2")) as alice:
        tools = [tool.name for tool in (await alice.list_tools()).tools]
        acquired = await alice.call_tool(
            "lock_acquire", {"filepaths": [str(workspace / "a.py")], "timeout_seconds": 0}
        )
        status = json.loads(text_of(await alice.call_tool("lock_overview", {})))
    assert tools == [
        "lock_acquire",
        "lock_release",
        "lock_status",
        "lock_overview",
        "lock_force_release",
    ]
    assert json.loads(text_of(acquired))["results"][0] == {
        "filepath": store.canonicalize("a.py"),
        "acquired": True,
        "holder": "alice",
    }
    assert status["locks"][0]["holder"] == "alice"
    assert store.holder("a.py") is None  # the session ended cleanly: its locks released

    bob = lock_through_a_raw_serve(root / "bob", workspace, "b.py")
    try:
        assert store.holder("b.py") == "bob"
        bob.send_signal(signal.SIGKILL)  # the container stops: no goodbye
        bob.wait(10)
        await wait_until_async(lambda: store.holder("b.py") is None)  # host: --stale-after 2
    finally:
        if bob.poll() is None:
            bob.kill()
            bob.wait()
    host.send_signal(signal.SIGTERM)
    assert host.wait(20) == 0
    assert host.stderr is not None
    log = host.stderr.read()
    assert "sandbox bob silent for" in log
    assert "released 1 lock(s)" in log


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "pass --root DIR"),
        (["--root", "{root}"], "pass --repo PATH"),
        (["--root", "{tmp}/nowhere", "--repo", "{repo}"], "is not a directory"),
        (["--root", "{root}", "--repo", "{tmp}/nowhere"], "--repo"),
        (["--root", "{root}", "--repo", "{repo}", "--admin", "a\tb"], "--admin"),
        (["--root", "{root}", "--repo", "{repo}", "--admin", ".hidden"], "--admin"),
        (["--root", "{root}", "--repo", "{repo}", "--log-level", "LOUD"], "--log-level"),
        (["--root", "{root}", "--repo", "{repo}", "--backend", " "], "blank"),
    ],
)
def test_ipc_host_usage_errors_are_one_line_and_exit_2(
    args: list[str], says: str, root: Path, repo: Path, tmp_path: Path
) -> None:
    argv = [a.format(root=root, repo=repo, tmp=tmp_path) for a in args]
    done = subprocess.run(
        [LOCKYARD, "ipc-host", *argv], env=child_env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert done.stderr.startswith("lockyard: error: ")
    assert "Traceback" not in done.stderr


def test_a_second_host_on_one_root_is_refused(
    host: subprocess.Popen[str], root: Path, repo: Path, lock_dir: Path
) -> None:
    assert host.poll() is None
    assert host.stderr is not None
    while "serving sandbox" not in host.stderr.readline():
        pass
    done = subprocess.run(
        [LOCKYARD, "ipc-host", "--root", str(root), "--repo", str(repo), "--lock-dir",
         str(lock_dir)],
        env=child_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert f"(pid {host.pid}) already serves" in done.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--agent-id", "alice"], "drop --agent-id"),
        (["--lock-dir", "/tmp"], "drop --lock-dir"),
        (["--backend", "postgresql://h/db"], "drop --backend"),
        (["--log-level", "LOUD"], "--log-level"),
        (["--repo", "/nonexistent"], "--repo"),
    ],
)
def test_serve_ipc_usage_errors(args: list[str], says: str, root: Path) -> None:
    done = subprocess.run(
        [LOCKYARD, "serve", "--ipc", str(root / "alice"), *args],
        env=child_env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert done.stdout == ""


def test_serve_ipc_needs_a_real_folder(tmp_path: Path) -> None:
    done = subprocess.run(
        [LOCKYARD, "serve", "--ipc", str(tmp_path / "missing")],
        env=child_env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    assert "is not a directory" in done.stderr


def test_serve_ipc_refuses_a_folder_whose_requests_is_a_symlink(root: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", root / "alice" / "requests")
    done = subprocess.run(
        [LOCKYARD, "serve", "--ipc", str(root / "alice"), "--repo", str(tmp_path)],
        env=child_env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "cannot use the IPC folder" in done.stderr
    assert "requests is not a directory" in done.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []


@pytest.mark.timeout(600)
def test_a_cross_process_host_stands_in_the_election_and_resigns_when_it_ends(
    root: Path, repo: Path, lock_dir: Path
) -> None:
    from lockyard.infra.crossproc.leader_file import current_leader
    from polling_support import wait_until

    process = subprocess.Popen(
        [LOCKYARD, "ipc-host", "--root", str(root), "--repo", str(repo), "--lock-dir",
         str(lock_dir), "--cross-process"],
        env=child_env(), stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        leader = wait_until(lambda: current_leader(lock_dir), "the host leading", within=300)
        assert (leader.role, leader.pid) == ("lockyard ipc-host", process.pid)
    finally:
        process.terminate()
        process.wait(60)
    assert current_leader(lock_dir) is None
