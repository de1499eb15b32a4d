"""Lock events: what the lock tools and hooks tell the deadlock monitor.

Every event is validated on construction, so a malformed event is rejected whole
and never half-applied to the wait-for graph.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from .agent_ids import validate_agent_id

NonEmptyText = Annotated[str, StringConstraints(min_length=1, max_length=4096)]


class LockEventType(StrEnum):
    """What happened to one (agent, lock) pair."""

    ACQUIRED = "ACQUIRED"
    """The agent now holds the lock."""
    WAITING = "WAITING"
    """The agent is blocked on the lock and needs it (one event per blocked lock)."""
    WAIT_ENDED = "WAIT_ENDED"
    """The agent stopped waiting without being granted the lock: the call returned,
    timed out or was cancelled. Removes the wait edge so it cannot cause a false deadlock."""
    RELEASED = "RELEASED"
    """The agent no longer holds the lock."""


class LockEvent(BaseModel):
    """One change in who holds or waits for a lock.

    `lock_path` is the canonical lock key (as produced by `canonicalize_path`), so two
    spellings of one file are one node in the graph.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_type: LockEventType
    agent_id: str
    lock_path: NonEmptyText
    timestamp: float = Field(default_factory=time.time)

    def __init__(
        self,
        event_type: LockEventType | str,
        agent_id: str,
        lock_path: str,
        timestamp: float | None = None,
        **extra: Any,
    ) -> None:
        """Positionally (`LockEvent(event_type, agent_id, lock_path, timestamp)`, the
        documented form orchestrators use) or by keyword; a missing timestamp is now."""
        fields: dict[str, Any] = {
            "event_type": event_type,
            "agent_id": agent_id,
            "lock_path": lock_path,
            **extra,
        }
        if timestamp is not None:
            fields["timestamp"] = timestamp
        super().__init__(**fields)

    @field_validator("agent_id", mode="before")
    @classmethod
    def _one_agent_id_rule(cls, value: object) -> str:
        return validate_agent_id(value)

    @field_validator("lock_path")
    @classmethod
    def _no_blank_or_nul(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        if "\x00" in value:
            raise ValueError("must not contain a NUL byte")
        return value
