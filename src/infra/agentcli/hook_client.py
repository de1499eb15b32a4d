"""The command hook's fast path: hand the tool call to the guard that the session's own
`lockyard serve` already runs, and print its answer.

A CLI that only runs commands starts one hook process per tool call, so this process must
cost little more than the interpreter's own start: it imports `os`, `time` and `_socket` (the C
socket module, without `socket.py`'s wrappers) and lockyard's `guard_address`, sends the
payload as it came, and writes back what the guard says to print. The guard identifies this
process by its connection (and the session as this process's ancestor), so the request
claims nothing. When no guard answers (no server runs, or another lock directory's has the
port), the caller judges the call in its own process: slower, the same answer.
"""

from __future__ import annotations

import _socket
import os
import time

from .guard_address import COMMAND_VIA, HOOK_PATH, HOST, guard_port, lock_dir_tag
from .hook_timeouts import HOOK_DEADLINE_SECONDS, LATE_EXIT_CODE, late_reason


class GuardAnswer:
    """What the hook prints (stdout, stderr) and its exit status."""

    __slots__ = ("exit_code", "stderr", "stdout")

    def __init__(self, stdout: bytes, stderr: bytes, exit_code: int) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.exit_code = exit_code


def ask_guard(
    cli: str,
    raw: bytes,
    lock_dir: str | None = None,
    port: str | None = None,
    deadline: float | None = None,
) -> GuardAnswer | None:
    """The guard's answer to the tool call `raw` of `cli`, or None when no guard of this
    lock directory answered (the caller then judges the call itself). A guard that listens
    but has not answered by `deadline` (`time.monotonic()`; default: the hook's deadline
    from now) gets a refusal instead: the CLI would let the call through on its own timeout.
    Raises ValueError for a bad `LOCKYARD_LOCK_DIR` or port (the caller reports it)."""
    if deadline is None:
        deadline = time.monotonic() + HOOK_DEADLINE_SECONDS
    if lock_dir is None:
        from ..lockstore import default_lock_dir_path

        lock_dir = default_lock_dir_path()
    directory = lock_dir
    number = guard_port(directory, port)
    head = (
        f"POST {HOOK_PATH}?cli={cli}&dir={lock_dir_tag(directory)}&via={COMMAND_VIA} HTTP/1.1\r\n"
        f"Host: {HOST}:{number}\r\nContent-Length: {len(raw)}\r\n"
        f"X-Lockyard-Pid: {os.getpid()}\r\nConnection: close\r\n\r\n"
    )
    connection = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        connection.settimeout(_left(deadline))
        connection.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        connection.connect((HOST, number))
        connection.sendall(head.encode("latin-1") + raw)
        reply = _read_all(connection, deadline)
    except TimeoutError:  # a guard listens but is stuck: the CLI must not time the hook out
        return late_answer()
    except OSError:  # nobody listens, or the guard went away mid-call
        return None
    finally:
        connection.close()
    return _parse(reply)


def late_answer() -> GuardAnswer:
    """The refusal of a call the guard did not judge by the hook's deadline."""
    reason = late_reason(HOOK_DEADLINE_SECONDS)
    return GuardAnswer(b"", reason.encode(), LATE_EXIT_CODE)


def _left(deadline: float) -> float:
    """Seconds until `deadline`; TimeoutError when it has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _read_all(connection: _socket.socket, deadline: float) -> bytes:
    chunks: list[bytes] = []
    while True:
        connection.settimeout(_left(deadline))
        chunk = connection.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _parse(reply: bytes) -> GuardAnswer | None:
    """The answer in a `via=command` reply; None for anything else (the caller judges)."""
    head, sep, body = reply.partition(b"\r\n\r\n")
    if not sep or not head.startswith(b"HTTP/1.1 200 "):
        return None
    first, newline, rest = body.partition(b"\n")
    fields = first.split(b" ")
    if not newline or len(fields) != 2 or not all(f.isdigit() for f in fields):
        return None
    exit_code, length = int(fields[0]), int(fields[1])
    if length > len(rest):
        return None
    return GuardAnswer(rest[:length], rest[length:], exit_code)
