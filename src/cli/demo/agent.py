"""A scripted coding agent: an MCP client that locks, edits and releases like a real one.

It follows the implementer prompt's protocol: ask for every file of a task in one
`lock_acquire` with `timeout_seconds` 0 (or for their directory, or shared when it only reads
them), then wait (blocking calls) for what is still missing, edit only what it holds, release
when done. A `deadlock` result means its locks
were released for it: it backs off and asks again for the whole task at once.
Edits are read-modify-write with a pause in the middle, so two holders at once, or a lost
lock, would show as a lost line in the file; a reader reads its files twice, a pause apart,
so a write under its shared lock would show as a change.
"""

from __future__ import annotations

import json
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

import anyio

from .recorder import Phase, SessionRecorder
from .scenario import AgentScript, Task, edit_line

ACQUIRE = "lock_acquire"
RELEASE = "lock_release"


class ToolCallError(RuntimeError):
    """A lock tool answered with an error result: the scripted agent never sends bad input."""


class ToolSession(Protocol):
    """An MCP client (`McpLineClient`): `call_tool` returns the `tools/call` result."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]: ...


async def call_tool(session: ToolSession, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call through MCP; the JSON result, or ToolCallError for an error result."""
    result = await session.call_tool(name, arguments)
    text = "".join(block.get("text", "") for block in result["content"])
    if result.get("isError"):
        raise ToolCallError(f"{name} failed: {text}")
    payload: dict[str, Any] = json.loads(text)
    return payload


@dataclass(frozen=True)
class Pacing:
    """How long simulated work takes (seconds); small, so the default demo stays fast."""

    edit: tuple[float, float] = (0.004, 0.02)
    think: tuple[float, float] = (0.0, 0.01)
    back_off: tuple[float, float] = (0.01, 0.05)
    wait_timeout: float = 10.0
    rendezvous_patience: float = 10.0
    max_attempts: int = 20
    act_hold: float = 0.0
    """How long at least the act's readers and writer keep `tests/` (a watchable page)."""


class Rendezvous:
    """Lets the members of a scripted deadlock all take their first lock before going on."""

    def __init__(self, members: int, patience: float) -> None:
        self._missing = members
        self._patience = patience
        self._all_here = anyio.Event()

    async def arrive(self) -> None:
        """Wait for the others (at most `patience` seconds: a missing member stalls no one)."""
        self._missing -= 1
        if self._missing <= 0:
            self._all_here.set()
        await self.wait()

    async def wait(self) -> None:
        """Wait, without joining, until every member is here (at most `patience` seconds)."""
        with anyio.move_on_after(self._patience):
            await self._all_here.wait()


Cue = Callable[[], Awaitable[None]]
"""Something a scripted agent waits for (a task's `hold_until`), bounded by its own patience."""


class Outcome(Enum):
    LOCKED = "locked"
    DEADLOCK = "deadlock"
    TIMED_OUT = "timed out"


class ScriptedAgent:
    def __init__(
        self,
        script: AgentScript,
        session: ToolSession,
        *,
        repo: Path,
        lock_keys: Mapping[str, str],
        holder_of: Callable[[str], Awaitable[str | None]],
        recorder: SessionRecorder,
        rendezvous: Mapping[str, Rendezvous],
        pacing: Pacing,
        rng: random.Random,
        cues: Mapping[str, Cue] | None = None,
    ) -> None:
        self.script = script
        self.agent_id = script.agent_id
        self._session = session
        self._repo = repo
        self._keys = lock_keys
        self._names = {key: name for name, key in lock_keys.items()}
        self._holder_of = holder_of
        self._recorder = recorder
        self._rendezvous = rendezvous
        self._pacing = pacing
        self._rng = rng
        self._cues = cues or {}

    async def run(self) -> None:
        """Do every task; whatever happens, end holding nothing."""
        try:
            for task in self.script.tasks:
                await self._pause(self._pacing.think)
                await self._perform(task)
            self._recorder.set_phase(self.agent_id, Phase.DONE)
        except Exception as error:
            self._recorder.set_phase(self.agent_id, Phase.FAILED, str(error))
            self._recorder.anomalies.append(f"{self.agent_id} failed: {error}")
        finally:
            with anyio.CancelScope(shield=True):
                await self._release_everything()

    async def _perform(self, task: Task) -> None:
        if task.after is not None:
            self._recorder.set_phase(self.agent_id, Phase.LOCKING, f"after the {task.after}")
            await self._rendezvous[task.after].wait()
        outcome = await self._first_attempt(task)
        attempts = 1
        while outcome is not Outcome.LOCKED:
            if attempts >= self._pacing.max_attempts:
                raise RuntimeError(f"gave up task {task.number} after {attempts} attempts")
            self._recorder.set_phase(self.agent_id, Phase.BACKING_OFF, outcome.value)
            await self._pause(self._pacing.back_off)
            outcome = await self._lock(task.lock_paths, shared=task.shared)
            attempts += 1
        await (self._read(task) if task.shared else self._edit(task))
        if task.hold_until is not None:
            self._recorder.set_phase(self.agent_id, Phase.HOLDING, f"until the {task.hold_until}")
            await anyio.sleep(self._pacing.act_hold)
            with anyio.move_on_after(self._pacing.rendezvous_patience):
                await self._cues[task.hold_until]()
        paths = list(task.lock_paths)
        self._recorder.releasing(self.agent_id, [self._keys[path] for path in paths])
        released = await call_tool(self._session, RELEASE, {"filepaths": paths})
        self._recorder.set_phase(self.agent_id, Phase.IDLE)
        if released["count"] != len(paths):
            self._recorder.anomalies.append(
                f"{self.agent_id} released {released['count']} of {len(paths)} locks "
                f"after task {task.number}: a lock it held was taken from it"
            )

    async def _first_attempt(self, task: Task) -> Outcome:
        if not task.incremental:
            outcome = await self._lock(task.lock_paths, shared=task.shared)
            if task.rendezvous is not None and outcome is Outcome.LOCKED:
                # Holding what the others of the group hold too (readers: shared).
                note = f"at rendezvous {task.rendezvous}"
                self._recorder.set_phase(self.agent_id, Phase.LOCKING, note)
                await self._rendezvous[task.rendezvous].arrive()
            return outcome
        # Scripted into an opposite lock order: hold the first file, meet the others of the
        # ring (each then holds what the next one wants), then ask for the next file.
        outcome = await self._lock(task.files[:1])
        if task.rendezvous is not None:
            note = f"at rendezvous {task.rendezvous}"
            self._recorder.set_phase(self.agent_id, Phase.LOCKING, note)
            await self._rendezvous[task.rendezvous].arrive()
        if outcome is not Outcome.LOCKED:
            return outcome
        return await self._lock(task.files[1:])

    async def _lock(self, files: Sequence[str], *, shared: bool = False) -> Outcome:
        """Timeout 0 first, then blocking waits for whatever is still missing."""
        mode = {"mode": "shared"} if shared else {}
        if shared:
            self._recorder.reading(self.agent_id, [self._keys.get(path, path) for path in files])
        self._recorder.set_phase(
            self.agent_id, Phase.LOCKING, ", ".join(files) + (" (shared)" if shared else "")
        )
        result = await call_tool(
            self._session, ACQUIRE, {"filepaths": list(files), "timeout_seconds": 0, **mode}
        )
        missing = self._missing(result)
        while missing:
            names = ", ".join(self._names.get(key, key) for key in missing)
            self._recorder.set_phase(self.agent_id, Phase.WAITING, names)
            result = await call_tool(
                self._session,
                ACQUIRE,
                {"filepaths": missing, "timeout_seconds": self._pacing.wait_timeout, **mode},
            )
            if "deadlock" in result:
                self._recorder.count_deadlock_result(self.agent_id)
                return Outcome.DEADLOCK
            still_missing = self._missing(result)
            if len(still_missing) == len(missing):
                # A whole wait without a grant: give back what this task holds, retry later.
                await call_tool(self._session, RELEASE, {"filepaths": list(files)})
                return Outcome.TIMED_OUT
            missing = still_missing
        return Outcome.LOCKED

    @staticmethod
    def _missing(result: Mapping[str, Any]) -> list[str]:
        """The lock keys not granted; later calls use these exact paths, as the prompt says."""
        return [entry["filepath"] for entry in result["results"] if not entry["acquired"]]

    async def _edit(self, task: Task) -> None:
        self._recorder.set_phase(self.agent_id, Phase.EDITING, ", ".join(task.files))
        line = edit_line(self.agent_id, task.number) + "\n"
        for name in task.files:
            key = self._keys[name]
            self._recorder.enter(self.agent_id, key)
            locked = key if task.directory is None else self._keys[task.directory]
            holder = await self._holder_of(locked)
            if holder != self.agent_id:
                self._recorder.anomalies.append(
                    f"{self.agent_id} was about to edit {name} held by {holder or 'nobody'}"
                )
            path = self._repo / name
            text = path.read_text(encoding="utf-8")
            await self._pause(self._pacing.edit)  # a lost update would show if locks failed
            path.write_text(text + line, encoding="utf-8")
            self._recorder.leave(self.agent_id, key)

    async def _read(self, task: Task) -> None:
        """Read every file twice, a pause apart (as a test run would): under a shared lock
        nobody may change them meanwhile."""
        self._recorder.set_phase(self.agent_id, Phase.READING, ", ".join(task.files))
        before = {name: (self._repo / name).read_text(encoding="utf-8") for name in task.files}
        await self._pause(self._pacing.edit)
        for name, text in before.items():
            if (self._repo / name).read_text(encoding="utf-8") != text:
                self._recorder.anomalies.append(
                    f"{name} changed while {self.agent_id} read it under a shared lock"
                )

    async def _release_everything(self) -> None:
        try:
            result = await call_tool(self._session, RELEASE, {"all": True})
        except Exception as error:  # the session itself is gone: the runner reports leftovers
            self._recorder.anomalies.append(f"{self.agent_id} could not release: {error}")
            return
        if result["count"]:
            leftovers = ", ".join(result["released"])
            self._recorder.anomalies.append(f"{self.agent_id} still held at the end: {leftovers}")

    async def _pause(self, bounds: tuple[float, float]) -> None:
        await anyio.sleep(self._rng.uniform(*bounds))
