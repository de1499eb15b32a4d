"""The small interfaces through which the layers talk to each other."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from .deadlock_info import DeadlockInfo
from .events import LockEvent

EmitLockEvent = Callable[[LockEvent], Awaitable[None] | None]
"""Where the lock tools report holds and waits; usually `DeadlockMonitor.handle_event`."""


class VictimNotices(Protocol):
    """Tells a waiting agent's pending `lock_acquire` that it was chosen as a deadlock victim.

    Level-triggered: if the agent is already marked as a victim when the call starts, it
    returns at once. Implemented by the in-process `DeadlockMonitor` and by the cross-process
    notices that `lockyard monitor` writes into the lock directory.
    """

    async def wait_for_victim(self, agent_id: str) -> DeadlockInfo: ...


async def deliver(emit: EmitLockEvent | None, event: LockEvent) -> None:
    """Hand `event` to `emit`, awaiting it when it is a coroutine function's result."""
    if emit is None:
        return
    outcome = emit(event)
    if outcome is not None:
        await outcome
