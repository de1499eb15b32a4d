"""Choosing which agent of a deadlock gives way."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from .graph import Cycle


@dataclass(frozen=True, slots=True)
class AgentInfo:
    """What the monitor knows about one agent when a victim is chosen.

    `start_time` is None for an agent that was never registered (seen only through events).
    """

    agent_id: str
    registered: bool
    issue_id: str | None
    start_time: float | None
    locks_held: int
    waits: int


class VictimPolicy(Protocol):
    """Picks the victim of `cycle`; must return the id of an agent in the cycle.

    `agents` has an entry for every agent of the cycle.
    """

    def __call__(self, cycle: Cycle, agents: Mapping[str, AgentInfo]) -> str: ...


def fewest_locks_then_youngest(cycle: Cycle, agents: Mapping[str, AgentInfo]) -> str:
    """The default policy: the agent whose loss costs least, deterministically.

    Fewest locks held (least work to redo), then the youngest (latest start time), then the
    smallest agent id. An unregistered agent counts as the youngest: nobody vouched for its
    work, and a registered agent's known investment is worth keeping.
    """

    def cost(agent_id: str) -> tuple[int, float, str]:
        info = agents[agent_id]
        start = math.inf if info.start_time is None else info.start_time
        return (info.locks_held, -start, agent_id)

    return min((step.agent_id for step in cycle), key=cost)
