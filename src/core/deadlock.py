"""Value types that describe a deadlock, shared by the monitor, the tools and the CLI."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class CycleStep(BaseModel):
    """One edge pair of a wait-for cycle: `agent_id` waits for `lock_path`, held by `held_by`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_id: str
    lock_path: str
    held_by: str


class DeadlockInfo(BaseModel):
    """A deadlock: the whole cycle in order, and the agent chosen to give way.

    `cycle[i].held_by == cycle[i + 1].agent_id`, and the last step's holder is the first agent.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    cycle: tuple[CycleStep, ...] = Field(min_length=1)
    victim: str
    victim_waits_on: str
    victim_waits_on_holder: str
    detected_at: float = Field(default_factory=time.time)

    @property
    def agents(self) -> list[str]:
        return [step.agent_id for step in self.cycle]

    @property
    def lock_paths(self) -> list[str]:
        return [step.lock_path for step in self.cycle]

    def describe(self) -> str:
        """One line a person or an LLM can read: `a waits for f1 (held by b) -> b waits for ...`."""
        return " -> ".join(
            f"{step.agent_id} waits for {step.lock_path} (held by {step.held_by})"
            for step in self.cycle
        )

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
