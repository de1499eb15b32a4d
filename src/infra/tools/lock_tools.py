"""The lock tools' behaviour, independent of any transport.

`LockTools` is what one agent's `lock_acquire`, `lock_release` and `lock_status` do. The
in-process SDK server (`transports/sdk/server.py`) and the stdio server (`lockyard serve`)
both publish `TOOL_SPECS` and call `LockTools.call`, so the model sees the same tools,
schemas and results through either.

What the monitor is told, and when. The monitor's graph must match the lock store at every
moment: a hold it hears of late hides a cycle closed inside a blocking call until that call
times out, and a wait it is never told has ended is a stale edge that can make a false
deadlock and sacrifice an innocent agent. So:
- ACQUIRED the moment a lock is taken, not when the call returns;
- WAITING once per blocked file (one edge per (agent, file): the agent needs every file it
  waits on, so any one of them can close a cycle);
- WAIT_ENDED for every wait that ends without a grant: returned, timed out or cancelled;
- RELEASED for every lock released, including the victim's locks and the locks a cancelled
  call had taken (the agent never hears of those, so they are given back). Nothing releases
  a lock without telling the monitor.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import anyio
import anyio.lowlevel

from ...core.deadlock_info import DeadlockInfo
from ...core.events import LockEvent, LockEventType
from ...core.ports import EmitLockEvent, VictimNotices, deliver
from ..lockstore import (
    EXCLUSIVE,
    CorruptRecordError,
    HolderRecord,
    JournalRecord,
    JournalStep,
    LockInfo,
    LockMode,
    LockStoreError,
    LostLock,
    WaiterRecord,
    deadlock_record,
    mark_victim,
    store_call,
    unmark_victim,
    validate_agent_id,
)
from ..seen.stale import seen_state
from .holder_text import UNREADABLE_HOLDER
from .lock_look import lock_look
from .scope_waits import blocked_by, scope_blockers
from .tool_inputs import (
    ACQUIRE_SPEC,
    ACQUIRE_TOOL,
    DEFAULT_TIMEOUT_SECONDS,
    MAX_FILES_PER_CALL,
    MAX_TIMEOUT_SECONDS,
    RELEASE_SPEC,
    RELEASE_TOOL,
    STATUS_SPEC,
    STATUS_TOOL,
    TOOL_NAMES,
    TOOL_SPECS,
    AcquireInput,
    InvalidToolInputError,
    ReleaseInput,
    StatusInput,
    ToolSpec,
    parse_arguments,
)

__all__ = [
    "ACQUIRE_SPEC",
    "ACQUIRE_TOOL",
    "DEADLOCK_INSTRUCTION",
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_FILES_PER_CALL",
    "MAX_TIMEOUT_SECONDS",
    "RELEASE_SPEC",
    "RELEASE_TOOL",
    "STATUS_SPEC",
    "STATUS_TOOL",
    "TOOL_NAMES",
    "TOOL_SPECS",
    "UNREADABLE_HOLDER",
    "LockTools",
    "ToolOutcome",
    "ToolSpec",
    "ToolStore",
]

logger = logging.getLogger(__name__)

DEADLOCK_INSTRUCTION: Final = (
    "lockyard's deadlock detection (which runs in the lockyard processes themselves) found that "
    "the agents in `cycle` each wait for a file the next one holds, so none of them could ever "
    "get it; you were chosen to give way (`why_you` says why). All your locks were released for "
    "you (listed in `released`); do not edit those files until you lock them again. Finish or "
    "set aside work that needs none of them, then call lock_acquire again with every file you "
    "need (timeout_seconds 0 first)."
)


LOST_LOCKS_INSTRUCTION: Final = (
    "You lost the locks in `lost_locks` without releasing them (see each `reason`); another "
    "agent may have changed those files since. Do not edit them until you lock them again, "
    "and re-read them after you do."
)


class ToolStore(Protocol):
    """The part of the lock store the tools use: a subset of `LockBackend`, which the
    filesystem `LockStore` and the PostgreSQL `PgLockStore` implement."""

    @property
    def namespace(self) -> str: ...
    @property
    def root(self) -> str: ...
    def canonicalize(self, filepath: str) -> str: ...
    def try_lock(self, filepath: str, agent_id: str, *, mode: LockMode = ...) -> bool: ...
    async def acquire_async(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float = ...,
        poll_interval_ms: float = ...,
        *,
        mode: LockMode = ...,
    ) -> bool: ...
    def release(self, filepath: str, agent_id: str) -> bool: ...
    def holder(self, filepath: str) -> str | None: ...
    def holder_record(self, filepath: str) -> HolderRecord | None: ...
    def cleanup_agent_locks(self, agent_id: str) -> list[str]: ...
    def grant_fence(self, filepath: str, agent_id: str) -> int | None: ...
    def take_lost_locks(self, agent_id: str) -> list[LostLock]: ...
    def waiters(self, filepath: str) -> list[WaiterRecord]: ...
    def readers(self, filepath: str) -> tuple[str, ...]: ...
    def globs_over(self, key: str) -> tuple[str, ...]: ...
    def list_locks(self) -> list[LockInfo]: ...
    def journal_write(self, record: JournalRecord) -> None: ...
    def stamp_activity(self, agent_id: str) -> None: ...
    def last_active(self, agent_id: str) -> float | None: ...


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """The result of one tool call: one JSON (or, for errors, plain) text block."""

    text: str
    is_error: bool = False
    data: Mapping[str, Any] | None = None

    @classmethod
    def success(cls, data: Mapping[str, Any]) -> ToolOutcome:
        return cls(text=json.dumps(data), data=data)

    @classmethod
    def error(cls, text: str) -> ToolOutcome:
        return cls(text=text, is_error=True)

    def to_sdk_result(self) -> dict[str, Any]:
        """The handler-result dict of claude_agent_sdk tools (only snake_case `is_error` counts)."""
        result: dict[str, Any] = {"content": [{"type": "text", "text": self.text}]}
        if self.is_error:
            result["is_error"] = True
        return result


STORE_ERRORS: Final[tuple[type[Exception], ...]] = (LockStoreError, ValueError)
"""What the store raises on purpose: bad paths (ValueErrors too), an unusable lock directory."""


class LockTools:
    """`lock_acquire`, `lock_release` and `lock_status` for one agent on one lock store.

    `emit_lock_event` is told every hold and wait as it happens (usually
    `DeadlockMonitor.handle_event`); `victim_notices` tells a waiting call that this agent was
    chosen to break a deadlock. Both are optional.
    """

    def __init__(
        self,
        store: ToolStore,
        agent_id: str,
        emit_lock_event: EmitLockEvent | None = None,
        victim_notices: VictimNotices | None = None,
    ) -> None:
        validate_agent_id(agent_id)
        self.store = store
        self.agent_id = agent_id
        self.emit_lock_event = emit_lock_event
        self.victim_notices = victim_notices
        self._unreported_lost: list[LostLock] = []
        """Lost locks taken from the store that no successful result has carried yet: a call
        that fails (or is cancelled) after taking them must not use them up."""
        self._calls: set[_AcquireCall] = set()
        """The `lock_acquire` calls running now (their waits, for progress reports)."""

    def waiting_for(self) -> list[str]:
        """The keys this agent's running `lock_acquire` calls asked for and wait for now,
        sorted (not the directory or glob locks they also wait on for the monitor: the agent
        named none of those)."""
        return sorted({key for call in self._calls for key in call.waiting if key in call.keys})

    async def call(self, tool_name: str, arguments: object) -> ToolOutcome:
        """Run the tool named `tool_name`. Never raises (but for cancellation): an unknown name
        or an unexpected failure is an error result, never a protocol error."""
        await store_call(self.store, self.store.stamp_activity, self.agent_id)  # a heartbeat
        handler = self._handlers().get(tool_name)
        if handler is None:
            known = ", ".join(TOOL_NAMES)
            return ToolOutcome.error(f"Unknown tool {tool_name!r}. This server has: {known}.")
        try:
            return await handler(arguments)
        except Exception as exc:
            logger.exception("%s failed for agent %s", tool_name, self.agent_id)
            return ToolOutcome.error(
                f"{tool_name} failed: {exc}. Tell the user; retrying may not help."
            )
        finally:
            # And when it ends: a lock_acquire that waited long was busy, not idle, and the
            # idle limit counts from here (crossproc/idle_policy.py).
            await store_call(self.store, self.store.stamp_activity, self.agent_id)

    def _handlers(self) -> dict[str, Callable[[object], Awaitable[ToolOutcome]]]:
        return {ACQUIRE_TOOL: self.acquire, RELEASE_TOOL: self.release, STATUS_TOOL: self.status}

    async def status(self, arguments: object) -> ToolOutcome:
        """`lock_status`: each file's holders and waiters, read only (never queues)."""
        try:
            request = parse_arguments(STATUS_TOOL, StatusInput, arguments)
            keys = self._canonical_keys(STATUS_TOOL, request.filepaths)
        except InvalidToolInputError as exc:
            return ToolOutcome.error(str(exc))

        def look() -> list[dict[str, Any]]:
            now = time.time()
            locks = self.store.list_locks()  # once: the locks above or below each key
            return [lock_look(self.store, self.agent_id, key, now, locks) for key in keys]

        try:
            looks = await store_call(self.store, look)
        except STORE_ERRORS as exc:
            return ToolOutcome.error(f"lock_status failed: {exc}. Nothing was changed; retry.")
        return ToolOutcome.success({"locks": looks})

    async def acquire(self, arguments: object) -> ToolOutcome:
        """`lock_acquire`: lock every file, wait for any blocked one, report the state."""
        try:
            request = parse_arguments(ACQUIRE_TOOL, AcquireInput, arguments)
            keys = self._canonical_keys(ACQUIRE_TOOL, request.filepaths)
        except InvalidToolInputError as exc:
            return ToolOutcome.error(str(exc))
        call = _AcquireCall(self, keys, mode=request.mode)
        self._calls.add(call)
        try:
            self._note_lost(await store_call(self.store, self.store.take_lost_locks, self.agent_id))
            payload = await call.run(float(request.timeout_seconds))
        except STORE_ERRORS as exc:
            # Anything the store raised mid-call: give back what this call took (run() did),
            # and tell the model plainly. Cancellation is not caught here and propagates.
            return ToolOutcome.error(
                f"lock_acquire failed: {exc}. Nothing was locked by this call; "
                f"fix the problem above or retry.{self._lost_text()}"
            )
        finally:
            self._calls.discard(call)
        return ToolOutcome.success(self._with_unreported_lost(payload))

    async def release(self, arguments: object) -> ToolOutcome:
        """`lock_release`: unlock the given files (or all of this agent's); idempotent."""
        try:
            request = parse_arguments(RELEASE_TOOL, ReleaseInput, arguments)
            keys = (
                None
                if request.filepaths is None
                else self._canonical_keys(RELEASE_TOOL, request.filepaths)
            )
        except InvalidToolInputError as exc:
            return ToolOutcome.error(str(exc))
        lost, released, failure = await store_call(self.store, self._release_now, keys)
        self._note_lost(lost)
        with anyio.CancelScope(shield=True):
            for key in released:
                await self.emit(LockEventType.RELEASED, key)
        if failure is not None:
            return ToolOutcome.error(
                f"lock_release failed: {failure}. Released before the failure: "
                f"{json.dumps(released)}. Call lock_release again for the rest."
                f"{self._lost_text()}"
            )
        return ToolOutcome.success(
            self._with_unreported_lost({"released": released, "count": len(released)})
        )

    def _note_lost(self, lost: list[LostLock]) -> None:
        """Keep `lost` until a successful result carries it (once per lock and grant)."""
        known = {(item.filepath, item.fence) for item in self._unreported_lost}
        self._unreported_lost += [i for i in lost if (i.filepath, i.fence) not in known]

    def _with_unreported_lost(self, payload: dict[str, Any]) -> dict[str, Any]:
        """`payload` with every lost lock not reported yet; they count as reported from here."""
        lost, self._unreported_lost = self._unreported_lost, []
        return with_lost_locks(payload, sorted(lost, key=lambda item: item.filepath))

    def _lost_text(self) -> str:
        """For an error result: the lost locks not reported yet, which the next successful
        result lists again (an error text is no structured field an agent can rely on)."""
        if not self._unreported_lost:
            return ""
        files = ", ".join(sorted({item.filepath for item in self._unreported_lost}))
        return (
            f" Also, you lost these locks without releasing them: {files}. Do not edit those "
            "files until you lock them again, and re-read them after you do."
        )

    def _release_now(
        self, keys: list[str] | None
    ) -> tuple[list[LostLock], list[str], Exception | None]:
        """The locks lost since the last call, then `keys` (None: every lock) released: what
        was released, and the store's error that stopped it, if any. One call on the store,
        so one trip to a worker thread on a store that waits on a server."""
        lost: list[LostLock] = []
        released: list[str] = []
        try:
            lost = self.store.take_lost_locks(self.agent_id)
            if keys is None:
                released = sorted(self.store.cleanup_agent_locks(self.agent_id))
            else:
                for key in keys:
                    if self.store.release(key, self.agent_id):
                        released.append(key)
        except STORE_ERRORS as exc:
            return lost, released, exc
        return lost, released, None

    def _canonical_keys(self, tool: str, filepaths: list[str]) -> list[str]:
        """Every path's lock key, deduplicated and sorted; a bad path rejects the whole call."""
        keys: set[str] = set()
        problems: list[str] = []
        for path in filepaths:
            try:
                keys.add(self.store.canonicalize(path))
            except STORE_ERRORS as exc:
                problems.append(f"{path!r}: {exc}")
        if problems:
            nothing = {ACQUIRE_TOOL: "locked", RELEASE_TOOL: "released"}.get(tool, "looked at")
            raise InvalidToolInputError(
                f"{tool} rejected these paths: {'; '.join(problems)}. Nothing was {nothing}. "
                "Use paths of files inside the repository (relative to its root, or absolute)."
            )
        return sorted(keys)

    async def emit(self, event_type: LockEventType, lock_path: str) -> None:
        """Tell the monitor, shielded from cancellation so a cancelled call still reports.

        A failing monitor must not break the tool (the lock store is the truth), but it must
        not go unnoticed either: it is logged with the event.
        """
        event = LockEvent(event_type=event_type, agent_id=self.agent_id, lock_path=lock_path)
        with anyio.CancelScope(shield=True):
            try:
                await deliver(self.emit_lock_event, event)
            except Exception:
                logger.exception("emit_lock_event failed for %s", event)


@dataclass(eq=False)
class _AcquireCall:
    """The state of one `lock_acquire` call, so every exit path can put things right."""

    tools: LockTools
    keys: list[str]
    mode: LockMode = EXCLUSIVE
    held: set[str] = field(default_factory=set)
    taken_by_this_call: list[str] = field(default_factory=list)
    waiting: set[str] = field(default_factory=set)
    deadlock: DeadlockInfo | None = None
    released: list[str] = field(default_factory=list)
    unreadable: set[str] = field(default_factory=set)
    wait_started: float | None = None
    _pending_waits: int = 0

    @property
    def agent_id(self) -> str:
        return self.tools.agent_id

    async def run(self, timeout_seconds: float) -> dict[str, Any]:
        """Lock, wait, give way if chosen as a victim; the result the agent will see."""
        try:
            await self._try_all()
            # An unreadable lock is never granted nor broken, and nothing in lockyard repairs
            # it: waiting for it could only end by timeout, so it is reported at once.
            blocked = [k for k in self.keys if k not in self.held and k not in self.unreadable]
            if blocked and timeout_seconds > 0:
                await self._wait_for_any(blocked, timeout_seconds)
            if self.deadlock is not None:
                await self._give_way()
            return await self.result()
        except BaseException:
            # Cancelled (the CLI's tool timeout) or failed: the agent will never see this
            # call's result, so it must not keep locks it does not know about. A deadlock
            # victim gives way however its call ends: the others wait for its locks.
            with anyio.CancelScope(shield=True):
                if self.deadlock is not None:
                    await self._give_way()
                else:
                    await self._give_back_this_calls_locks()
            raise

    async def _try_all(self) -> None:
        store = self.tools.store
        for key in self.keys:
            already_mine, taken = await store_call(store, self._try_one, key)
            if taken:
                self.held.add(key)
                if not already_mine:
                    self.taken_by_this_call.append(key)
                await self.tools.emit(LockEventType.ACQUIRED, key)

    async def _wait_for_any(self, blocked: list[str], timeout_seconds: float) -> None:
        """Wait until ANY blocked file is granted, the timeout passes, or we are a victim."""
        self.waiting = set(blocked)
        self.wait_started = time.time()
        self._pending_waits = len(blocked)
        try:
            for key in blocked:
                await self.tools.emit(LockEventType.WAITING, key)
            await self._wait_through_scopes(blocked)
            with anyio.move_on_after(timeout_seconds):
                async with anyio.create_task_group() as group:
                    if self.tools.victim_notices is not None:
                        # Watch first: when our own WAITING closed the cycle, the notice is
                        # already there and we return without queueing behind anyone.
                        group.start_soon(self._watch_for_victim, group.cancel_scope)
                        await anyio.lowlevel.checkpoint()
                    for key in blocked:
                        group.start_soon(self._wait_one, key, timeout_seconds, group.cancel_scope)
        except ExceptionGroup as failed:
            # One failing wait fails the call; surface the store's own error, not a group.
            store_errors = failed.subgroup(STORE_ERRORS)
            if store_errors is None:
                raise
            raise store_errors.exceptions[0] from failed
        finally:
            # Read the victim mark before the waits end (ending them clears it). A call that
            # ended before its watcher heard of the deadlock (cancelled, timed out, or another
            # of its files granted first) must still give way: the monitor has reported the
            # cycle with this agent as its victim, and an agent that kept its locks and asked
            # again would close the same cycle, reported twice and costing another agent.
            if self.deadlock is None:
                self.deadlock = self._unheeded_victim_mark()
            unmark_victim(self.agent_id)
            with anyio.CancelScope(shield=True):
                for key in sorted(self.waiting):
                    await self.tools.emit(LockEventType.WAIT_ENDED, key)
                self.waiting.clear()

    async def _wait_through_scopes(self, blocked: list[str]) -> None:
        """A WAITING edge to each directory or glob lock over a blocked file, and to each
        lock below a blocked directory or glob, whose holder blocks it (`scope_waits.py`):
        the monitor sees a cycle through them at the wait, not at its next resync. They end
        with the call, like the waits themselves."""
        store = self.tools.store
        try:
            extra = await store_call(
                store, scope_blockers, store, self.agent_id, blocked, self.mode
            )
        except STORE_ERRORS as exc:  # the waits go on; the resync still finds such a cycle
            logger.warning(
                "agent %s: could not read the locks over %s: %s", self.agent_id, blocked, exc
            )
            return
        for key in extra:
            self.waiting.add(key)
            await self.tools.emit(LockEventType.WAITING, key)

    async def _wait_one(self, key: str, timeout_seconds: float, group: anyio.CancelScope) -> None:
        # The store's acquire_async is cancel-safe: when another grant cancels this wait, it
        # leaves no lock and no queue entry behind. If it did return True, the lock is ours and
        # is recorded before the next checkpoint, so no exit path can lose it.
        try:
            store = self.tools.store
            granted = await store.acquire_async(key, self.agent_id, timeout_seconds, mode=self.mode)
        except CorruptRecordError as exc:
            # The record became unreadable during the wait: this file cannot be granted in
            # this call; its wait edge ends now, and the others keep waiting.
            self._unreadable(key, exc)
            granted = False
            self.waiting.discard(key)
            await self.tools.emit(LockEventType.WAIT_ENDED, key)
        self._pending_waits -= 1
        if granted:
            self.waiting.discard(key)
            self.held.add(key)
            self.taken_by_this_call.append(key)
            await self.tools.emit(LockEventType.ACQUIRED, key)
            group.cancel()
        elif self._pending_waits == 0:
            group.cancel()

    async def _watch_for_victim(self, group: anyio.CancelScope) -> None:
        notices = self.tools.victim_notices
        assert notices is not None
        try:
            deadlock = await notices.wait_for_victim(self.agent_id)
        except Exception:
            # Broken notices must not break the wait itself; the timeout still bounds it.
            logger.exception("victim notices failed for agent %s", self.agent_id)
            return
        self.deadlock = self._in_our_names(deadlock)
        mark_victim(self.agent_id)  # the journal records the waits cancelled now as `victim`
        group.cancel()

    def _in_our_names(self, deadlock: DeadlockInfo) -> DeadlockInfo:
        """A cross-process monitor names locks `namespace::key`; the agent knows them as keys."""
        namespace = getattr(self.tools.store, "namespace", None)
        return deadlock.within(namespace) if isinstance(namespace, str) else deadlock

    def _unheeded_victim_mark(self) -> DeadlockInfo | None:
        """The deadlock this agent is marked the victim of, if its notices can tell at once,
        unless this call was granted the very lock it was chosen on (that grant broke the
        cycle already: nothing to give way for)."""
        peek = getattr(self.tools.victim_notices, "victim_mark", None)
        if not callable(peek):
            return None
        try:
            mark = peek(self.agent_id)
        except Exception:
            logger.exception("victim notices failed for agent %s", self.agent_id)
            return None
        if not isinstance(mark, DeadlockInfo):
            return None
        mark = self._in_our_names(mark)
        return None if mark.victim_waits_on in self.held else mark

    async def _give_way(self) -> None:
        """Deadlock victim: release every lock this agent holds, so the others can proceed,
        and journal the deadlock with what it released and what it cost."""
        store = self.tools.store
        self.released = sorted(await store_call(store, self._give_way_now))
        self.held.clear()
        self.taken_by_this_call.clear()
        with anyio.CancelScope(shield=True):
            for key in self.released:
                await self.tools.emit(LockEventType.RELEASED, key)

    def _give_way_now(self) -> list[str]:
        """The victim's locks released (one call on the store), the deadlock journalled.

        The waits of the cycle's other agents are read before the release, which ends
        them: how long each has waited is what the deadlock cost (the victim's own wait is
        this call's)."""
        store = self.tools.store
        deadlock = self.deadlock
        costs = {} if deadlock is None else self._cycle_waits(deadlock)
        released = store.cleanup_agent_locks(self.agent_id)
        if deadlock is not None:
            store.journal_write(
                deadlock_record(
                    time=time.time(), namespace=store.namespace,
                    cycle=[JournalStep(s.agent_id, s.lock_path, s.held_by) for s in deadlock.cycle],
                    victim=deadlock.victim, victim_waits_on=deadlock.victim_waits_on,
                    released=released, costs=costs, session="", pid=0, host="",
                )
            )  # fmt: skip
        return released

    def _cycle_waits(self, deadlock: DeadlockInfo) -> dict[str, float]:
        now = time.time()
        costs: dict[str, float] = {}
        if self.wait_started is not None:
            costs[self.agent_id] = now - self.wait_started
        for step in deadlock.cycle:
            if step.agent_id == self.agent_id:
                continue
            try:
                waiters = self.tools.store.waiters(step.lock_path)
            except Exception:  # a lock of another namespace, a store error: cost unknown
                logger.debug("no wait of %s on %s", step.agent_id, step.lock_path, exc_info=True)
                continue
            since = [w.since for w in waiters if w.agent_id == step.agent_id]
            if since:
                costs[step.agent_id] = max(0.0, now - min(since))
        return costs

    async def _give_back_this_calls_locks(self) -> None:
        store = self.tools.store
        for key in self.taken_by_this_call:
            try:
                released = await store_call(store, store.release, key, self.agent_id)
            except Exception:  # keep going: the other locks must still be given back
                logger.exception("could not give back %s for agent %s", key, self.agent_id)
                continue
            if released:
                await self.tools.emit(LockEventType.RELEASED, key)
        self.taken_by_this_call.clear()

    def _try_one(self, key: str) -> tuple[bool, bool]:
        """Whether the lock was this agent's already, and whether it is now (one trip to a
        worker thread for both, on a store that waits on a server)."""
        already_mine = self._holder(key) == self.agent_id
        if self.mode == EXCLUSIVE:
            return already_mine, self.tools.store.try_lock(key, self.agent_id)
        return already_mine, self.tools.store.try_lock(key, self.agent_id, mode=self.mode)

    async def holder_of(self, key: str) -> str | None:
        """The lock's holder, or `UNREADABLE_HOLDER` when its record cannot be read."""
        return await store_call(self.tools.store, self._holder, key)

    def _holder(self, key: str) -> str | None:
        try:
            return self.tools.store.holder(key)
        except CorruptRecordError as exc:
            self._unreadable(key, exc)
            return UNREADABLE_HOLDER

    def _unreadable(self, key: str, error: CorruptRecordError) -> None:
        if key not in self.unreadable:  # once per call: the call reads a record twice
            self.unreadable.add(key)
            logger.warning("agent %s: lock record of %s: %s", self.agent_id, key, error)

    async def _blocked_by(self, key: str) -> dict[str, Any]:
        """`blocked_by` for a key refused with no holder of its own to name: the directory or
        glob lock over it (or the holds below it) and the readers that keep it from the agent.
        Nothing when it became free meanwhile, or the store cannot say (the result stands)."""
        store = self.tools.store
        try:
            blockers = await store_call(store, blocked_by, store, self.agent_id, key, self.mode)
        except STORE_ERRORS as exc:
            logger.warning("agent %s: could not read who blocks %s: %s", self.agent_id, key, exc)
            return {}
        return {"blocked_by": blockers} if blockers else {}

    async def result(self) -> dict[str, Any]:
        store = self.tools.store
        results: list[dict[str, Any]] = []
        for key in self.keys:
            entry: dict[str, Any] = {
                "filepath": key,
                "acquired": key in self.held,
                "holder": self.agent_id if key in self.held else await self.holder_of(key),
            }
            if key not in self.held and entry["holder"] is None:
                entry.update(await self._blocked_by(key))
            fence = store.grant_fence(key, self.agent_id) if key in self.held else None
            if fence is not None:
                entry["fence"] = fence  # the backend's fencing number of this grant
            entry.update(changed_since_read(store.root, self.agent_id, key))
            results.append(entry)
        payload: dict[str, Any] = {
            "results": results,
            "all_acquired": all(key in self.held for key in self.keys),
        }
        if self.deadlock is not None:
            payload["deadlock"] = deadlock_payload(self.deadlock, self.released)
        return payload


def changed_since_read(root: str, agent_id: str, key: str) -> dict[str, Any]:
    """For a file the agent read (or wrote) before: `changed_since_read`, whether it changed
    since (by anyone but the agent), and when it did, `change`: who changed it, when, and what
    to do. Nothing for a file it never read: most results stay as short as they were."""
    changed, change = seen_state(root, agent_id, key)
    if changed is None:
        return {}
    if change is None:
        return {"changed_since_read": False}
    return {
        "changed_since_read": True,
        "change": f"{key} {change.says()}. Read it again before you edit it.",
    }


def with_lost_locks(payload: dict[str, Any], lost: list[LostLock]) -> dict[str, Any]:
    """`payload` with the locks the agent lost since its last call, if any."""
    if lost:
        payload["lost_locks"] = [item.model_dump() for item in lost]
        payload["lost_locks_instruction"] = LOST_LOCKS_INSTRUCTION
    return payload


def deadlock_payload(info: DeadlockInfo, released: list[str]) -> dict[str, Any]:
    """The `deadlock` object a victim's lock_acquire returns: the cycle and what to do."""
    return {
        "victim": info.victim,
        "cycle": [
            {"agent": step.agent_id, "waits_for": step.lock_path, "held_by": step.held_by}
            for step in info.cycle
        ],
        "agents": info.agents,
        "files": info.lock_paths,
        "summary": info.describe(),
        "why_you": info.victim_reason,
        "released": released,
        "instruction": DEADLOCK_INSTRUCTION,
    }
