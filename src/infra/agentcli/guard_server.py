"""lockyard's guard over HTTP, answered by the `lockyard serve` processes of a lock directory.

Every `lockyard serve` listens on the lock directory's guard port on 127.0.0.1
(`guard_address.py`) with `SO_REUSEPORT`, so the kernel spreads the requests over all the
live servers of this user, and a server that ends (or is killed) takes nothing down with it:
the others go on answering. Two kinds of request come in, both a POST of a CLI's hook
payload to `/v1/pre-tool-use?cli=NAME&dir=TAG`:

- `via=http` (the default): an HTTP hook of the CLI itself (Claude Code's `"type": "http"`).
  The answer is the CLI's JSON (`{}` allows); a refusal is a 200 with the deny JSON, since
  Claude Code reads any other status as a failure (which `onFailure: "block"` refuses too).
- `via=command`: the command hook's fast path (`hook_client.py`). The answer carries what
  the hook prints and its exit status; 409 or 400 tell it to judge the call itself.

Who is calling is never taken from the request: the server asks the kernel which process
holds the other end of the connection (`session/tcp_peer.py`), and the session is the one
anchored at that process or its nearest ancestor that anchors one, exactly as the command
hook finds its own (the CLI itself posts an HTTP hook; a command hook is its descendant).
A request may name its process (`X-Lockyard-Pid`), which only says where to look first.

The decision is `hook_runner`'s, the same a command hook runs in its own process: a write
is judged in the event loop (a few small reads), a shell command in a worker thread (it
parses the command and may run git), so the agent's MCP session never waits long for it.
Each answer is written in one send with TCP_NODELAY (a reply split in two sends meets Nagle
and delayed ACKs: ~40 ms a call, measured).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import itertools
import json
import logging
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from ..session.process_tree import ProcessRef, ancestors, process_ref
from ..session.registry import SessionRegistry
from ..session.tcp_peer import PeerUnknownError, peer_process
from .formats import FORMATS, CliFormat, HookAnswer, ToolCall
from .guard_address import COMMAND_VIA, HOOK_PATH, HOST, MAX_PAYLOAD_BYTES, lock_dir_tag
from .hook_runner import (
    JudgedAgent,
    NoSessionError,
    judge_read_call,
    read_tool_call,
    session_agent,
)
from .lockdir_reader import ReaderCache

log = logging.getLogger("lockyard.guard")

MAX_HEAD_BYTES = 64 * 1024
IDLE_SECONDS = 600.0
"""An idle kept-alive connection is closed after this long (the client closes first)."""
PID_HEADER = "x-lockyard-pid"


class GuardPortTakenError(OSError):
    """Another program (not a `lockyard serve` of this user) listens on the guard port."""


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()

    def encode(self, keep_alive: bool) -> bytes:
        reason = _REASONS.get(self.status, "Error")
        head = [
            f"HTTP/1.1 {self.status} {reason}",
            "Content-Type: application/json",
            f"Content-Length: {len(self.body)}",
            "Connection: " + ("keep-alive" if keep_alive else "close"),
            *(f"{name}: {value}" for name, value in self.headers),
        ]
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + self.body


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 409: "Conflict", 413: "Too Large"}


def listening_socket(port: int, host: str = HOST) -> socket.socket:
    """A socket listening on `host:port` beside this user's other lockyard servers.

    Raises GuardPortTakenError when another program holds the port.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise GuardPortTakenError(
                exc.errno,
                f"port {port} on {host} is taken by another program (or another user's lockyard)",
            ) from None
        raise
    sock.setblocking(False)
    return sock


class GuardServer:
    """The guard of one lock directory, over HTTP on one listening socket."""

    def __init__(self, lock_dir: str) -> None:
        self.lock_dir = lock_dir
        self.tag = lock_dir_tag(lock_dir)
        self.registry = SessionRegistry(lock_dir)
        self.readers = ReaderCache(lock_dir)

    @contextlib.asynccontextmanager
    async def serving(self, sock: socket.socket) -> AsyncIterator[asyncio.Server]:
        """Answer on `sock` while the context lasts (in the running asyncio loop)."""
        server = await asyncio.start_server(self._connection, sock=sock, limit=MAX_HEAD_BYTES)
        try:
            yield server
        finally:
            server.close()
            with contextlib.suppress(Exception):
                server.close_clients()  # type: ignore[attr-defined]  # 3.13+
            await server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        local, remote = writer.get_extra_info("sockname"), writer.get_extra_info("peername")
        peer: ProcessRef | None = None  # the process at the other end, found once
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                if peer is None:
                    peer = self._peer(local, remote, request)
                reply = await self.answer_async(request, peer)
                keep_alive = request.headers.get("connection", "").lower() != "close"
                writer.write(reply.encode(keep_alive))
                await writer.drain()
                if not keep_alive:
                    return
        except _BadRequestError as exc:
            writer.write(Reply(exc.status, json.dumps({"error": str(exc)}).encode()).encode(False))
            with contextlib.suppress(OSError):
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            return
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    def _peer(
        self, local: tuple[str, int], remote: tuple[str, int], request: Request
    ) -> ProcessRef | None:
        """The process at the other end (None: unknown; the answer then refuses)."""
        hint = request.headers.get(PID_HEADER, "")
        first = [int(hint)] if hint.isdigit() else []
        anchors = [record.anchor_pid for record, alive in self.registry.sessions() if alive]
        try:
            pid = peer_process(local, remote, [*first, *anchors])
        except (PeerUnknownError, OSError) as exc:
            log.warning("guard: cannot tell who is calling from %s:%s: %s", *remote, exc)
            return None
        return process_ref(pid)

    async def answer_async(self, request: Request, peer: ProcessRef | None) -> Reply:
        """The reply to one request from `peer` (the process at the other end).

        A write is judged in the event loop (a few reads of small files: a thread would cost
        more than the decision); a shell command in a worker thread, since it parses the
        command and may run git."""
        judged = self._read(request)
        if isinstance(judged, Reply):
            return judged
        fmt, call, command = judged
        find_agent = functools.partial(self._find_agent, fmt, peer)
        judge = functools.partial(
            judge_read_call, fmt, call, self.lock_dir, find_agent, self.readers
        )
        if call.kind == "shell":
            answer = await asyncio.get_running_loop().run_in_executor(None, judge)
        else:
            answer = judge()
        log.debug(
            "guard: answered via=%s for pid %s: %s",
            COMMAND_VIA if command else "http",
            None if peer is None else peer.pid,
            "allow" if not answer.stdout and answer.exit_code == 0 else "deny",
        )
        return _as_reply(answer, command)

    def _read(self, request: Request) -> Reply | tuple[CliFormat, ToolCall, bool]:
        """The call to judge (its format, the call, whether a command hook asks), or the
        reply when none is needed."""
        command = request.query.get("via") == COMMAND_VIA
        if request.method != "POST" or request.path != HOOK_PATH:
            return Reply(404, json.dumps({"error": f"lockyard's guard answers POST {HOOK_PATH}"})
                         .encode())  # fmt: skip
        fmt = FORMATS.get(request.query.get("cli", ""))
        if fmt is None and command:
            return Reply(400, b'{"error": "unknown cli"}')  # the hook says so itself
        fmt = fmt or FORMATS["claude-code"]
        if request.query.get("dir") != self.tag:
            if command:
                return Reply(409, b'{"error": "another lock directory"}')
            return _as_reply(fmt.deny(self._elsewhere(request.query.get("dir"))), command)
        call = read_tool_call(fmt, request.body)
        if isinstance(call, HookAnswer):
            log.debug("guard: answered via=%s without judging", "command" if command else "http")
            return _as_reply(call, command)
        return fmt, call, command

    def _find_agent(self, fmt: CliFormat, peer: ProcessRef | None) -> JudgedAgent:
        if peer is None:
            raise NoSessionError(
                f"lockyard's guard cannot tell which {fmt.display} process sent this call (the "
                "kernel did not say who holds the other end of its connection)."
            )
        # Lazily: the CLI that posts an HTTP hook anchors the session itself, so its ancestors
        # are read only for a command hook (whose parent, or a shell's, is the CLI).
        return session_agent(self.lock_dir, itertools.chain([peer], ancestors(peer.pid)))

    def _elsewhere(self, tag: str | None) -> str:
        return (
            f"This hook is set up for another lock directory (tag {tag or 'none'}) than the one "
            f"lockyard's guard on this port serves ({self.lock_dir}, tag {self.tag}): two lock "
            "directories share the port. Ask the operator to give one of them its own port "
            "(LOCKYARD_GUARD_PORT, `lockyard init --guard-port`)."
        )


def _as_reply(answer: HookAnswer, command: bool) -> Reply:
    if command:
        stdout, stderr = answer.stdout.encode(), answer.stderr.encode()
        return Reply(200, f"{answer.exit_code} {len(stdout)}\n".encode() + stdout + stderr)
    if answer.stdout:
        return Reply(200, answer.stdout.encode())
    if answer.exit_code != 0:  # a CLI format that refuses by exit status: say it in JSON
        return Reply(200, json.dumps({"decision": "block", "reason": answer.stderr}).encode())
    return Reply(200, b"{}")


class _BadRequestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request on a connection; None when the client closed it between requests."""
    try:
        async with asyncio.timeout(IDLE_SECONDS):
            head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise _BadRequestError(400, "the request ended in its header") from None
        return None
    except asyncio.LimitOverrunError:
        raise _BadRequestError(413, "the request header is too large") from None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequestError(400, "not an HTTP/1.x request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise _BadRequestError(400, "send the body with a Content-Length, not chunked")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise _BadRequestError(400, "the Content-Length is not a number") from None
    if not 0 <= length <= MAX_PAYLOAD_BYTES:
        raise _BadRequestError(413, f"the body is over {MAX_PAYLOAD_BYTES} bytes")
    body = await reader.readexactly(length)
    split = urlsplit(parts[1])
    query = {name: values[0] for name, values in parse_qs(split.query).items()}
    return Request(parts[0], split.path, query, headers, body)
