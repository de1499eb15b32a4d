"""What `lockyard top` and `lockyard web` show of the present: one picture of a lock store.

A `Board` is built from one store snapshot and the deadlocks found in that very snapshot
(the same pass as `lockyard status` and `lockyard monitor --no-resolve`, so all three name
the same cycles and victims). It keeps nothing between snapshots: every view redraws from
the latest board, and a board is plain data (`to_dict` is what the web page receives).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ...core.deadlock_info import DeadlockInfo
from ...infra.crossproc.state import node_key
from ...infra.lockstore import Liveness, LockInfo, StoreSnapshot


@dataclass(frozen=True, slots=True)
class QueuedAgent:
    """One waiter of a lock, in arrival order."""

    agent_id: str
    since: float
    pid: int
    host: str
    dead: bool


@dataclass(frozen=True, slots=True)
class LockRow:
    """One lock: its holder (None when free or unreadable), its readers, and its queue in
    order. With readers, the holder is the next writer, waiting with the lock for them."""

    node: str
    """`namespace::key`: the lock's node in the wait-for graph."""
    name: str
    """What a person reads: the bare key when the board has one namespace, else the node."""
    holder: str | None
    held_since: float | None
    fence: int | None
    pid: int | None
    host: str | None
    liveness: str
    queue: tuple[QueuedAgent, ...]
    problem: str | None
    readers: tuple[str, ...] = ()
    """The agents holding it shared."""

    def matches(self, text: str) -> bool:
        """Does this lock, its holder, a reader or a waiter contain `text` (case-insensitive)?"""
        needle = text.casefold()
        names = [self.name, self.holder or "", *self.readers]
        names += [entry.agent_id for entry in self.queue]
        return any(needle in name.casefold() for name in names)


@dataclass(frozen=True, slots=True)
class WaitEdge:
    """`agent` waits for `lock` (its name), which `holder` holds: an edge pair of the graph."""

    agent: str
    lock: str
    holder: str
    since: float


@dataclass(frozen=True, slots=True)
class CycleView:
    """A deadlock of the board: its steps in order and the agent the monitor would pick."""

    steps: tuple[WaitEdge, ...]
    victim: str
    victim_waits_on: str
    summary: str

    @property
    def agents(self) -> tuple[str, ...]:
        return tuple(step.agent for step in self.steps)

    @property
    def locks(self) -> tuple[str, ...]:
        return tuple(step.lock for step in self.steps)


@dataclass(frozen=True)
class Board:
    """Holders, queues, wait edges and cycles of one store at one moment."""

    location: str
    taken_at: float
    locks: tuple[LockRow, ...]
    cycles: tuple[CycleView, ...]
    namespace: str | None
    """The one namespace of every lock, when there is one (names are then bare keys)."""
    edges: tuple[WaitEdge, ...] = field(default=())
    note: str | None = None
    """Why the board is empty when it is not simply free of locks."""

    @property
    def agents(self) -> list[str]:
        """Every agent that holds or waits, sorted."""
        names = {row.holder for row in self.locks if row.holder is not None}
        names.update(reader for row in self.locks for reader in row.readers)
        names.update(entry.agent_id for row in self.locks for entry in row.queue)
        return sorted(names)

    def in_cycle(self) -> tuple[set[str], set[str]]:
        """The agents and the lock names of every cycle."""
        agents = {agent for cycle in self.cycles for agent in cycle.agents}
        locks = {lock for cycle in self.cycles for lock in cycle.locks}
        return agents, locks

    def counts(self) -> dict[str, int]:
        return {
            "locks": len(self.locks),
            "held": sum(1 for row in self.locks if row.holder is not None or row.readers),
            "waiting": sum(len(row.queue) for row in self.locks),
            "agents": len(self.agents),
            "deadlocks": len(self.cycles),
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON for the web page (names only: no token, no connection string)."""
        return {
            "location": self.location,
            "taken_at": self.taken_at,
            "note": self.note,
            "namespace": self.namespace,
            "counts": self.counts(),
            "locks": [
                {
                    "name": row.name,
                    "holder": row.holder,
                    "held_since": row.held_since,
                    "fence": row.fence,
                    "pid": row.pid,
                    "host": row.host,
                    "liveness": row.liveness,
                    "problem": row.problem,
                    "readers": list(row.readers),
                    "queue": [
                        {"agent": entry.agent_id, "since": entry.since, "dead": entry.dead}
                        for entry in row.queue
                    ],
                }
                for row in self.locks
            ],
            "edges": [_edge_dict(edge) for edge in self.edges],
            "cycles": [
                {
                    "steps": [_edge_dict(step) for step in cycle.steps],
                    "victim": cycle.victim,
                    "victim_waits_on": cycle.victim_waits_on,
                    "summary": cycle.summary,
                }
                for cycle in self.cycles
            ],
        }


def _edge_dict(edge: WaitEdge) -> dict[str, Any]:
    return {"agent": edge.agent, "lock": edge.lock, "holder": edge.holder, "since": edge.since}


def empty_board(location: str, note: str) -> Board:
    return Board(location, time.time(), (), (), None, (), note)


def build_board(location: str, snapshot: StoreSnapshot, deadlocks: list[DeadlockInfo]) -> Board:
    """The board of `snapshot`; `deadlocks` were found in that same snapshot."""
    namespaces = {info.namespace for info in snapshot.locks if info.namespace}
    single = next(iter(namespaces)) if len(namespaces) == 1 else None
    rows = tuple(sorted((_row(info, single) for info in snapshot.locks), key=lambda row: row.name))
    edges = tuple(
        WaitEdge(entry.agent_id, row.name, row.holder, entry.since)
        for row in rows
        if row.holder is not None
        for entry in row.queue
        if not entry.dead
    ) + tuple(  # the next writer waits, with the lock, for every reader to leave
        WaitEdge(row.holder, row.name, reader, row.held_since or snapshot.taken_at)
        for row in rows
        if row.holder is not None
        for reader in row.readers
        if reader != row.holder
    )
    since = {(edge.agent, edge.lock): edge.since for edge in edges}
    cycles = tuple(_cycle(deadlock, single, since) for deadlock in deadlocks)
    return Board(location, snapshot.taken_at, rows, cycles, single, edges)


def _row(info: LockInfo, namespace: str | None) -> LockRow:
    node = info.lock_path if info.namespace is None else node_key(info.namespace, info.lock_path)
    name = info.lock_path if info.namespace == namespace else node
    queue = tuple(
        QueuedAgent(
            waiter.agent_id,
            waiter.since,
            waiter.pid,
            waiter.host,
            waiter.liveness()[0] is Liveness.DEAD,
        )
        for waiter in info.waiters
    )
    holder = info.holder
    return LockRow(
        node=node,
        name=name,
        holder=None if holder is None else holder.agent_id,
        held_since=None if holder is None else holder.acquired_at,
        fence=None if holder is None else holder.fence,
        pid=None if holder is None else holder.pid,
        host=None if holder is None else holder.host,
        liveness=info.liveness,
        queue=queue,
        problem=info.problem,
        readers=tuple(sorted(reader.agent_id for reader in info.shared_holders)),
    )


def _cycle(
    deadlock: DeadlockInfo, namespace: str | None, since: dict[tuple[str, str], float]
) -> CycleView:
    shown = deadlock.within(namespace) if namespace is not None else deadlock
    steps = tuple(
        WaitEdge(
            step.agent_id,
            step.lock_path,
            step.held_by,
            since.get((step.agent_id, step.lock_path), shown.detected_at),
        )
        for step in shown.cycle
    )
    return CycleView(steps, shown.victim, shown.victim_waits_on, shown.describe())
