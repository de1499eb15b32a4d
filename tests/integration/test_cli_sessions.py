"""Agent CLI sessions end to end with real processes: a program that acts as an agent CLI
starts `lockyard serve` (no agent id) and runs `lockyard hook` through a shell, on a real
lock directory. The session id comes from the process tree; its locks live as long as the
CLI process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockyard.infra.lockstore import LockStore
from lockyard.infra.session.registry import SessionRegistry

FAKE_CLI = str(Path(__file__).with_name("fake_agent_cli.py"))
LOCKYARD = str(Path(sys.executable).parent / "lockyard")


class FakeCli:
    """One agent CLI session (a fake_agent_cli.py process) driven line by line."""

    def __init__(self, repo: Path, lock_dir: Path, cli: str = "claude-code") -> None:
        env = os.environ | {"LOCKYARD_LOCK_DIR": str(lock_dir)}
        self.process = subprocess.Popen(
            [sys.executable, FAKE_CLI, cli, str(repo)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert self._read() == {"ready": True}

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self) -> Any:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "the fake CLI ended"
        return json.loads(line)

    def send(self, **command: Any) -> Any:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self._read()

    def acquire(self, *files: str) -> Any:
        return self.send(op="acquire", files=list(files))

    def hook(self, tool_name: str, tool_input: dict[str, Any], cwd: Path) -> dict[str, Any]:
        payload = {"tool_name": tool_name, "tool_input": tool_input, "cwd": str(cwd)}
        answer: dict[str, Any] = self.send(op="hook", payload=payload)
        return answer

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(timeout=60)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.py").write_text("a\n")
    (root / "b.py").write_text("b\n")
    return root


@pytest.fixture
def sessions(repo: Path, lock_dir: Path) -> Iterator[list[FakeCli]]:
    started: list[FakeCli] = []
    yield started
    for cli in started:
        if cli.process.poll() is None:
            cli.process.kill()
            cli.process.wait()


def start(sessions: list[FakeCli], repo: Path, lock_dir: Path) -> FakeCli:
    cli = FakeCli(repo, lock_dir)
    sessions.append(cli)
    return cli


def denial(answer: dict[str, Any]) -> str | None:
    assert answer["exit_code"] == 0
    if not answer["stdout"].strip():
        return None
    output = json.loads(answer["stdout"])["hookSpecificOutput"]
    assert output["permissionDecision"] == "deny"
    return str(output["permissionDecisionReason"])


def test_server_and_hooks_of_one_cli_process_share_one_derived_agent_id(
    repo: Path, lock_dir: Path, sessions: list[FakeCli]
) -> None:
    alice = start(sessions, repo, lock_dir)
    result = alice.acquire("a.py")
    assert result["all_acquired"] is True
    assert result["results"][0]["holder"] == f"claude-code-{alice.pid}"
    assert denial(alice.hook("Write", {"file_path": "a.py", "content": "x"}, repo)) is None
    reason = denial(alice.hook("Edit", {"file_path": str(repo / "b.py")}, repo))
    assert reason is not None
    assert "b.py is not locked by you" in reason
    assert "mcp__lockyard__lock_acquire" in reason


def test_two_sessions_contend_and_hand_a_file_over(
    repo: Path, lock_dir: Path, sessions: list[FakeCli]
) -> None:
    alice = start(sessions, repo, lock_dir)
    bob = start(sessions, repo, lock_dir)
    assert alice.acquire("a.py")["all_acquired"] is True
    refused = bob.acquire("a.py")
    assert refused["all_acquired"] is False
    assert refused["results"][0]["holder"] == f"claude-code-{alice.pid}"
    reason = denial(bob.hook("Write", {"file_path": "a.py"}, repo))
    assert reason is not None
    assert f"locked by agent claude-code-{alice.pid}" in reason
    assert alice.send(op="release")["count"] == 1
    assert bob.acquire("a.py")["all_acquired"] is True
    assert denial(bob.hook("Write", {"file_path": "a.py"}, repo)) is None
    assert denial(alice.hook("Write", {"file_path": "a.py"}, repo)) is not None


def test_a_killed_cli_session_loses_its_locks_and_a_live_idle_one_keeps_them(
    repo: Path, lock_dir: Path, sessions: list[FakeCli]
) -> None:
    alice = start(sessions, repo, lock_dir)
    bob = start(sessions, repo, lock_dir)
    assert alice.acquire("a.py")["all_acquired"] is True
    assert bob.acquire("b.py")["all_acquired"] is True
    alice.process.send_signal(signal.SIGKILL)
    alice.process.wait()
    # alice's CLI process is gone: whatever became of its server, her lock is reclaimable.
    taken = bob.acquire("a.py")
    assert taken["all_acquired"] is True
    # bob is idle but alive: nobody can take his lock.
    store = LockStore(repo, lock_dir)
    assert not store.try_lock("b.py", "carol")
    assert store.holder("b.py") == f"claude-code-{bob.pid}"
    record = store.holder_record("b.py")
    assert record is not None
    assert record.pid == bob.pid  # the lock names the CLI process, not its server


def test_the_session_is_registered_while_the_server_runs_and_removed_when_it_ends(
    repo: Path, lock_dir: Path, sessions: list[FakeCli]
) -> None:
    alice = start(sessions, repo, lock_dir)
    registered = SessionRegistry(lock_dir).sessions()
    assert [(r.agent_id, r.cli, r.anchor_pid, alive) for r, alive in registered] == [
        (f"claude-code-{alice.pid}", "claude-code", alice.pid, True)
    ]
    assert registered[0][0].repo == str(repo.resolve())
    alice.close()
    assert SessionRegistry(lock_dir).sessions() == []


def test_status_shows_which_cli_session_holds_what(
    repo: Path, lock_dir: Path, sessions: list[FakeCli]
) -> None:
    alice = start(sessions, repo, lock_dir)
    alice.acquire("a.py")
    done = subprocess.run(
        [LOCKYARD, "status", "--json", "--lock-dir", str(lock_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    [session] = json.loads(done.stdout)["sessions"]
    assert session["agent_id"] == f"claude-code-{alice.pid}"
    assert session["cli"] == "claude-code"
    assert session["cli_pid"] == alice.pid
    assert session["alive"] is True
    assert session["locks"] == ["a.py"]
    table = subprocess.run(
        [LOCKYARD, "status", "--lock-dir", str(lock_dir)],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ | {"COLUMNS": "200"},
    ).stdout
    assert "Agent CLI sessions" in table
    assert f"claude-code-{alice.pid}" in table
