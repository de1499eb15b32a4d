"""`lockyard serve` through its real entry point, driven by a real MCP stdio client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from lockyard.infra.lockstore.lockdir.store import LockStore
from lockyard.infra.transports.sdk.server import create_locking_mcp_server

pytestmark = pytest.mark.anyio

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


def child_env(lock_dir: Path, **extra: str) -> dict[str, str]:
    """What the server process gets (stdio_client scrubs everything else): the lock dir, PATH,
    and coverage's variables so the child is measured too."""
    env = {"LOCKYARD_LOCK_DIR": str(lock_dir), "PATH": os.environ["PATH"], **extra}
    env.update({k: v for k, v in os.environ.items() if k.startswith(("COVERAGE_", "PYTHONPATH"))})
    return env


def serve_params(agent: str, repo: Path, lock_dir: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=LOCKYARD,
        args=["serve", "--agent-id", agent, "--repo", str(repo), *args],
        env=child_env(lock_dir),
    )


@asynccontextmanager
async def served(agent: str, repo: Path, lock_dir: Path, *args: str) -> AsyncIterator[Client]:
    async with Client(serve_params(agent, repo, lock_dir, *args)) as client:
        yield client


def text_of(result: Any) -> str:
    assert len(result.content) == 1
    return str(result.content[0].text)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    (path / "src").mkdir(parents=True)
    return path


async def test_serves_the_same_tools_as_the_in_process_server(repo: Path, lock_dir: Path) -> None:
    in_process = create_locking_mcp_server("a", str(repo), lock_dir=lock_dir / "other")
    async with Client(in_process["instance"], mode="legacy") as local:
        expected = (await local.list_tools()).tools
    async with served("a", repo, lock_dir) as client:
        tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == ["lock_acquire", "lock_release", "lock_status"]
    assert [t.model_dump() for t in tools] == [t.model_dump() for t in expected]


async def test_results_are_identical_to_the_in_process_server(repo: Path, lock_dir: Path) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("lock_acquire", {"filepaths": ["src/b.py", "src/a.py", "./src/a.py"]}),
        ("lock_acquire", {"filepaths": ["src/a.py"], "timeout_seconds": 0}),
        ("lock_release", {"filepaths": ["src/a.py", "src/never.py"]}),
        ("lock_release", {"all": True}),
        ("lock_release", {"all": True}),
        ("lock_acquire", {"filepaths": []}),
        ("lock_acquire", {"filepaths": ["../outside.py"]}),
        ("lock_acquire", {"filepaths": ["x"], "timeout_seconds": -1}),
        ("lock_acquire", {"filepaths": ["x"], "colour": "red"}),
        ("lock_release", {"filepaths": ["x"], "all": True}),
        ("lock_release", {}),
        ("no_such_tool", {}),
    ]
    in_process = create_locking_mcp_server("a", str(repo), lock_dir=lock_dir / "other")
    async with Client(in_process["instance"], mode="legacy") as local:
        expected = [await local.call_tool(name, args) for name, args in calls]
    async with served("a", repo, lock_dir) as client:
        got = [await client.call_tool(name, args) for name, args in calls]

    assert [(text_of(r), r.is_error) for r in got] == [(text_of(r), r.is_error) for r in expected]
    first = json.loads(text_of(got[0]))
    assert first["all_acquired"] is True
    assert [r["filepath"] for r in first["results"]] == [
        "src/a.py",
        "src/b.py",
    ]
    errors = [r.is_error for r in got]
    assert errors == [False] * 5 + [True] * 7  # bad input: is_error results, never protocol errors


async def test_progress_is_reported_while_waiting(repo: Path, lock_dir: Path) -> None:
    other = LockStore(str(repo), lock_dir)
    assert other.try_lock("src/a.py", "holder")
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    env = child_env(lock_dir, LOCKYARD_PROGRESS_INTERVAL="0.1")
    params = StdioServerParameters(
        command=LOCKYARD,
        args=["serve", "--agent-id", "a", "--repo", str(repo)],
        env=env,
    )
    async with Client(params) as client:
        result = await client.call_tool(
            "lock_acquire",
            {"filepaths": ["src/a.py"], "timeout_seconds": 1.0},
            progress_callback=on_progress,
        )
    data = json.loads(text_of(result))
    assert data["all_acquired"] is False
    assert data["results"][0]["holder"] == "holder"
    assert len(progress) >= 2
    assert progress[0][1] is not None
    assert "waiting for locks" in progress[0][1]
    # It names the file still waited for, its holder and the agent's place in line.
    assert any("src/a.py: held by holder for" in (m or "") for _, m in progress), progress
    assert any("you are next" in (m or "") for _, m in progress), progress
    assert [value for value, _ in progress] == sorted(value for value, _ in progress)


async def test_closing_stdin_releases_the_sessions_locks(repo: Path, lock_dir: Path) -> None:
    store = LockStore(str(repo), lock_dir)
    assert store.try_lock("src/kept.py", "b")  # another agent's lock must survive
    async with served("a", repo, lock_dir) as client:
        result = await client.call_tool("lock_acquire", {"filepaths": ["src/a.py", "src/b.py"]})
        assert json.loads(text_of(result))["all_acquired"] is True
        assert store.holder("src/a.py") == "a"
    assert store.holder("src/a.py") is None
    assert store.holder("src/b.py") is None
    assert store.holder("src/kept.py") == "b"


def rpc(proc: subprocess.Popen[str], message: dict[str, Any]) -> dict[str, Any] | None:
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    if "id" not in message:
        return None
    answer: dict[str, Any] = json.loads(proc.stdout.readline())
    return answer


def start_raw_server(repo: Path, lock_dir: Path, agent: str = "a") -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [LOCKYARD, "serve", "--agent-id", agent, "--repo", str(repo)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "LOCKYARD_LOCK_DIR": str(lock_dir)},
    )
    init = rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})  # fmt: skip
    assert init is not None
    assert init["result"]["serverInfo"]["name"] == "lockyard"
    rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return proc


def acquire_raw(proc: subprocess.Popen[str], *paths: str) -> dict[str, Any]:
    arguments = {"filepaths": list(paths), "timeout_seconds": 0}
    answer = rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "lock_acquire", "arguments": arguments}})  # fmt: skip
    assert answer is not None
    data: dict[str, Any] = json.loads(answer["result"]["content"][0]["text"])
    return data


def test_sigterm_releases_the_sessions_locks_and_logs_them(repo: Path, lock_dir: Path) -> None:
    proc = start_raw_server(repo, lock_dir)
    assert acquire_raw(proc, "src/a.py")["all_acquired"] is True
    store = LockStore(str(repo), lock_dir)
    assert store.holder("src/a.py") == "a"
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert store.holder("src/a.py") is None
    assert "released src/a.py" in err


def test_a_killed_server_leaves_a_lock_that_is_reclaimed_as_stale(
    repo: Path, lock_dir: Path
) -> None:
    proc = start_raw_server(repo, lock_dir)
    assert acquire_raw(proc, "src/a.py")["all_acquired"] is True
    proc.kill()
    proc.communicate(timeout=20)
    store = LockStore(str(repo), lock_dir)
    assert store.holder("src/a.py") == "a"  # nobody released it ...
    assert store.try_lock("src/a.py", "b")  # ... but its holder is provably dead
    assert store.holder("src/a.py") == "b"


def test_stdout_carries_only_the_protocol(repo: Path, lock_dir: Path) -> None:
    proc = start_raw_server(repo, lock_dir)
    acquire_raw(proc, "src/a.py")
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdin.close()
    assert proc.wait(timeout=20) == 0
    out, err = proc.stdout.read(), proc.stderr.read()
    assert out == ""  # everything after the answers read above: nothing stray
    assert "serving agent a" in err


BAD_CONFIGURATIONS = [
    ([], {}, 2, "is in no git repository; pass --repo PATH"),
    (["--agent-id", "  ", "--repo", "{repo}"], {}, 2, "agent_id is empty"),
    (["--agent-id", "a\nb", "--repo", "{repo}"], {}, 2, "control characters"),
    (["--agent-id", "a"], {}, 2, "is in no git repository; pass --repo PATH"),
    (["--repo", "{repo}", "--cli", "Claude Code"], {}, 2, "CLI name 'Claude Code' must be"),
    (["--agent-id", "a", "--repo", "{repo}/missing"], {}, 2, "is not a directory"),
    (["--agent-id", "a", "--repo", "{repo}", "--log-level", "loud"], {}, 2, "--log-level"),
    (["--repo", "{repo}"], {"LOCKYARD_AGENT_ID": "  "}, 2, "agent_id is empty"),
    (["--agent-id", "a", "--repo", "{repo}", "--lock-dir", "{file}"], {}, 3, "not a directory"),
    (["--agent-id", "a", "--repo", "{repo}"], {"LOCKYARD_LOCK_DIR": "{file}"}, 3, "lock dir"),
]
THROUGH_THE_ENTRY_POINT = {0, 5, 9}  # one of each kind in a real process; the rest in process


@pytest.mark.parametrize("case", range(len(BAD_CONFIGURATIONS)))
def test_bad_configuration_fails_closed_before_speaking_mcp(
    tmp_path: Path, repo: Path, case: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    args, env, code, message = BAD_CONFIGURATIONS[case]
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    fill = {"repo": str(repo), "file": str(a_file)}
    argv = ["serve", *[arg.format(**fill) for arg in args]]
    extra_env = {k: v.format(**fill) for k, v in env.items()}
    monkeypatch.chdir(tmp_path)  # outside any git repository: no default --repo
    if case in THROUGH_THE_ENTRY_POINT:
        base = {k: v for k, v in os.environ.items() if not k.startswith("LOCKYARD_")}
        done = subprocess.run(
            [LOCKYARD, *argv],
            input='{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n',
            capture_output=True,
            text=True,
            timeout=60,
            env={**base, **extra_env},
            cwd=tmp_path,
        )
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    else:
        from typer.testing import CliRunner

        from lockyard.cli.app import app

        for name in [k for k in os.environ if k.startswith("LOCKYARD_")]:
            monkeypatch.delenv(name)
        result = CliRunner().invoke(app, argv, env=extra_env)
        returncode, stdout, stderr = result.exit_code, result.stdout, result.stderr
    assert returncode == code, stderr
    assert stdout == ""
    assert message in stderr
    assert stderr.startswith("lockyard: error: ")
    assert stderr.count("\n") == 1  # one line: what is wrong and what to do
    assert "Traceback" not in stderr


async def test_an_unreadable_lock_is_reported_per_file_and_a_store_failure_is_an_error_result(
    repo: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lockyard.infra.lockstore.paths import lock_name
    from lockyard.infra.tools.lock_tools import UNREADABLE_HOLDER
    from lockyard.infra.transports.stdio.server import ServeSession

    store = LockStore(str(repo), lock_dir)
    key = store.canonicalize("src/a.py")
    broken = lock_dir / f"{lock_name(store.namespace, key)}.lock"
    broken.mkdir()
    (broken / "one").write_text("{}")
    (broken / "two").write_text("{}")  # two grants in one lock: the store refuses to guess
    session = ServeSession(store, "a")
    result = await session.call_tool(
        "lock_acquire", {"filepaths": ["src/a.py", "src/b.py"], "timeout_seconds": 0}, None
    )
    assert result["isError"] is False
    payload = json.loads(result["content"][0]["text"])
    assert payload["results"] == [
        {"filepath": key, "acquired": False, "holder": UNREADABLE_HOLDER},
        {"filepath": "src/b.py", "acquired": True, "holder": "a"},
    ]

    def failing_try_lock(filepath: str, agent_id: str, **options: object) -> bool:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(store, "try_lock", failing_try_lock)
    failed = await session.call_tool("lock_acquire", {"filepaths": ["src/c.py"]}, None)
    assert failed["isError"] is True  # an isError result the model can read, not a protocol error
    failed_text = failed["content"][0]["text"]
    assert failed_text.startswith("lock_acquire failed: ")
    assert "Input/output error" in failed_text
    assert sorted(p.name for p in broken.iterdir()) == ["one", "two"]  # nothing deleted
    assert session.release_own_locks() == ["src/b.py"]


async def test_stdin_lines_from_a_pipe_and_from_a_regular_file(tmp_path: Path) -> None:
    from lockyard.infra.transports.stdio.server import StdinLines

    read_end, write_end = os.pipe()
    os.write(write_end, b'{"a": 1}\n\n{"b":')
    os.write(write_end, b" 2}\n" + '{"c": "\u00e9"}'.encode())  # the last line has no newline
    os.close(write_end)
    try:
        assert [line async for line in StdinLines(read_end)] == [
            b'{"a": 1}',
            b'{"b": 2}',
            '{"c": "\u00e9"}'.encode(),
        ]
    finally:
        os.close(read_end)

    regular = tmp_path / "input.jsonl"
    regular.write_bytes(b'{"x": 1}\n')
    fd = os.open(regular, os.O_RDONLY)
    try:
        assert [line async for line in StdinLines(fd)] == [b'{"x": 1}']
    finally:
        os.close(fd)


def test_serve_with_stdin_at_end_of_file_exits_at_once(repo: Path, lock_dir: Path) -> None:
    done = subprocess.run(
        [LOCKYARD, "serve", "--agent-id", "a", "--repo", str(repo)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "LOCKYARD_LOCK_DIR": str(lock_dir)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
