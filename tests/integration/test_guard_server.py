"""lockyard's guard over HTTP, in process: the session is found from the process at the other
end of the connection (never from the request), the answers of both kinds of request, and
every malformed request answered and closed."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from lockyard.infra.agentcli.guard_address import HOOK_PATH, hook_url, lock_dir_tag
from lockyard.infra.agentcli.guard_server import (
    GuardPortTakenError,
    GuardServer,
    listening_socket,
)
from lockyard.infra.lockstore import LockStore
from lockyard.infra.session.process_tree import process_ref
from lockyard.infra.session.registry import SessionRegistry, new_record

pytestmark = pytest.mark.anyio
T = TypeVar("T")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free: int = probe.getsockname()[1]
        return free


@pytest.fixture
def session(repo: Path, lock_dir: Path) -> str:
    """This test process anchors a session (as an agent CLI would, its server running)."""
    me = process_ref(os.getpid())
    assert me is not None
    record = new_record(f"claude-code-{me.pid}", "claude-code", me, str(repo), server_pid=1)
    SessionRegistry(lock_dir).register(record)
    return record.agent_id


@pytest.fixture
def lock_dir(tmp_path: Path) -> Path:
    path = tmp_path / "locks"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
async def guard(lock_dir: Path, port: int) -> AsyncIterator[GuardServer]:
    server = GuardServer(str(lock_dir))
    async with server.serving(listening_socket(port)):
        yield server


async def off_loop(function: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(function)


def write_call(repo: Path, name: str) -> bytes:
    call = {"tool_name": "Write", "tool_input": {"file_path": str(repo / name)}, "cwd": str(repo)}
    return json.dumps(call).encode()


def post(port: int, target: str, body: bytes, **headers: str) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("POST", target, body, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def reason(body: bytes) -> str:
    return str(json.loads(body)["hookSpecificOutput"]["permissionDecisionReason"])


async def test_a_claude_code_hook_is_judged_for_the_session_of_the_calling_process(
    guard: GuardServer, port: int, repo: Path, lock_dir: Path, session: str
) -> None:
    LockStore(repo, lock_dir).try_lock("held.py", session)
    LockStore(repo, lock_dir).try_lock("theirs.py", "bob")
    url = hook_url(str(lock_dir), "claude-code", port).removeprefix(f"http://127.0.0.1:{port}")
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def ask(body: bytes) -> bytes:
        connection.request("POST", url, body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type") == "application/json"
        return response.read()

    try:  # one kept-alive connection, as Claude Code's HTTP client keeps it
        assert await off_loop(lambda: ask(write_call(repo, "held.py"))) == b"{}"
        free = reason(await off_loop(lambda: ask(write_call(repo, "free.py"))))
        assert free.startswith("free.py is not locked by you. Call mcp__lockyard__lock_acquire")
        theirs = reason(await off_loop(lambda: ask(write_call(repo, "theirs.py"))))
        assert "theirs.py is locked by agent bob" in theirs
        read = json.dumps({"tool_name": "Read", "tool_input": {}}).encode()
        assert await off_loop(lambda: ask(read)) == b"{}"
        assert "could not read this tool call" in reason(await off_loop(lambda: ask(b"{oops")))
    finally:
        connection.close()


async def test_a_session_replaced_under_a_kept_alive_connection_is_judged_as_the_new_one(
    guard: GuardServer, port: int, repo: Path, lock_dir: Path, session: str
) -> None:
    """The guard remembers the session records it read; a record replaced (the CLI started a
    new server under another agent id, pipelined requests and all) is read again."""
    LockStore(repo, lock_dir).try_lock("held.py", session)
    url = hook_url(str(lock_dir), "claude-code", port).removeprefix(f"http://127.0.0.1:{port}")
    body = write_call(repo, "held.py")
    request = (
        f"POST {url} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    )

    def ask_twice(connection: socket.socket) -> bytes:
        connection.sendall(request * 2)  # pipelined: both answered, in order
        answer = b""
        while answer.count(b"HTTP/1.1 200") < 2 or not answer.endswith((b"}", b"}}")):
            answer += connection.recv(65536)
        return answer

    with socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
        assert (await off_loop(lambda: ask_twice(connection))).count(b"\r\n\r\n{}") == 2
        me = process_ref(os.getpid())
        assert me is not None
        SessionRegistry(lock_dir).register(
            new_record("claude-code-new", "claude-code", me, str(repo))
        )
        again = await off_loop(lambda: ask_twice(connection))
    assert again.count(b"held.py is locked by agent " + session.encode()) == 2


async def test_a_command_hook_request_gets_what_to_print_and_the_exit_status(
    guard: GuardServer, port: int, repo: Path, lock_dir: Path, session: str
) -> None:
    target = f"{HOOK_PATH}?cli=codex&dir={lock_dir_tag(str(lock_dir))}&via=command"
    status, _headers, body = await off_loop(
        lambda: post(port, target, write_call(repo, "free.py"), **{"X-Lockyard-Pid": "1"})
    )  # a wrong pid is only a place to look first: the connection says who calls
    assert status == 200
    first, _, rest = body.partition(b"\n")
    code, length = (int(field) for field in first.split())
    assert code == 0
    stdout, stderr = rest[:length], rest[length:]
    assert b"free.py is not locked by you" in stdout
    assert stderr == b""


async def test_a_process_outside_every_session_is_refused(
    guard: GuardServer, port: int, repo: Path, lock_dir: Path
) -> None:
    # Nobody registered a session: whatever the request says, this caller has none.
    url = hook_url(str(lock_dir), "claude-code", port)
    body = json.loads(write_call(repo, "a.py"))
    body["session_id"] = "claims-to-be-someone"
    status, _headers, answer = await off_loop(lambda: post(port, url, json.dumps(body).encode()))
    assert status == 200
    assert reason(answer).startswith("No lockyard session runs for this agent CLI")


async def test_a_hook_for_another_lock_directory_is_not_answered_for_it(
    guard: GuardServer, port: int, repo: Path, tmp_path: Path, session: str
) -> None:
    other = str(tmp_path / "other-locks")
    claude = hook_url(other, "claude-code", port)
    status, _headers, body = await off_loop(lambda: post(port, claude, write_call(repo, "a.py")))
    assert status == 200
    assert "set up for another lock directory" in reason(body)
    assert "--guard-port" in reason(body)
    command = f"{HOOK_PATH}?cli=codex&dir={lock_dir_tag(other)}&via=command"
    status, _headers, _body = await off_loop(lambda: post(port, command, b"{}"))
    assert status == 409  # the command hook judges the call itself


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 404),
        (
            b"POST /v1/pre-tool-use?via=command&cli=nope HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
            400,
        ),
        (b"NONSENSE\r\n\r\n", 400),
        (b"POST /v1/pre-tool-use HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"POST /v1/pre-tool-use HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400),
        (b"POST /v1/pre-tool-use HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", 413),
        (b"POST / HTTP/1.1\r\nX: " + b"y" * 70000 + b"\r\n\r\n", 413),
        (b"POST / HTTP/1.1\r\nHost", 400),
    ],
)
async def test_a_malformed_request_gets_an_error_status_and_the_connection_is_closed(
    guard: GuardServer, port: int, raw: bytes, status: int
) -> None:
    def exchange() -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
            connection.sendall(raw)
            connection.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := connection.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)

    answer = await off_loop(exchange)
    assert answer.startswith(f"HTTP/1.1 {status} ".encode()), answer[:80]


async def test_servers_of_one_user_share_the_port_and_another_program_is_refused_it(
    port: int,
) -> None:
    first, second = listening_socket(port), listening_socket(port)
    first.close()
    second.close()
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", port))
    try:
        with pytest.raises(GuardPortTakenError, match=f"port {port} on 127.0.0.1 is taken"):
            listening_socket(port)
    finally:
        squatter.close()
