"""Value types that describe a deadlock, shared by the monitor, the tools and the CLI."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


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
    victim_reason: str | None = None
    """Why this victim: the policy's figures for each agent of the cycle (one line)."""

    @model_validator(mode="after")
    def _is_a_real_cycle(self) -> DeadlockInfo:
        """A malformed deadlock (say, a corrupted notice file) is rejected, not acted on."""
        steps = self.cycle
        for i, step in enumerate(steps):
            if step.agent_id == step.held_by:
                raise ValueError(
                    f"cycle step {i}: {step.agent_id} waits for its own lock {step.lock_path}; "
                    "a self-wait is no deadlock"
                )
            following = steps[(i + 1) % len(steps)].agent_id
            if step.held_by != following:
                raise ValueError(
                    f"cycle step {i} ({step.agent_id} waits for {step.lock_path}) is held by "
                    f"{step.held_by}, but the next step is {following}: each step's holder "
                    "must be the next step's agent, and the last step's the first's"
                )
        victim_steps = [step for step in steps if step.agent_id == self.victim]
        if not victim_steps:
            raise ValueError(f"victim {self.victim!r} is not an agent of the cycle")
        if not any(
            (step.lock_path, step.held_by) == (self.victim_waits_on, self.victim_waits_on_holder)
            for step in victim_steps
        ):
            raise ValueError(
                f"victim_waits_on {self.victim_waits_on!r} held by "
                f"{self.victim_waits_on_holder!r} is not a step of the victim in the cycle"
            )
        return self

    def within(self, namespace: str) -> DeadlockInfo:
        """The same deadlock with lock names short where they are in `namespace`: a
        cross-process monitor names locks `namespace::key`; an agent of that namespace reads
        `src/app.py`."""
        prefix = f"{namespace}::"
        steps = tuple(
            step.model_copy(update={"lock_path": step.lock_path.removeprefix(prefix)})
            for step in self.cycle
        )
        return self.model_copy(
            update={"cycle": steps, "victim_waits_on": self.victim_waits_on.removeprefix(prefix)}
        )

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
