"""One decision, whichever way a tool call reaches the guard: an HTTP hook posted to a real
`lockyard serve`, the command hook answered by that server's guard, and the command hook
judging the call in its own process (no guard answering) give the same answers; so does
lockyard's OpenCode plugin, which asks the guard over HTTP and runs the command hook when no
guard answers."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockyard.infra.agentcli.guard_address import hook_url
from lockyard.infra.agentcli.setups import Invocation, opencode_plugin
from lockyard.infra.lockstore import LockStore
from lockyard.infra.session.registry import SessionRegistry
from polling_support import wait_until

LOCKYARD = str(Path(sys.executable).parent / "lockyard")
# A hook process per call and way (32 per test): minutes on a loaded 2-core machine.
pytestmark = pytest.mark.timeout(900)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def serve(repo: Path, lock_dir: Path, port: int, tmp_path: Path) -> Iterator[Path]:
    """A `lockyard serve` started by this test process, which therefore anchors its session
    (as an agent CLI does); its log."""
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if k != "LOCKYARD_GUARD_PORT"}
    with log.open("wb") as err:
        process = subprocess.Popen(
            [LOCKYARD, "serve", "--cli", "claude-code", "--repo", str(repo), "--lock-dir",
             str(lock_dir), "--guard-port", str(port), "--log-level", "DEBUG"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, env=env,
        )  # fmt: skip
    try:
        wait_until(lambda: SessionRegistry(lock_dir).sessions(), "the session", within=300)
        wait_until(lambda: "answering guard hooks" in log.read_text(), "the guard", within=300)
        yield log
    finally:
        assert process.stdin is not None
        process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=60)
        process.kill()
        process.wait()


def cases(repo: Path) -> dict[str, bytes]:
    def tool(name: str, tool_input: dict[str, object]) -> bytes:
        return json.dumps({"tool_name": name, "tool_input": tool_input, "cwd": str(repo)}).encode()

    return {
        "write, held": tool("Write", {"file_path": str(repo / "held.py"), "content": "x"}),
        "write, free": tool("Write", {"file_path": "free.py", "content": "x"}),
        "edit, another's": tool("Edit", {"file_path": str(repo / "theirs.py")}),
        "write, outside": tool("Write", {"file_path": "/tmp/elsewhere.py"}),
        "read": tool("Read", {"file_path": str(repo / "free.py")}),
        "shell, writes free": tool("Bash", {"command": "echo hi > free.py"}),
        "shell, reads": tool("Bash", {"command": "cat held.py"}),
        "not json": b"{nope",
    }


def by_http(port: int, lock_dir: Path, cli: str, body: bytes) -> tuple[str, str, int]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request("POST", hook_url(str(lock_dir), cli, port), body)
        response = connection.getresponse()
        assert response.status == 200
        text = response.read().decode()
    finally:
        connection.close()
    return ("" if text == "{}" else text), "", 0  # `{}` is an HTTP hook's silent allow


def by_command(lock_dir: Path, cli: str, body: bytes, port: int) -> tuple[str, str, int]:
    env = {k: v for k, v in os.environ.items() if k != "LOCKYARD_GUARD_PORT"}
    done = subprocess.run(
        [LOCKYARD, "hook", "pre-tool-use", "--cli", cli, "--lock-dir", str(lock_dir),
         "--guard-port", str(port)],
        input=body, capture_output=True, timeout=120, env=env,
    )  # fmt: skip
    return done.stdout.decode().strip(), done.stderr.decode().strip(), done.returncode


@pytest.mark.parametrize("cli", ["claude-code", "codex"])
def test_every_way_to_the_guard_gives_the_same_answer(
    serve: Path, repo: Path, lock_dir: Path, port: int, cli: str
) -> None:
    [(record, _alive)] = SessionRegistry(lock_dir).sessions()
    assert record.anchor_pid == os.getpid()
    store = LockStore(repo, lock_dir)
    assert store.try_lock("held.py", record.agent_id)
    assert store.try_lock("theirs.py", "bob")
    nobody_listens = free_port()
    answers: dict[str, set[tuple[str, str, int]]] = {}
    for name, body in cases(repo).items():
        answers[name] = {
            by_http(port, lock_dir, cli, body),
            by_command(lock_dir, cli, body, port),
            by_command(lock_dir, cli, body, nobody_listens),
        }
    assert {name: len(seen) for name, seen in answers.items()} == dict.fromkeys(answers, 1), answers
    [(allowed, _, _)] = answers["write, held"]
    assert allowed == ""
    [(denied, _, _)] = answers["write, free"]
    assert "free.py is not locked by you" in denied
    [(theirs, _, _)] = answers["edit, another's"]
    assert "theirs.py is locked by agent bob" in theirs
    [(shell, _, _)] = answers["shell, writes free"]
    assert "free.py" in shell
    # The server's guard answered the command hooks given its port (one per case).
    log = serve.read_text()
    assert log.count("guard: answered via=command") == len(answers)


# OpenCode's and Kilo's plugin (and pi's extension) ask the guard over HTTP from inside the
# CLI's own process: node imports the plugin `lockyard init opencode` writes and calls its hook.
NODE_CALLS_THE_PLUGIN = """
const [plugin, directory, tool, args] = process.argv.slice(1);
const { LockyardGuard } = await import(plugin);
const hooks = await LockyardGuard({ directory });
try {
  await hooks["tool.execute.before"]({ tool }, { args: JSON.parse(args) });
  console.log("allowed");
} catch (error) {
  console.log(`refused: ${error.message}`);
}
"""


def by_plugin(plugin: Path, repo: Path, tool: str, args: dict[str, object]) -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node on PATH to run the OpenCode plugin with")
    env = {k: v for k, v in os.environ.items() if k != "LOCKYARD_GUARD_PORT"}
    done = subprocess.run(
        [node, "--input-type=module", "-e", NODE_CALLS_THE_PLUGIN, str(plugin), str(repo), tool,
         json.dumps(args)],
        capture_output=True, text=True, timeout=120, env=env, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def plugin_file(tmp_path: Path, lock_dir: Path, port: int, command: str) -> Path:
    how = Invocation(command, str(lock_dir), guard_port=port)
    path = tmp_path / f"lockyard-{port}-{Path(command).name}.mjs"
    path.write_text(opencode_plugin("opencode", how))
    return path


def test_the_opencode_plugin_asks_the_guard_over_http_and_judges_itself_without_one(
    serve: Path, repo: Path, lock_dir: Path, port: int, tmp_path: Path
) -> None:
    [(record, _alive)] = SessionRegistry(lock_dir).sessions()
    assert LockStore(repo, lock_dir).try_lock("held.py", record.agent_id)
    held = {"filePath": str(repo / "held.py"), "content": "x"}
    free = {"filePath": str(repo / "free.py"), "content": "x"}
    # No `lockyard` command to fall back on: only the server's guard can answer these.
    over_http = plugin_file(tmp_path, lock_dir, port, "/nonexistent/lockyard")
    assert by_plugin(over_http, repo, "write", held) == "allowed"
    refused = by_plugin(over_http, repo, "write", free)
    assert "free.py is not locked by you" in refused
    assert "lockyard_lock_acquire" in refused
    assert "free.py" in by_plugin(over_http, repo, "bash", {"command": "echo hi > free.py"})
    # A read is asked too (the guard notes what the agent saw), and never refused.
    assert by_plugin(over_http, repo, "read", free) == "allowed"
    assert serve.read_text().count("guard: answered via=command") == 4
    # Nobody listens on the plugin's port: `lockyard hook` judges the call, alike.
    elsewhere = plugin_file(tmp_path, lock_dir, free_port(), LOCKYARD)
    assert by_plugin(elsewhere, repo, "write", held) == "allowed"
    assert by_plugin(elsewhere, repo, "write", free) == refused
    # And with neither, the call is refused, never let through.
    neither = plugin_file(tmp_path, lock_dir, free_port(), "/nonexistent/lockyard")
    assert by_plugin(neither, repo, "write", held).startswith(
        "refused: lockyard's guard did not run"
    )
