"""The wait-for graph: who holds each lock, who waits for which locks, and the cycles that makes.

Nodes are agents; there is an edge `a -> h` for every lock `a` waits on that `h` holds. Waits are
kept per (agent, lock): an agent blocked on several files waits on all of them and needs all of
them, so every one of those edges can close a cycle (one edge per agent would miss a
deadlock closed through any file but the one kept).

A wait on a lock nobody holds, or on a lock the waiter holds itself, is recorded but is no edge:
the store grants a free lock, and re-acquiring one's own lock succeeds at once. Recording it
keeps the graph true when that lock later changes hands.

Pure data and search; no I/O, no locking. `DeadlockMonitor` adds agents, victims and callbacks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass

from ..core.deadlock_info import CycleStep

Cycle = tuple[CycleStep, ...]
"""A wait-for cycle in order: `cycle[i].held_by == cycle[i + 1].agent_id`, the last wraps around."""

_NO_SKIP: frozenset[str] = frozenset()
_NO_EDGES: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True, slots=True)
class GraphSnapshot:
    """A read-only copy of the graph: `holds` maps lock -> holder, `waits` lists (agent, lock)."""

    holds: Mapping[str, str]
    waits: tuple[tuple[str, str], ...]


def _check_key(kind: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise ValueError(
            f"{kind} must be a non-blank string without NUL bytes, got {value!r}; "
            "pass the agent id or the canonical lock key"
        )
    return value


class WaitForGraph:
    """Holds (lock -> holder) and waits (one edge per agent and lock), with cycle search.

    Insertion-ordered dicts stand in for sets so every search is deterministic for a given
    sequence of changes (Python's string hashing is randomised per process).
    """

    def __init__(self) -> None:
        self._holder: dict[str, str] = {}
        self._held: dict[str, dict[str, None]] = {}  # agent -> locks it holds
        self._waits: dict[str, dict[str, None]] = {}  # agent -> locks it waits on
        self._waiters: dict[str, dict[str, None]] = {}  # lock -> agents waiting on it

    @classmethod
    def from_snapshot(
        cls, holds: Mapping[str, str], waits: Iterable[tuple[str, str]]
    ) -> WaitForGraph:
        """Build a graph from a lock-store snapshot. Raises ValueError on a malformed entry."""
        graph = cls()
        for lock, holder in holds.items():
            graph.set_holder(_check_key("lock key", lock), _check_key("holder", holder))
        for entry in waits:
            if not isinstance(entry, tuple | list) or len(entry) != 2:  # lists: from JSON
                raise ValueError(f"each wait must be an (agent_id, lock_key) pair, got {entry!r}")
            agent, lock = entry
            graph.add_wait(_check_key("agent id", agent), _check_key("lock key", lock))
        return graph

    # ---- queries -------------------------------------------------------------------------

    def holder(self, lock: str) -> str | None:
        return self._holder.get(lock)

    def held_by(self, agent: str) -> tuple[str, ...]:
        return tuple(self._held.get(agent, ()))

    def waits_of(self, agent: str) -> tuple[str, ...]:
        return tuple(self._waits.get(agent, ()))

    def waiters_of(self, lock: str) -> tuple[str, ...]:
        return tuple(self._waiters.get(lock, ()))

    def hold_count(self, agent: str) -> int:
        return len(self._held.get(agent, ()))

    def wait_count(self, agent: str) -> int:
        return len(self._waits.get(agent, ()))

    def is_waiting(self, agent: str, lock: str) -> bool:
        return lock in self._waits.get(agent, ())

    def agents(self) -> tuple[str, ...]:
        """Every agent that holds or waits for something, in first-seen order."""
        return tuple(dict.fromkeys([*self._held, *self._waits]))

    def has_step(self, step: CycleStep) -> bool:
        """True when `step.agent_id` waits on `step.lock_path` and `step.held_by` holds it."""
        return (
            step.agent_id != step.held_by
            and self.is_waiting(step.agent_id, step.lock_path)
            and self._holder.get(step.lock_path) == step.held_by
        )

    def is_intact(self, cycle: Cycle) -> bool:
        """True when every edge of `cycle` is still in the graph."""
        return all(self.has_step(step) for step in cycle)

    def snapshot(self) -> GraphSnapshot:
        return GraphSnapshot(
            holds=dict(self._holder),
            waits=tuple((agent, lock) for agent, locks in self._waits.items() for lock in locks),
        )

    # ---- changes -------------------------------------------------------------------------

    def set_holder(self, lock: str, agent: str) -> str | None:
        """Make `agent` the holder of `lock`; returns the previous holder (None if free)."""
        previous = self._holder.get(lock)
        if previous == agent:
            return previous
        if previous is not None:
            self._drop_hold(previous, lock)
        self._holder[lock] = agent
        self._held.setdefault(agent, {})[lock] = None
        return previous

    def clear_holder(self, lock: str) -> str | None:
        """Free `lock`; returns who held it (None if nobody did)."""
        previous = self._holder.pop(lock, None)
        if previous is not None:
            self._drop_hold(previous, lock, in_holder_map=False)
        return previous

    def add_wait(self, agent: str, lock: str) -> bool:
        """Record that `agent` waits on `lock`; False if it already did."""
        locks = self._waits.setdefault(agent, {})
        if lock in locks:
            return False
        locks[lock] = None
        self._waiters.setdefault(lock, {})[agent] = None
        return True

    def remove_wait(self, agent: str, lock: str) -> bool:
        """End `agent`'s wait on `lock`; False if there was none."""
        locks = self._waits.get(agent)
        if locks is None or lock not in locks:
            return False
        del locks[lock]
        if not locks:
            del self._waits[agent]
        waiters = self._waiters[lock]
        del waiters[agent]
        if not waiters:
            del self._waiters[lock]
        return True

    def remove_agent(self, agent: str) -> None:
        """Forget every hold and wait of `agent`."""
        for lock in self.held_by(agent):
            self.clear_holder(lock)
        for lock in self.waits_of(agent):
            self.remove_wait(agent, lock)

    def _drop_hold(self, agent: str, lock: str, *, in_holder_map: bool = True) -> None:
        if in_holder_map:
            del self._holder[lock]
        held = self._held[agent]
        del held[lock]
        if not held:
            del self._held[agent]

    # ---- cycles --------------------------------------------------------------------------

    def _successors(
        self, agent: str, skip: Collection[str], skip_edges: Collection[tuple[str, str]]
    ) -> Iterator[tuple[str, str]]:
        """(lock, holder) for each lock `agent` waits on that another, non-skipped agent holds."""
        for lock in self._waits.get(agent, ()):
            holder = self._holder.get(lock)
            if holder is None or holder == agent or holder in skip:
                continue
            if skip_edges and (agent, lock) in skip_edges:
                continue
            yield lock, holder

    def cycle_through(
        self,
        lock: str,
        skip: Collection[str] = _NO_SKIP,
        skip_edges: Collection[tuple[str, str]] = _NO_EDGES,
    ) -> Cycle | None:
        """The shortest cycle that uses a wait edge onto `lock`, avoiding agents in `skip` and
        (agent, lock) wait edges in `skip_edges`.

        Call it after a change to `lock` (a new waiter, or a new holder): any cycle that change
        closed goes through `lock`. Breadth-first from the holder back to any waiter, so the cost
        is proportional to the part of the graph reachable from the holder, not its size.
        """
        start = self._holder.get(lock)
        if start is None or start in skip:
            return None
        targets = self._waiters.get(lock)
        if not targets:
            return None
        # parent[v] = (u, l): u waits on l, which v holds; the start has no parent.
        parent: dict[str, tuple[str, str] | None] = {start: None}
        queue = deque([start])
        while queue:
            agent = queue.popleft()
            for waited, holder in self._successors(agent, skip, skip_edges):
                if holder in parent:
                    continue
                parent[holder] = (agent, waited)
                if holder in targets and (holder, lock) not in skip_edges:
                    return self._cycle_from_parents(parent, closer=holder, lock=lock, start=start)
                queue.append(holder)
        return None

    @staticmethod
    def _cycle_from_parents(
        parent: Mapping[str, tuple[str, str] | None], *, closer: str, lock: str, start: str
    ) -> Cycle:
        path: list[CycleStep] = []
        node = closer
        link = parent[node]
        while link is not None:
            previous, waited = link
            path.append(CycleStep(agent_id=previous, lock_path=waited, held_by=node))
            node = previous
            link = parent[node]
        path.reverse()
        return (CycleStep(agent_id=closer, lock_path=lock, held_by=start), *path)

    def find_cycle(
        self,
        skip: Collection[str] = _NO_SKIP,
        skip_edges: Collection[tuple[str, str]] = _NO_EDGES,
    ) -> Cycle | None:
        """Any cycle in the whole graph avoiding agents in `skip` and (agent, lock) wait edges
        in `skip_edges` (depth-first, O(V + E))."""
        finished: set[str] = set()
        for root in self._waits:
            if root in finished or root in skip:
                continue
            cycle = self._cycle_from_root(root, skip, skip_edges, finished)
            if cycle is not None:
                return cycle
        return None

    def _cycle_from_root(
        self,
        root: str,
        skip: Collection[str],
        skip_edges: Collection[tuple[str, str]],
        finished: set[str],
    ) -> Cycle | None:
        stack: list[tuple[str, Iterator[tuple[str, str]]]] = [
            (root, self._successors(root, skip, skip_edges))
        ]
        depth_of: dict[str, int] = {root: 0}  # agents on the current path
        via: list[str] = []  # via[i]: the lock stack[i] waits on, held by stack[i + 1]
        while stack:
            agent, successors = stack[-1]
            for lock, holder in successors:
                if holder in depth_of:
                    first = depth_of[holder]
                    steps = [
                        CycleStep(agent_id=stack[i][0], lock_path=via[i], held_by=stack[i + 1][0])
                        for i in range(first, len(stack) - 1)
                    ]
                    steps.append(CycleStep(agent_id=agent, lock_path=lock, held_by=holder))
                    return tuple(steps)
                if holder not in finished:
                    via.append(lock)
                    depth_of[holder] = len(stack)
                    stack.append((holder, self._successors(holder, skip, skip_edges)))
                    break
            else:
                stack.pop()
                del depth_of[agent]
                finished.add(agent)
                if via:
                    via.pop()
        return None

    def cycles(self) -> list[Cycle]:
        """Disjoint cycles such that every cycle of the graph shares an agent with one of them.

        Find one, set its agents aside, repeat: cycles that share agents are listed once, by the
        first found. O(k * (V + E)) for k cycles listed.
        """
        found: list[Cycle] = []
        skip: set[str] = set()
        while (cycle := self.find_cycle(skip)) is not None:
            found.append(cycle)
            skip.update(step.agent_id for step in cycle)
        return found
