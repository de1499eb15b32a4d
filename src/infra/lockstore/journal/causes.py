"""Why a lock changes hands, where the change alone does not say: told by the layer that knows.

- A deadlock victim's waits are cancelled by the tools (its `lock_acquire` gives way): the
  tools mark the agent a victim first, so the store records those waits as ended by `victim`,
  not `cancelled`. Process-wide, by agent id (the waits run in other tasks than the mark).
- An operator's release (`lockyard clean`, an admin sandbox's `lock_force_release`) runs
  inside `operator_release(...)`, so the store records `operator-release` with who asked.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .record import CANCELLED, VICTIM

_victims: set[str] = set()
_victims_guard = threading.Lock()
_operator: ContextVar[str | None] = ContextVar("lockyard_operator_release", default=None)


def mark_victim(agent_id: str) -> None:
    """`agent_id` is giving way to break a deadlock: its waits ending now end as victim."""
    with _victims_guard:
        _victims.add(agent_id)


def unmark_victim(agent_id: str) -> None:
    with _victims_guard:
        _victims.discard(agent_id)


def abandoned_wait_outcome(agent_id: str) -> str:
    """How a wait of `agent_id` that was cancelled ended: victim or cancelled."""
    return VICTIM if agent_id in _victims else CANCELLED


@contextmanager
def operator_release(who: str) -> Iterator[None]:
    """Locks released inside this block (in this context) are operator releases by `who`
    (a command line such as `lockyard clean --agent codex-4242`)."""
    token = _operator.set(who)
    try:
        yield
    finally:
        _operator.reset(token)


def operator_cause() -> str | None:
    """Who asked for the releases made now, when an operator did; else None."""
    return _operator.get()
