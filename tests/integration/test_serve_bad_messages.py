"""`lockyard serve` answers every request it is sent, however malformed: JSON-RPC errors for
lines that are not JSON-RPC, `is_error` tool results for bad tool arguments; and it goes on
serving afterwards. Driven over a real stdio pipe, line by line, as a client would."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


class RawSession:
    """A `lockyard serve` process spoken to in raw lines (no MCP client library in between)."""

    def __init__(self, repo: Path, lock_dir: Path) -> None:
        self.process = subprocess.Popen(
            [LOCKYARD, "serve", "--agent-id", "alice", "--repo", str(repo)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "LOCKYARD_LOCK_DIR": str(lock_dir)},
        )
        self._pending = b""
        self.send_json(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        assert self.receive()["id"] == 0
        self.send_json({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def send_json(self, message: dict[str, Any]) -> None:
        self.send(json.dumps(message).encode())

    def receive(self, seconds: float = 60.0) -> dict[str, Any]:
        """The next message the server writes (the test fails if none comes)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + seconds
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "the server gave no answer"
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 65536)
                assert chunk, "the server closed its output"
                self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def call(self, request_id: int, name: str, arguments: object) -> dict[str, Any]:
        self.send_json(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
        )
        answer = self.receive()
        assert answer["id"] == request_id
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(60)


@pytest.fixture
def session(repo: Path, lock_dir: Path) -> Iterator[RawSession]:
    raw = RawSession(repo, lock_dir)
    yield raw
    raw.close()


def _locks(lock_dir: Path) -> list[str]:
    return [name for name in os.listdir(lock_dir) if name.endswith(".lock")]


def _still_serves(session: RawSession, request_id: int) -> None:
    answer = session.call(request_id, "lock_acquire", {"filepaths": ["ok.py"]})
    assert json.loads(answer["result"]["content"][0]["text"])["all_acquired"] is True


def test_a_line_that_is_not_json_gets_a_parse_error(session: RawSession) -> None:
    session.send(b"this is not json")
    answer = session.receive()
    assert answer["id"] is None
    assert answer["error"]["code"] == -32700
    assert "JSON-RPC 2.0" in answer["error"]["message"]
    _still_serves(session, 1)


def test_a_line_that_is_not_utf8_gets_a_parse_error(session: RawSession) -> None:
    session.send(b'{"jsonrpc": "2.0", "id": 3, "method": "tools/list", "x": "\xff"}')
    answer = session.receive()
    assert answer["error"]["code"] == -32700
    assert answer["id"] is None
    _still_serves(session, 1)


def test_json_that_is_not_a_json_rpc_message_gets_an_invalid_request_error(
    session: RawSession,
) -> None:
    session.send(b'{"jsonrpc": "2.0", "id": 7}')
    answer = session.receive()
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32600
    session.send(b"[1, 2]")
    assert session.receive()["error"]["code"] == -32600
    _still_serves(session, 1)


def test_a_path_with_an_escaped_lone_surrogate_gets_a_tool_error_and_locks_nothing(
    session: RawSession, lock_dir: Path
) -> None:
    session.send(
        b'{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": '
        b'"lock_acquire", "arguments": {"filepaths": ["a\\ud800.py", "b.py"]}}}'
    )
    answer = session.receive()
    assert answer["id"] == 4
    assert answer["result"]["isError"] is True
    assert "not valid UTF-8" in answer["result"]["content"][0]["text"]
    assert _locks(lock_dir) == []
    _still_serves(session, 5)


def test_a_lone_surrogate_in_another_request_gets_an_invalid_params_error(
    session: RawSession,
) -> None:
    session.send(b'{"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"x": "\\udc80"}}')
    answer = session.receive()
    assert answer["id"] == 6
    assert answer["error"]["code"] == -32602


@pytest.mark.parametrize("arguments", [["a.py"], "a.py", 5, True])
def test_arguments_that_are_not_an_object_get_a_tool_error(
    session: RawSession, lock_dir: Path, arguments: object
) -> None:
    answer = session.call(8, "lock_acquire", arguments)
    assert answer["result"]["isError"] is True
    assert '"arguments" must be a JSON object' in answer["result"]["content"][0]["text"]
    assert _locks(lock_dir) == []
    _still_serves(session, 9)
