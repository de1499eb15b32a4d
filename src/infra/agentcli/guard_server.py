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
and delayed ACKs: ~40 ms a call, measured). Every session's every tool call passes here, so
the per-request work is kept small: an asyncio protocol answers a write from its data
callback (no task or stream per request), the caller is identified once per connection,
and the session records are re-read only when their files change.
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
from collections.abc import AsyncIterator, Callable
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
        loop = asyncio.get_running_loop()
        connections: set[_Connection] = set()
        server = await loop.create_server(lambda: _Connection(self, connections), sock=sock)
        try:
            yield server
        finally:
            server.close()
            for connection in list(connections):
                connection.close()
            await server.wait_closed()

    def _peer(
        self, local: tuple[str, int], remote: tuple[str, int], request: Request
    ) -> ProcessRef | None:
        """The process at the other end (None: unknown; the answer then refuses)."""
        hint = request.headers.get(PID_HEADER, "")
        first = [int(hint)] if hint.isdigit() else []
        # The sessions are read only when the hint is not the caller (lazily: a command hook
        # names its own pid, and reading every session would cost it more than its answer).
        anchors = (record.anchor_pid for record, alive in self.registry.sessions() if alive)
        try:
            pid = peer_process(local, remote, itertools.chain(first, anchors))
        except (PeerUnknownError, OSError) as exc:
            log.warning("guard: cannot tell who is calling from %s:%s: %s", *remote, exc)
            return None
        return process_ref(pid)

    def prepare(
        self, request: Request, peer: ProcessRef | None
    ) -> Reply | tuple[Callable[[], HookAnswer], bool, bool]:
        """What a request from `peer` (the process at the other end) takes: its reply when no
        judging is needed, else the judging to run, whether it is a shell call (judged in a
        worker thread: it parses the command and may run git; a write is a few reads of small
        files, cheaper than a thread hop) and whether a command hook asks."""
        judged = self._read(request)
        if isinstance(judged, Reply):
            return judged
        fmt, call, command = judged
        find_agent = functools.partial(self._find_agent, fmt, peer)
        judge = functools.partial(
            judge_read_call, fmt, call, self.lock_dir, find_agent, self.readers
        )
        return judge, call.kind == "shell", command

    def finish(self, answer: HookAnswer, command: bool, peer: ProcessRef | None) -> Reply:
        """The reply carrying a judged call's `answer`."""
        if log.isEnabledFor(logging.DEBUG):
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
        chain = itertools.chain([peer], ancestors(peer.pid))
        return session_agent(self.lock_dir, chain, self.registry)

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


class _Connection(asyncio.Protocol):
    """One client connection: its requests answered in order, each reply in one send.

    A protocol rather than streams: a write's answer is computed and sent from the
    `data_received` callback itself, with no task, future or buffer copy per request (the
    guard's cost is per tool call of every session). A shell call is judged in a worker thread;
    requests that arrive meanwhile wait in the buffer."""

    def __init__(self, guard: GuardServer, connections: set[_Connection]) -> None:
        self.guard, self.connections = guard, connections
        self.buffer = bytearray()
        self.busy = False  # a shell call is being judged: the next request waits
        self.closing = False
        self.peer: ProcessRef | None = None  # the process at the other end, found once
        self.peer_known = False
        self.eof = False  # the client sent all it will send
        self.transport: asyncio.Transport | None = None
        self.idle: asyncio.TimerHandle | None = None
        self.loop = asyncio.get_running_loop()
        self.last_request = self.loop.time()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.connections.add(self)
        sock = transport.get_extra_info("socket")
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.local, self.remote = (
            transport.get_extra_info("sockname"),
            transport.get_extra_info("peername"),
        )
        self._wait_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.connections.discard(self)
        if self.idle is not None:
            self.idle.cancel()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._answer_waiting()
        elif len(self.buffer) > MAX_HEAD_BYTES + MAX_PAYLOAD_BYTES:
            assert self.transport is not None
            self.transport.pause_reading()  # until the call being judged is answered

    def eof_received(self) -> bool:
        self.eof = True
        if not self.busy and self.buffer.strip() and b"\r\n\r\n" not in self.buffer:
            # A request cut short in its header gets told so (a cut body is simply dropped).
            self._refuse(_BadRequestError(400, "the request ended in its header"))
            return False
        if not self.busy:
            self.close()
        return True  # a shell call being judged still answers; then the connection closes

    def close(self) -> None:
        if not self.closing and self.transport is not None:
            self.closing = True
            self.transport.close()

    def _wait_idle(self) -> None:
        """Close the connection once it has been idle for IDLE_SECONDS (one timer for its
        life, not one per request: `last_request` moves, the timer looks at it)."""
        idle_for = self.loop.time() - self.last_request
        if idle_for >= IDLE_SECONDS:
            self.close()
        else:
            self.idle = self.loop.call_later(IDLE_SECONDS - idle_for, self._wait_idle)

    def _answer_waiting(self) -> None:
        """Answer every complete request in the buffer, in order, until one must wait."""
        while not self.closing and not self.busy:
            try:
                parsed = _parse_request(self.buffer)
            except _BadRequestError as exc:
                self._refuse(exc)
                return
            if parsed is None:
                return
            request, used = parsed
            del self.buffer[:used]
            self.last_request = self.loop.time()
            if not self.peer_known:
                self.peer, self.peer_known = (
                    self.guard._peer(self.local, self.remote, request),
                    True,
                )
            judged = self.guard.prepare(request, self.peer)
            if isinstance(judged, Reply):
                self._send(judged, request)
                continue
            judge, shell, command = judged
            if not shell:  # a write: a few small reads, judged right here
                self._send(self.guard.finish(judge(), command, self.peer), request)
                continue
            self.busy = True  # a shell command: parsed (and maybe git run) in a worker thread
            future = asyncio.get_running_loop().run_in_executor(None, judge)
            future.add_done_callback(functools.partial(self._judged, request, command))

    def _judged(self, request: Request, command: bool, future: asyncio.Future[HookAnswer]) -> None:
        self.busy = False
        if self.closing:
            return
        self._send(self.guard.finish(future.result(), command, self.peer), request)
        assert self.transport is not None
        if not self.closing and not self.transport.is_reading():
            self.transport.resume_reading()
        self._answer_waiting()
        if not self.busy and self.eof:
            self.close()

    def _send(self, reply: Reply, request: Request) -> None:
        keep_alive = request.headers.get("connection", "").lower() != "close"
        assert self.transport is not None
        self.transport.write(reply.encode(keep_alive))
        if not keep_alive:
            self.close()

    def _refuse(self, exc: _BadRequestError) -> None:
        assert self.transport is not None
        self.transport.write(
            Reply(exc.status, json.dumps({"error": str(exc)}).encode()).encode(False)
        )
        self.close()


def _parse_request(buffer: bytearray) -> tuple[Request, int] | None:
    """The first request in `buffer` and how many bytes it takes; None while incomplete."""
    end = buffer.find(b"\r\n\r\n", 0, MAX_HEAD_BYTES + 4)
    if end < 0:
        if len(buffer) > MAX_HEAD_BYTES:
            raise _BadRequestError(413, "the request header is too large")
        return None
    lines = buffer[:end].decode("latin-1").split("\r\n")
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
    start = end + 4
    if len(buffer) < start + length:
        return None
    path, query = _target(parts[1])
    return Request(
        parts[0], path, query, headers, bytes(buffer[start : start + length])
    ), start + length


@functools.lru_cache(maxsize=64)
def _target(target: str) -> tuple[str, dict[str, str]]:
    """The path and query of a request target (a CLI posts to the same one every call).
    The query is shared between requests: read it, never change it."""
    split = urlsplit(target)
    return split.path, {name: values[0] for name, values in parse_qs(split.query).items()}
