"""The sandbox side: lock tool calls sent through the IPC folder, answered by `lockyard ipc-host`.

`IpcClient.call` writes `requests/<id>.json` (temp file, then rename) and waits for
`responses/<id>.json`, woken by inotify on `responses/` (polling where inotify is unavailable).
The id is 128 random bits, so concurrent calls never take each other's answers. There is no
fixed timeout: a `lock_acquire` may wait as long as its own `timeout_seconds`. The only bound
is the host's liveness: the host rewrites `host.json` every few seconds, and a call whose host
shows no sign of life for `host_timeout` seconds is withdrawn and reported as an error.

While the client runs, a background task rewrites `heartbeat` every `heartbeat_interval`
seconds: that is how the host tells a live sandbox (however slow its agent) from a stopped one.

Absolute paths inside the sandbox's checkout (`repo`, e.g. /workspace) are sent relative to
it, so the host resolves them in its own checkout of the same repository.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Final

import anyio

from ...lockstore import IN_MOVED_TO, Inotify
from ...tools.lock_tools import ACQUIRE_TOOL, STATUS_TOOL, ToolOutcome
from ...tools.wait_view import describe_look
from ..stdio.mcp_connection import Progress
from ..stdio.server import PROGRESS_INTERVAL_SECONDS, StdioToolSession
from .folder import (
    HEARTBEAT,
    HOST_STATUS,
    REQUESTS,
    RESPONSES,
    open_dir,
    read_small,
    read_untrusted,
    remove_entry,
    write_atomic,
)
from .wire import Request, encode_request, new_request_id, request_file_name

log = logging.getLogger("lockyard.ipc.client")

MAX_RESPONSE_BYTES: Final = 8 * 1024 * 1024
DEFAULT_HEARTBEAT_INTERVAL: Final = 5.0
DEFAULT_HOST_TIMEOUT: Final = 30.0
_POLL_SECONDS: Final = 0.02
_PATH_ARGUMENTS: Final = ("filepaths", "filepath")


class HostUnavailableError(RuntimeError):
    """The host showed no sign of life while a request waited."""


class IpcClient:
    """Calls through one sandbox folder. Use as an async context manager."""

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        repo: str | os.PathLike[str] | None = None,
        heartbeat_interval: float = DEFAULT_HEARTBEAT_INTERVAL,
        host_timeout: float = DEFAULT_HOST_TIMEOUT,
    ) -> None:
        if not heartbeat_interval > 0 or not host_timeout > 0:
            raise ValueError("heartbeat_interval and host_timeout must be positive seconds")
        self.folder = Path(folder)
        self.repo = Path(os.path.realpath(repo)) if repo is not None else None
        self.heartbeat_interval = heartbeat_interval
        self.host_timeout = host_timeout
        self._fd = -1
        self._requests_fd = -1
        self._responses_fd = -1
        self._pending: dict[str, anyio.Event] = {}
        self._answers: dict[str, dict[str, Any]] = {}
        self._host_status: bytes | None = None
        self._host_seen = time.monotonic()
        self._beats = 0
        self._group: Any = None
        self._inotify: Inotify | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> IpcClient:
        try:
            self._fd = open_dir(str(self.folder))
            self._requests_fd = open_dir(REQUESTS, parent_fd=self._fd, create=True)
            self._responses_fd = open_dir(RESPONSES, parent_fd=self._fd, create=True)
        except OSError:
            self._close_fds()
            raise
        self._host_status = read_small(self._fd, HOST_STATUS)
        self._host_seen = time.monotonic()
        # Watch before the first request is written, so no answer can slip by unannounced.
        self._inotify = Inotify.open()
        if self._inotify is not None and not self._inotify.watch(
            self.folder / RESPONSES, IN_MOVED_TO
        ):
            self._inotify.close()
            self._inotify = None
        self._beat()
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._heartbeats)
        self._group.start_soon(self._collect)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(None, None, None)
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None
        self._close_fds()

    def _close_fds(self) -> None:
        for fd in (self._responses_fd, self._requests_fd, self._fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._requests_fd = self._responses_fd = -1

    # -- requests --------------------------------------------------------------------------

    async def call(self, tool_name: str, arguments: object) -> ToolOutcome:
        """Run one tool call on the host; its result exactly as the host's tools gave it."""
        # MCP hands over a dict (or None); the wire carries an object either way.
        sent = self._relative(arguments) if isinstance(arguments, dict) else {}
        request = Request(new_request_id(), "call", tool_name, sent)
        try:
            answer = await self.request(request)
        except HostUnavailableError as exc:
            return ToolOutcome.error(str(exc))
        if answer.get("ok") is True and isinstance(answer.get("result"), dict):
            result = answer["result"]
            text = result.get("text")
            if isinstance(text, str):
                return ToolOutcome(text=text, is_error=result.get("is_error") is True)
        return ToolOutcome.error(_refusal_text(tool_name, answer))

    async def list_tools(self) -> list[dict[str, Any]]:
        """The tools the host lets this sandbox call (the admin sandbox gets operator tools)."""
        answer = await self.request(Request(new_request_id(), "list_tools"))
        tools = answer.get("tools")
        if answer.get("ok") is not True or not isinstance(tools, list):
            raise HostUnavailableError(_refusal_text("list_tools", answer))
        return [tool for tool in tools if isinstance(tool, dict)]

    async def request(self, request: Request) -> dict[str, Any]:
        """Send `request`; wait for its answer by id. HostUnavailableError if the host is gone."""
        done = anyio.Event()
        self._pending[request.id] = done
        try:
            write_atomic(self._requests_fd, request_file_name(request.id), encode_request(request))
            self._collect_one(request.id)  # answered already (a fast host, or lost events)
            while not done.is_set():
                with anyio.move_on_after(self._host_patience()):
                    await done.wait()
                if not done.is_set() and self._host_silent():
                    raise HostUnavailableError(self._withdraw(request.id))
            return self._answers.pop(request.id)
        except HostUnavailableError:
            raise  # withdrawn already, as far as it could be
        except BaseException:  # cancelled: the agent CLI gave up on the call
            if request.kind == "call" and not done.is_set():
                self._abandon(request.id)
            raise
        finally:
            self._pending.pop(request.id, None)
            self._answers.pop(request.id, None)

    def _host_patience(self) -> float:
        return max(0.05, self.host_timeout - (time.monotonic() - self._host_seen))

    def _host_silent(self) -> bool:
        status = read_small(self._fd, HOST_STATUS)
        if status is not None and status != self._host_status:
            self._host_status = status
            self._host_seen = time.monotonic()
        return time.monotonic() - self._host_seen >= self.host_timeout

    def _abandon(self, request_id: str) -> None:
        """Take back a call nobody waits for any more: unsent if still unread, else ask the
        host to cancel it (it then gives back what the call took, as a cancelled in-process
        call does)."""
        if remove_entry(self._requests_fd, request_file_name(request_id)):
            return
        cancel = Request(new_request_id(), "cancel", target=request_id)
        try:
            write_atomic(self._requests_fd, request_file_name(cancel.id), encode_request(cancel))
        except OSError as exc:
            log.warning("could not cancel call %s on the host: %s", request_id, exc)

    def _withdraw(self, request_id: str) -> str:
        never_run = remove_entry(self._requests_fd, request_file_name(request_id))
        where = self.folder / HOST_STATUS
        fate = (
            "The call was withdrawn before the host read it: nothing was done."
            if never_run
            else "The host had read the call; it may or may not have run."
        )
        return (
            f"The lockyard host is not answering (no change to {where} in "
            f"{self.host_timeout:g} s). {fate} Tell the operator to start `lockyard ipc-host`, "
            "then call the tool again."
        )

    # -- responses -------------------------------------------------------------------------

    async def _collect(self) -> None:
        """Hand each arriving response to the call waiting for its id."""
        inotify = self._inotify
        while inotify is not None:
            events = await inotify.wait(1.0)
            names = {event.name for event in events}
            for request_id in list(self._pending):
                # No event for a whole second: look anyway (events can be lost on overflow).
                if not events or request_file_name(request_id) in names:
                    self._collect_one(request_id)
        while True:  # no inotify: poll
            await anyio.sleep(_POLL_SECONDS)
            for request_id in list(self._pending):
                self._collect_one(request_id)

    def _collect_one(self, request_id: str) -> None:
        name = request_file_name(request_id)
        try:
            raw = read_untrusted(self._responses_fd, name, MAX_RESPONSE_BYTES)
        except (OSError, ValueError):
            return
        remove_entry(self._responses_fd, name)
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or answer.get("id") != request_id:
            answer = {"ok": False, "error": {"code": "bad_response", "message": "unreadable"}}
        self._host_seen = time.monotonic()  # an answer is a sign of life
        event = self._pending.get(request_id)
        if event is not None:
            self._answers[request_id] = answer
            event.set()

    # -- heartbeat and paths ---------------------------------------------------------------

    async def _heartbeats(self) -> None:
        while True:
            await anyio.sleep(self.heartbeat_interval)
            self._beat()

    def _beat(self) -> None:
        self._beats += 1
        try:
            write_atomic(self._fd, HEARTBEAT, f"{os.getpid()} {self._beats}\n".encode())
        except OSError as exc:
            log.warning("cannot write the heartbeat: %s", exc)

    def _relative(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Arguments with absolute paths inside `repo` made relative to it."""
        if self.repo is None:
            return arguments
        converted = dict(arguments)
        for key in _PATH_ARGUMENTS:
            value = converted.get(key)
            if isinstance(value, str):
                converted[key] = self._relative_path(value)
            elif isinstance(value, list):
                converted[key] = [
                    self._relative_path(v) if isinstance(v, str) else v for v in value
                ]
        return converted

    def _relative_path(self, path: str) -> str:
        assert self.repo is not None
        if not path.startswith("/") or "\x00" in path:
            return path
        resolved = Path(os.path.realpath(path))
        try:
            relative = resolved.relative_to(self.repo)
        except ValueError:
            return path  # outside the checkout: the host refuses it with its own text
        return relative.as_posix() if relative.parts else path


def _refusal_text(tool: str, answer: dict[str, Any]) -> str:
    error = answer.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str):
        message = "the host sent an answer this client cannot read"
    return f"{tool} was not run: {message}."


class IpcServeSession(StdioToolSession):
    """`lockyard serve --ipc DIR`: the stdio MCP server of a sandbox, forwarding every call."""

    def __init__(
        self, client: IpcClient, *, progress_interval: float = PROGRESS_INTERVAL_SECONDS
    ) -> None:
        super().__init__(client, progress_interval=progress_interval)
        self.client = client
        self._acquiring: list[str] = []
        """The paths of the `lock_acquire` call waiting now, for its progress messages."""

    async def list_tools(self) -> list[dict[str, Any]]:
        try:
            tools = await self.client.list_tools()
        except HostUnavailableError as exc:
            log.error("%s", exc)
            return await super().list_tools()  # the lock tools; calls will say what is wrong
        return [
            {
                "name": str(tool.get("name")),
                "description": str(tool.get("description", "")),
                "inputSchema": dict(tool.get("input_schema") or {"type": "object"}),
            }
            for tool in tools
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, progress: Progress | None
    ) -> dict[str, Any]:
        paths = (arguments or {}).get("filepaths") if name == ACQUIRE_TOOL else None
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            return await super().call_tool(name, arguments, progress)
        self._acquiring = paths
        try:
            return await super().call_tool(name, arguments, progress)
        finally:
            self._acquiring = []

    async def progress_text(self, waited: float) -> str:
        """`waiting for locks (12 s): src/a.py: held by bob for 40 s, 1 waiting (you among
        them)`: the host's `lock_status` of the waited-for paths (bounded; the plain message
        when the host does not answer in time)."""
        plain = await super().progress_text(waited)
        paths = self._acquiring
        if not paths:
            return plain
        with anyio.move_on_after(2):
            outcome = await self.client.call(STATUS_TOOL, {"filepaths": paths})
            if outcome.is_error:
                return plain
            with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
                clauses = [describe_look(entry) for entry in json.loads(outcome.text)["locks"]]
                waits = [clause for clause in clauses if clause is not None]
                return f"{plain}: {'; '.join(waits)}" if waits else plain
        return plain

    async def end_session(self) -> list[str]:
        """Release the sandbox's locks on the host (bounded: the host may be gone)."""
        released: list[str] = []
        with anyio.move_on_after(5):
            outcome = await self.client.call("lock_release", {"all": True})
            if not outcome.is_error:
                with contextlib.suppress(ValueError, AttributeError):
                    released = [str(key) for key in json.loads(outcome.text)["released"]]
        for key in released:
            log.info("released %s (session ended)", key)
        return released


async def run_ipc_serve(
    folder: Path,
    repo: Path | None,
    *,
    progress_interval: float = PROGRESS_INTERVAL_SECONDS,
    heartbeat_interval: float = DEFAULT_HEARTBEAT_INTERVAL,
    host_timeout: float = DEFAULT_HOST_TIMEOUT,
) -> list[str]:
    """Serve MCP on stdio for the sandbox whose IPC folder is `folder`."""
    client = IpcClient(
        folder, repo=repo, heartbeat_interval=heartbeat_interval, host_timeout=host_timeout
    )
    async with client:
        session = IpcServeSession(client, progress_interval=progress_interval)
        return await session.run_stdio()
