"""`lockyard serve`: the lock tools for one agent as a stdio MCP server.

The tools, schemas, results and error texts are the in-process server's
(`lockyard.infra.tools.mcp_server`, on `LockTools`), so Claude Code, Codex or any MCP client
sees exactly what an SDK agent sees. Two additions only make sense over stdio:

- progress notifications while `lock_acquire` waits (when the client sent a progress token):
  they reset a stdio client's idle timer, so a long wait is not mistaken for a hung server;
- deadlock notices from `lockyard monitor` arrive through the backend's victim notices (files
  in the lock directory, or rows in PostgreSQL), since the monitor runs in another process.

Exit policy: when the session ends cleanly (stdin closed, SIGTERM, SIGINT) the server releases
the locks this session took and still holds, and logs each one to stderr: an agent CLI that
exits has finished with its files, and leaving them locked would block the others until
someone cleans up. A crashed server (SIGKILL) cannot do this; its locks name a dead process,
so the store's stale-lock reclamation frees them. Other agents' locks, and locks the same
agent id took through another process, are never touched.

There is no in-process monitor here: the holds and waits on disk are what `lockyard monitor`
reads. Lock events are logged at DEBUG level for troubleshooting.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

import anyio

from ....core.events import LockEvent
from ...crossproc.sources import victim_notices_for
from ...lockstore import (
    HolderRecord,
    JournalRecord,
    LockBackend,
    LockInfo,
    LockMode,
    LostLock,
    WaiterRecord,
    store_call,
)
from ...signals import cancel_on_signals
from ...tools.lock_tools import ACQUIRE_TOOL, LockTools, ToolOutcome
from ...tools.mcp_wire import SERVER_VERSION, call_result, tool_listing
from ...tools.wait_view import LineView, describe_waits, line_view
from .mcp_connection import McpConnection, Progress, StdoutLines

log = logging.getLogger("lockyard.serve")

PROGRESS_INTERVAL_SECONDS = 10.0
"""How often a waiting lock_acquire reports progress (well inside any idle timeout)."""


class SessionLedger:
    """The lock store as the session's tools see it, remembering which locks they took.

    On exit the session releases exactly these (those still held by the agent), which also
    covers a lock the agent re-took from an earlier, crashed server of the same agent id.
    """

    def __init__(self, store: LockBackend, agent_id: str) -> None:
        self.store = store
        self.agent_id = agent_id
        self.taken: set[str] = set()

    @property
    def namespace(self) -> str:
        return self.store.namespace

    @property
    def root(self) -> str:
        return self.store.root

    def canonicalize(self, filepath: str) -> str:
        return self.store.canonicalize(filepath)

    def try_lock(self, filepath: str, agent_id: str, *, mode: LockMode = "exclusive") -> bool:
        return self._note(filepath, self.store.try_lock(filepath, agent_id, mode=mode))

    async def acquire_async(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float = 30.0,
        poll_interval_ms: float = 100,
        *,
        mode: LockMode = "exclusive",
    ) -> bool:
        granted = await self.store.acquire_async(
            filepath, agent_id, timeout_seconds, poll_interval_ms, mode=mode
        )
        return self._note(filepath, granted)

    def release(self, filepath: str, agent_id: str) -> bool:
        self.taken.discard(self.store.canonicalize(filepath))
        return self.store.release(filepath, agent_id)

    def holder(self, filepath: str) -> str | None:
        return self.store.holder(filepath)

    def holder_record(self, filepath: str) -> HolderRecord | None:
        return self.store.holder_record(filepath)

    def cleanup_agent_locks(self, agent_id: str) -> list[str]:
        released = self.store.cleanup_agent_locks(agent_id)
        self.taken.difference_update(released)
        return released

    def grant_fence(self, filepath: str, agent_id: str) -> int | None:
        return self.store.grant_fence(filepath, agent_id)

    def take_lost_locks(self, agent_id: str) -> list[LostLock]:
        lost = self.store.take_lost_locks(agent_id)
        self.taken.difference_update(item.filepath for item in lost)
        return lost

    def waiters(self, filepath: str) -> list[WaiterRecord]:
        return self.store.waiters(filepath)

    def holds_of(self, keys: Sequence[str]) -> dict[str, tuple[str | None, tuple[str, ...]]]:
        return self.store.holds_of(keys)

    def readers(self, filepath: str) -> tuple[str, ...]:
        return self.store.readers(filepath)

    def globs_over(self, key: str) -> tuple[str, ...]:
        return self.store.globs_over(key)

    def holder_below(self, key: str, agent_id: str) -> str | None:
        return self.store.holder_below(key, agent_id)

    def list_locks(self) -> list[LockInfo]:
        return self.store.list_locks()

    def stamp_activity(self, agent_id: str) -> None:
        self.store.stamp_activity(agent_id)

    def last_active(self, agent_id: str) -> float | None:
        return self.store.last_active(agent_id)

    def journal_write(self, record: JournalRecord) -> None:
        self.store.journal_write(record)

    def _note(self, filepath: str, granted: bool) -> bool:
        if granted:
            self.taken.add(self.store.canonicalize(filepath))
        return granted

    def release_all(self) -> list[str]:
        """Release every lock this session took that the agent still holds."""
        released = [key for key in sorted(self.taken) if self.store.release(key, self.agent_id)]
        self.taken.clear()
        return released


class ToolCaller(Protocol):
    """What a stdio session serves: `LockTools`, or a client that forwards the calls."""

    async def call(self, tool_name: str, arguments: object) -> ToolOutcome: ...


class StdioToolSession:
    """The MCP server over stdio around any `ToolCaller` (`mcp_connection` speaks the
    protocol): tool listing, progress while `lock_acquire` waits, signals, and the
    end-of-session hook (`end_session`)."""

    def __init__(
        self, tools: ToolCaller, *, progress_interval: float = PROGRESS_INTERVAL_SECONDS
    ) -> None:
        self.tools = tools
        self.progress_interval = progress_interval

    async def list_tools(self) -> list[dict[str, Any]]:
        return tool_listing()

    async def end_session(self) -> list[str]:
        """Called once when the session ends (shielded); returns the lock keys released."""
        return []

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, progress: Progress | None
    ) -> dict[str, Any]:
        """One call; `lock_acquire` reports progress while it waits, when asked to."""
        if name != ACQUIRE_TOOL or progress is None:
            return await self._call(name, arguments)
        result: list[dict[str, Any]] = []
        async with anyio.create_task_group() as group:

            async def acquire() -> None:
                result.append(await self._call(ACQUIRE_TOOL, arguments))
                group.cancel_scope.cancel()

            group.start_soon(acquire)
            group.start_soon(self._report_progress, progress)
        return result[0]

    async def _call(self, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
        """The shared tool logic; an unexpected failure (e.g. an unreadable lock directory)
        is still an `isError` result the model can read, never a protocol error."""
        try:
            outcome = await self.tools.call(name, arguments)
        except Exception as exc:
            log.exception("%s failed", name)
            return call_result(
                ToolOutcome.error(f"{name} failed: {exc}. Tell the user; retrying may not help.")
            )
        return call_result(outcome)

    async def progress_text(self, waited: float) -> str:
        """The message of one progress notification while `lock_acquire` waits."""
        return f"waiting for locks ({waited:.0f} s)"

    async def _report_progress(self, progress: Progress) -> None:
        started = time.monotonic()
        while True:
            await anyio.sleep(self.progress_interval)
            waited = time.monotonic() - started
            try:
                await progress(waited, await self.progress_text(waited))
            except Exception as exc:  # progress is a courtesy; never fail the call for it
                log.debug("progress notification failed: %s", exc)
                return

    async def run_stdio(self) -> list[str]:
        """Serve on stdin/stdout until stdin closes or SIGTERM/SIGINT; then end the session."""
        connection = McpConnection(self, StdoutLines(), SERVER_VERSION)
        try:
            async with anyio.create_task_group() as group:
                await group.start(functools.partial(cancel_on_signals, log=log), group.cancel_scope)
                await connection.serve(StdinLines())
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                released = await self.end_session()
        return released


class ServeSession(StdioToolSession):
    """One agent's tools on one lock store, and what to do when the session ends."""

    def __init__(
        self,
        store: LockBackend,
        agent_id: str,
        *,
        progress_interval: float = PROGRESS_INTERVAL_SECONDS,
    ) -> None:
        self.store = store
        self.agent_id = agent_id
        self.ledger = SessionLedger(store, agent_id)
        self.lock_tools = LockTools(
            self.ledger,
            agent_id,
            emit_lock_event=_log_event,  # the state on disk is what `lockyard monitor` reads
            victim_notices=victim_notices_for(store),
        )
        super().__init__(self.lock_tools, progress_interval=progress_interval)

    def release_own_locks(self) -> list[str]:
        """Release the locks this session took and still holds; log each one."""
        released = self.ledger.release_all()
        for key in released:
            log.info("released %s held by agent %s (session ended)", key, self.agent_id)
        return released

    async def end_session(self) -> list[str]:
        return self.release_own_locks()  # synchronous: cancellation cannot cut it short

    async def progress_text(self, waited: float) -> str:
        """`waiting for locks (12 s): src/a.py: held by bob for 40 s, you are next; ...`:
        the files still waited for, their holders and this agent's place in each line."""
        plain = await super().progress_text(waited)
        keys = self.lock_tools.waiting_for()
        if not keys:
            return plain

        def read() -> list[LineView]:
            return [line_view(self.store, self.agent_id, key) for key in keys]

        try:
            views = await store_call(self.store, read)
        except Exception as exc:  # progress is a courtesy: the plain message then
            log.debug("could not read the queues for progress: %s", exc)
            return plain
        return f"{plain}: {describe_waits(views)}"


def _log_event(event: LockEvent) -> None:
    log.debug("%s %s %s", event.event_type.value, event.agent_id, event.lock_path)


class StdinLines:
    """Lines from fd 0, read so that cancellation takes effect at once.

    A reader blocked in a worker thread would keep SIGTERM from ending the session (and
    releasing the locks) until the client wrote or closed stdin. Here the event loop waits
    for readability and `os.read` then returns what is there without blocking.
    """

    def __init__(self, fd: int = 0) -> None:
        self._fd = fd

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[bytes]:
        """The non-blank lines, as bytes (without their newline): the screen decodes them."""
        pending = b""
        while True:
            chunk = await self._read()
            if not chunk:
                if pending.strip():
                    yield pending
                return
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    yield line

    async def _read(self) -> bytes:
        try:
            await anyio.wait_readable(self._fd)
        except (OSError, ValueError):  # a regular file or /dev/null cannot be polled
            return await anyio.to_thread.run_sync(os.read, self._fd, 65536)
        return os.read(self._fd, 65536)
