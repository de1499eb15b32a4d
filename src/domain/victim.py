"""Choosing which agent of a deadlock gives way, and saying why.

The default policy, in this order:

1. An agent that another agent of a deadlock gave way to during its current wait keeps its
   turn (it gives way only when every agent of the cycle has such a turn). Two hot files that
   every agent holds one of and waits for both make a chain of deadlocks: each victim's file
   goes to the next waiter in line, who holds the other file, so a new cycle closes at once.
   The chain ends only when the file reaches an agent that no later cycle makes give way;
   without this rule, aging (2.) would make each newcomer beat the agent it met, and the
   chain would go round for ever.
2. The cheapest: cost = (locks held + 1) x 2 ** (times it gave way before). The first factor
   is the work the agent would redo; the second is aging, as schedulers age a starved task:
   each time an agent gives way, choosing it again costs twice as much, so an agent that
   keeps landing in cycles is not picked every time.
3. The youngest (an unregistered agent counts as the youngest), then the smallest id.

The choice reads a few numbers per agent of the cycle; `explain_choice` prints them.

Bound: among the agents of a cycle that have no turn to keep, the victim costs least, so its
count of times given way is at most log2(L + 1) above every other such agent's, where L is
the most locks any of them holds: no agent is chosen again and again while the others are not.
"""

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
    `times_given_way` counts the deadlocks this monitor made it give way in before;
    `won_this_wait` says another agent of a deadlock gave way to it during its current wait.
    """

    agent_id: str
    registered: bool
    issue_id: str | None
    start_time: float | None
    locks_held: int
    waits: int
    times_given_way: int = 0
    won_this_wait: bool = False


class VictimPolicy(Protocol):
    """Picks the victim of `cycle`; must return the id of an agent in the cycle.

    `agents` has an entry for every agent of the cycle.
    """

    def __call__(self, cycle: Cycle, agents: Mapping[str, AgentInfo]) -> str: ...


def victim_cost(info: AgentInfo) -> int:
    """(locks held + 1) x 2 ** (times given way): what making this agent give way costs."""
    return (info.locks_held + 1) << info.times_given_way


def _order(info: AgentInfo) -> tuple[bool, int, float, str]:
    """The default policy's order, first chosen first (see the module)."""
    start = math.inf if info.start_time is None else info.start_time
    return (info.won_this_wait, victim_cost(info), -start, info.agent_id)


def cheapest_then_youngest(cycle: Cycle, agents: Mapping[str, AgentInfo]) -> str:
    """The default policy: the agent whose loss costs least (see the module), deterministically.

    An unregistered agent counts as the youngest: nobody vouched for its work, and a
    registered agent's known investment is worth keeping.
    """
    return min((agents[step.agent_id] for step in cycle), key=_order).agent_id


def explain_choice(cycle: Cycle, agents: Mapping[str, AgentInfo], victim: str) -> str:
    """One line that says why `victim` was chosen by the default policy, with each agent's
    figures, first chosen first: what a person or the victim's model reads in a report."""
    ranked = sorted({step.agent_id for step in cycle}, key=lambda a: _order(agents[a]))
    chosen = agents[victim]
    peers = [a for a in ranked if a != victim and agents[a].won_this_wait == chosen.won_this_wait]
    keeping = [a for a in ranked if agents[a].won_this_wait and not chosen.won_this_wait]
    reason = "the lowest cost"
    tied = [a for a in peers if victim_cost(agents[a]) == victim_cost(chosen)]
    if tied:
        others = " and ".join(tied)
        if all(agents[a].start_time == chosen.start_time for a in tied):
            reason += f", tied with {others}; its id sorts first"
        elif chosen.start_time is None:
            reason += f", tied with {others}; it is unregistered (the youngest)"
        else:
            reason += f", tied with {others}; it started last"
    if keeping:
        one = len(keeping) == 1
        reason = (
            f"{' and '.join(keeping)} {'keeps its turn' if one else 'keep their turns'} "
            f"(another agent gave way to {'it' if one else 'them'} in this wait); then {reason}"
        )
    figures = ", ".join(_figures(agents[agent]) for agent in ranked)
    return (
        f"{victim} gives way: {reason}. Cost = (locks held + 1) x 2^(times given way before): "
        f"{figures}"
    )


def _figures(info: AgentInfo) -> str:
    locks = "1 lock" if info.locks_held == 1 else f"{info.locks_held} locks"
    times = "once" if info.times_given_way == 1 else f"{info.times_given_way} times"
    turn = ", keeps its turn" if info.won_this_wait else ""
    return f"{info.agent_id} {victim_cost(info)} ({locks}, gave way {times}{turn})"
