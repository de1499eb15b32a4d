"""An explicit-state explorer of the line (`lockdir/line.py`), in the manner of TLA+'s TLC.

Each agent runs the line's own recipes (take, wait, release) as `LockStore` does, against a
lock directory in memory (`line_model.World`). One step of the explorer is one operation of
one agent, so every interleaving of the agents' operations is a path; the other steps are
the faults and the clock: an agent dies (at any step), a sleeping agent's wait times out, a
sleeping agent re-checks on its own (its backstop), a turn's length of time passes. States
are remembered (the world, and each agent's place in its recipes), so each is explored once;
agents of the same script are interchangeable, so a state and the same state with their
names exchanged are one state (symmetry reduction: a state's key is that of its renaming
that puts those agents in a fixed order of what they do, `Explorer._key`).

An agent's place in its recipes is the sequence of results its operations returned: a
recipe is deterministic, so the same results bring it to the same point. Those sequences
form a trie; a generator positioned at a node is kept for the step out of it, and rebuilt by
replaying the results when another step needs it. Two places are the same state when their
generators are: the same code positions down the chain of recipes, with the same local
variables (`fingerprint`), so a wait that looks again and again is one state, not many.

Coarser atomicity (Lipton's reduction, as TLA+ users pick their grain; `Explorer.fused`).
A step of an agent that no other agent's step can observe, and that observes nothing another
agent's step changes, commutes with every step of the others: run in the same move as the
agent's step next to it, it loses no state the others can reach, only the intermediate ones.
Measured first: alone, an agent's acquire and release is 8 moves unfused, and a waiter's is
about 30; of all the operations of `line.py` none is private (every one reads or writes the
lock, the queue, an entry or a staging another agent's step writes or reads: even a head's
own staging is renamed onto the lock by a releaser), so the steps fused are the explorer's own
marks, whose every effect is on the agent's bookkeeping (`Agent`) that only the invariants read:

- "ask" (the entries there are when it asks, `Agent.before_me`) runs with the take's first
  operation. The FIFO check at a grant then compares against the entries there are at that
  operation, a superset of those that were there at any earlier moment and are still queued
  at the grant (an entry that goes never comes back: each wait has its own token), so the
  check is at least as strict.
- "held" (the FIFO check, and `Agent.holds`) runs with the acquire's last operation (the
  publish, or the dequeue that accepts a grant). Checked at the moment of the grant, FIFO is at
  least as strict as checked later (a waiter dead or leaving then was so at the grant, or
  not yet); holding from that moment on makes "never two holders" at least as strict.
- "releases" (out of `Agent.holds`) runs with the dropping of the grant: until then the lock
  holds that grant (nobody drops a live agent's grant), so holding until then is at least
  as strict.
- "woke" (the wait's sleeper closes: its subscription and doorbell go, its woken mark is
  cleared) runs with the wait's last operation. Another agent's step (a ring, a removal, a
  death, a tick) uses a subscription only to mark its agent woken or overdue, which "woke"
  clears, so either order reaches the same state.

A death between a mark and its operation is the same state as a death before the mark (a
dead agent's bookkeeping is forgotten). `test_the_fused_and_the_unfused_search_find_the_same_
violations` runs both on planted bugs; `scripts/explore_line.py --plants` on every swap of
two statements of every recipe.

Checked in every state: never two holders (and a holder holds its grant); at every grant,
FIFO among the living (no live waiter that queued before the taker asked still waits, unless
its wait is over and it is leaving); in every state where nothing can move but the clock and
the faults, no waiter sleeps while the lock is free (or holds its unaccepted grant, or is
held by a dead process) and its turn has come; as soon as an agent is done, nothing of it
is left behind (no entry, staging, grant or doorbell), and when every agent is done or dead,
no empty lock either (but where a release died half way).
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from itertools import permutations
from typing import Any

from line_model import AGENT_NAMES, AgentOps, Rec, Renaming, Sub, World

from lockyard.infra.lockstore.lockdir import line
from lockyard.infra.lockstore.lockdir.line import SLEEP, Await

Script = Callable[[AgentOps], Generator[tuple[Any, ...], Any, None]]

_DONE = ("done",)
_FAULTS = ("tick", "dies", "times out", "re-checks")
"""The moves that are no agent's own progress: the clock, and the faults."""
_UNSEEN = frozenset(
    {"wait", "lock_changed", "entry_gone", "passed_over", "reclaimed", "claim_asleep"}
)
"""Operations that read nothing another agent changes and change nothing another agent (or
an invariant) reads: the in-process notices, claims and reports (no-ops here, every agent
being a process of its own) and the explorer's mark of a wait's beginning. One runs in the same
move as the operation before it: every interleaving around it reaches the same states
(dying just before it or just after is one state, a dead agent's place being forgotten).
So does a look at a process once nobody can die any more."""
_NOTED_AFTER = frozenset({"held", "woke"})
"""The explorer's marks that run in the same move as the operation before them (with
`Explorer.fused`): "held" right after the operation that got the lock, "woke" right after the
last operation of a wait. See the module's docstring (coarser atomicity)."""
_NOTED_BEFORE = frozenset({"ask", "releases"})
"""The explorer's marks that run in the same move as the operation after them (with
`Explorer.fused`): "ask" with the first operation of a take, "releases" with the dropping of
the grant. See the module's docstring (coarser atomicity)."""


class BrokenInvariantError(AssertionError):
    """An invariant broken, with the steps that led there."""


# -- what an agent does --------------------------------------------------------------------


def acquire(ops: AgentOps, name: str) -> Generator[tuple[Any, ...], Any, tuple[str, Any] | None]:
    """What `LockStore.acquire` does: take the lock, else wait in line (the explorer decides
    whether and when the wait times out). (grant token, successor hint), or None."""
    agent, pid = ops.name, ops.pid
    yield ("ask", name)

    def grant() -> Rec:
        return Rec(agent, "", pid)  # the token is the grant's, given when it is made

    taken = yield from line.take(ops, name, agent, grant)
    if taken is not None:
        return taken[0], None
    place = line.Place(name, name, agent, lambda _ticket, wait: Rec(agent, wait, pid), grant)
    yield ("wait", name)
    got = yield from line.wait(ops, place)
    yield ("woke",)
    return (place.held, place.successor) if got else None


def holding(ops: AgentOps, names: tuple[str, ...]) -> Generator[tuple[Any, ...], Any, None]:
    """Acquire `names` in order (stopping at the first wait that fails), then release what
    was acquired, last first."""
    held: list[tuple[str, str, Any]] = []
    for name in names:
        got = yield from acquire(ops, name)
        if got is None:
            break
        yield ("held", name, got[0])
        held.append((name, *got))
    for name, token, hint in reversed(held):
        yield ("releases", name)  # from here on it no longer counts on the lock
        assert (yield from line.release(ops, name, token, hint))


@dataclass(frozen=True, slots=True)
class Locks:
    """The script of an agent that acquires `names` in order, then releases them (`rounds`
    times: from its second round on it comes back as a newcomer): two agents with equal
    scripts are interchangeable (the symmetry the explorer reduces)."""

    names: tuple[str, ...]
    rounds: int = 1

    def __call__(self, ops: AgentOps) -> Generator[tuple[Any, ...], Any, None]:
        return _rounds(ops, self.names, self.rounds)


def _rounds(
    ops: AgentOps, names: tuple[str, ...], rounds: int
) -> Generator[tuple[Any, ...], Any, None]:
    for _round in range(rounds):
        yield from holding(ops, names)


def locks(*names: str, rounds: int = 1) -> Locks:
    return Locks(names, rounds)


# -- the agents' places in their recipes -----------------------------------------------------


class Places:
    """The trie of one agent's results: node -> the operation it is about to do."""

    def __init__(self, pid: int, name: str, script: Script) -> None:
        self._pid, self._name, self._script = pid, name, script
        self.op: list[tuple[Any, ...]] = []
        self.fingerprint: list[Any] = []
        self.stamp_read: list[tuple[str, str, int | None] | None] = []
        """(lock, entry, stamp) of the turn stamp the agent's wait read when it queued."""
        self._parent: list[int] = []
        self._result: list[Any] = []
        self._children: list[dict[Any, int]] = []
        self._ready: dict[int, Generator[tuple[Any, ...], Any, None]] = {}
        generator = script(AgentOps(pid, name))
        self._add(-1, None, next(generator), generator)

    def _add(self, parent: int, result: Any, op: tuple[Any, ...], generator: Any) -> int:
        node = len(self.op)
        self.op.append(op)
        self.fingerprint.append(("done",) if op is _DONE else fingerprint(generator))
        self.stamp_read.append(None if op is _DONE else _stamp_read(generator))
        self._parent.append(parent)
        self._result.append(result)
        self._children.append({})
        if op is not _DONE:
            self._ready[node] = generator
        return node

    def after(self, node: int, result: Any) -> int:
        """The node reached from `node` when its operation returns `result`."""
        known = self._children[node].get(result)
        if known is not None:
            return known
        generator = self._ready.pop(node, None) or self._replayed(node)
        try:
            op = generator.send(result)
        except StopIteration:
            op = _DONE
        child = self._add(node, result, op, generator)
        self._children[node][result] = child
        return child

    def generator_at(self, node: int) -> Generator[tuple[Any, ...], Any, None]:
        """A generator positioned at `node` (for tests that look into a recipe's locals)."""
        return self._ready.get(node) or self._replayed(node)

    def _replayed(self, node: int) -> Generator[tuple[Any, ...], Any, None]:
        results = []
        while self._parent[node] >= 0:
            results.append(self._result[node])
            node = self._parent[node]
        generator = self._script(AgentOps(self._pid, self._name))
        next(generator)
        for result in reversed(results):
            generator.send(result)
        return generator


def fingerprint(generator: Any) -> tuple[Any, ...]:
    """What a generator will do from here on: the code position of each recipe down the chain
    of `yield from`, and its local variables."""
    parts = []
    while generator is not None and generator.gi_frame is not None:
        frame = generator.gi_frame
        local = tuple(sorted((k, _frozen(v)) for k, v in frame.f_locals.items()))
        parts.append((frame.f_code, frame.f_lasti, local))
        generator = generator.gi_yieldfrom
    return tuple(parts)


def _stamp_read(generator: Any) -> tuple[str, str, int | None] | None:
    """(lock, entry, stamp) of the wait in the chain of recipes, when there is one."""
    while generator is not None and generator.gi_frame is not None:
        for value in generator.gi_frame.f_locals.values():
            if isinstance(value, line.Place):
                return (value.name, value.entry, value.created) if value.entry else None
        generator = generator.gi_yieldfrom
    return None


def _frozen(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool | Rec | Await):
        return value
    if isinstance(value, line.Place):
        # Not the stamp read when it queued: a serial of the model's; what the wait will do
        # depends only on whether its entry still bears it (the state's key says that).
        return ("Place", tuple(_frozen(getattr(value, f)) for f in _PLACE_FIELDS))
    if isinstance(value, tuple | list | deque | set | frozenset):
        return (type(value).__name__, tuple(_frozen(item) for item in value))
    if isinstance(value, AgentOps):
        return ("tokens", value.tokens)
    if is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, tuple(_frozen(getattr(value, f.name)) for f in fields(value)))
    if callable(value):
        return "callable"  # the agent's own record makers: the same all along
    raise TypeError(f"cannot tell states apart by a {type(value).__name__}")


_PLACE_FIELDS = tuple(f.name for f in fields(line.Place) if f.name != "created")


# -- states ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Agent:
    node: int = field(default=0, compare=False, hash=False)
    """Where it is in its trie of results (any of the places with the same fingerprint)."""
    place: Any = None
    """The fingerprint of its place: what tells two agents' states apart."""
    dead: bool = False
    waiting_on: str = ""
    holds: frozenset[tuple[str, str]] = frozenset()
    """(lock, grant token) of what it believes it holds."""
    before_me: frozenset[tuple[str, str]] = frozenset()
    """(lock, wait token) of the entries there were when it asked for the lock (or queued)."""

    def but(
        self,
        *,
        waiting_on: str | None = None,
        holds: frozenset[tuple[str, str]] | None = None,
        before_me: frozenset[tuple[str, str]] | None = None,
    ) -> Agent:
        """This agent with what is given changed (`dataclasses.replace` without its
        introspection: the explorer makes one at nearly every move)."""
        return Agent(
            self.node,
            self.place,
            self.dead,
            self.waiting_on if waiting_on is None else waiting_on,
            self.holds if holds is None else holds,
            self.before_me if before_me is None else before_me,
        )


@dataclass(slots=True)
class State:
    world: World
    agents: tuple[Agent, ...]
    deaths: int
    ticks: int
    timeouts: int


@dataclass
class Explorer:
    """Every interleaving of `scripts` (one agent each), with at most `deaths` deaths,
    `ticks` turns' lengths of time and `timeouts` timed-out waits in all."""

    scripts: tuple[Script, ...]
    deaths: int = 1
    ticks: int = 1
    timeouts: int = 1
    backstops: str = "lost"
    """When a sleeping agent may re-check on its own (`sleep.py`'s backstop): "all" at any
    moment; "lost" only when a wake-up could be lost, that is when something it would act
    on tells it nothing (a turn's length of time passed since it subscribed; an exit it
    follows no pidfd of; its own entry removed by another process; a lock it has no
    doorbell to hear); "none" never. Elsewhere a re-check looks at what a wake-up already
    reports, and those interleavings are explored through the wake-up."""
    fused: bool = True
    """Run each of the explorer's own marks in the same move as the operation it belongs to
    (`_NOTED_AFTER`, `_NOTED_BEFORE`); False: each mark is a move of its own."""
    symmetry: bool = True
    """Explore one of each set of states that differ only by a renaming of identical
    agents."""
    depth: int | None = None
    """Explore only the states at most this many moves from the start: every interleaving
    of the first `depth` moves, checked, and nothing beyond (None: every state). A bounded
    run's states at the bound are counted in `unexpanded`, never judged quiet."""
    order: str = "breadth"
    """"breadth": each state reached by the fewest moves first (the trace of a broken
    invariant is a shortest one); "depth": the newest state first, which reaches the ends of
    the agents' scripts (and a bug seen only there) sooner, and keeps fewer states waiting.
    Both visit every state once; a depth bound needs "breadth"."""
    fingerprints: bool = False
    """Remember each state by its key's 64-bit hash, as TLC does by default, not by its key:
    a tenth of the memory, and a chance that two states share a fingerprint (one then goes
    unexplored) of about n*n/2**65 for n states, if the hash spreads keys evenly
    (`collision_chance`)."""
    limit: int | None = None
    """Stop after visiting this many states (None: at the end). Depth first, a run so
    bounded follows interleavings far from the start, deterministically: a regression check,
    not the check of every interleaving."""
    progress: Callable[[Explorer], None] | None = None
    """Called every 100,000 states visited (the script prints how far it got)."""
    start: Sequence[str] = ()
    """Moves to make before exploring, each named as a trace names it ("a", "b subscribes",
    "c dies", "tick"; an agent's own step, a fault or the clock: each name is at most one
    move of a state): every interleaving from the state they reach is explored. A trace
    replayed so is checked at each of its steps, as a found one was."""
    states: int = 0
    transitions: int = 0
    unexpanded: int = 0
    deepest: int = 0
    """The most moves from the start of a state taken up so far. Breadth first, every state
    at most `deepest - 1` moves away has been explored (its moves made, each state they
    reach checked) when the run stops, ended or not: a run cut short is a depth-bounded one."""

    def run(self) -> int:
        """Explore; the number of states visited (BrokenInvariantError at the first invariant
        broken)."""
        if self.order not in ("breadth", "depth"):
            raise ValueError(f"order is 'breadth' or 'depth', not {self.order!r}")
        if self.order == "depth" and self.depth is not None:
            # Depth first, a state first met by a long path would be cut at the bound though
            # a shorter path reaches it: the bounded search would miss states.
            raise ValueError("a depth bound needs order='breadth'")
        # The states kept are many and acyclic: the collector's scans of them took 40% of
        # the time (two agents on two locks: 13.0 s of CPU with it, 7.9 without).
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._explore()
        finally:
            if collecting:
                gc.enable()

    def _explore(self) -> int:
        self._places = [
            Places(n + 1, AGENT_NAMES[n], script) for n, script in enumerate(self.scripts)
        ]
        self._groups = [
            [n for n, other in enumerate(self.scripts) if other == script]
            for m, script in enumerate(self.scripts)
            if self.symmetry and m == min(n for n, o in enumerate(self.scripts) if o == script)
        ]
        self._groups = [group for group in self._groups if len(group) > 1]
        self._place_ids: dict[tuple[Any, ...], int] = {}
        self._wheres: dict[int, tuple[tuple[str, int], ...]] = {}
        # A place's code positions as a small number (what shapes are sorted and looked up
        # by: any order of them serves, if it is the same for an agent and its renaming).
        self._where_ids: dict[int, int] = {}
        self._where_interned: dict[tuple[tuple[str, int], ...], int] = {}
        self._place_ids_by_id: dict[int, int] = {}
        self._renamed_ids: dict[tuple[int, tuple[int, ...]], int] = {}
        self._renamings_of: dict[tuple[Any, ...], list[Renaming | None]] = {}
        self._renaming_of: dict[tuple[int, ...], Renaming] = {}
        agents = tuple(Agent(0, places.fingerprint[0]) for places in self._places)
        first = State(World(), agents, self.deaths, self.ticks, self.timeouts)
        self._first = first
        start = self._id(self._key(first))
        # key (or fingerprint) -> the key it was reached from, and how (or only the former:
        # with fingerprints the moves are found again for a trace)
        seen: dict[Any, Any] = {start: None if self.fingerprints else (None, ("start", ()))}
        first, start = self._replayed(first, start, seen)
        frontier = deque([(first, start, 0)])  # each state with its key, and its depth
        take = frontier.pop if self.order == "depth" else frontier.popleft
        while frontier:
            state, here, depth = take()
            self.states += 1
            self.deepest = max(self.deepest, depth)
            if self.states == self.limit:
                break
            if self.progress is not None and not self.states % 100_000:
                self.progress(self)
            if depth == self.depth:
                self.unexpanded += 1
                continue
            moved = False
            for move, after in self._traced(self._successors(state), here, seen):
                self.transitions += 1
                key = self._id(self._key(after))
                if key not in seen:
                    seen[key] = here if self.fingerprints else (here, move)
                    self._check(after, key, seen)
                    frontier.append((after, key, depth + 1))
                moved = moved or not move[0].endswith(_FAULTS)
            if not moved:
                self._check_quiet(state, here, seen)
        return self.states

    def _replayed(self, state: State, here: Any, seen: dict[Any, Any]) -> tuple[State, Any]:
        """The state `self.start`'s moves reach from `state` (of key `here`), each state on
        the way checked, and its key."""
        for step, name in enumerate(self.start, 1):
            moves = list(self._traced(self._successors(state), here, seen))
            found = next(((m, after) for m, after in moves if m[0] == name), None)
            if found is None:
                raise ValueError(
                    f"move {step} of the start, {name!r}, cannot be made there: the moves "
                    f"are {[m[0] for m, _ in moves]}"
                )
            move, state = found
            key = self._id(self._key(state))
            if key not in seen:
                seen[key] = here if self.fingerprints else (here, move)
                self._check(state, key, seen)
            here = key
        return state, here

    def collision_chance(self) -> float:
        """With fingerprints: the chance that two of the states visited shared one."""
        return self.states * self.states / 2**65 if self.fingerprints else 0.0

    def _id(self, key: tuple[Any, ...]) -> Any:
        """What `seen` holds of a state's key: itself, or its fingerprint."""
        return hash(key) if self.fingerprints else key

    def _trace(self, key: Any, seen: dict[Any, Any]) -> str:
        """The moves from the start to the state of `key`, one a line."""
        path = []
        while key is not None:
            path.append(key)
            key = seen[key] if self.fingerprints else seen[key][0]
        path.reverse()
        if not self.fingerprints:
            moves = [seen[key][1] for key in path]
        else:  # find each move again: the successor whose key has the next fingerprint
            moves, state = [("start", ())], self._first
            for key in path[1:]:
                move, state = next(
                    (move, after)
                    for move, after in self._successors(state)
                    if hash(self._key(after)) == key
                )
                moves.append(move)
        return "\n".join(f"  {n:3d}. {_move_text(move)}" for n, move in enumerate(moves))

    def _traced(
        self, moves: Iterator[tuple[Move, State]], here: tuple[Any, ...], seen: dict[Any, Any]
    ) -> Iterator[tuple[Move, State]]:
        """`moves`, with the steps to `here` added to an invariant broken while making one
        (the FIFO check at a grant runs inside a move)."""
        try:
            yield from moves
        except BrokenInvariantError as broken:
            raise BrokenInvariantError(
                f"{broken}\n{self._trace(here, seen)}\n  (next move)"
            ) from None

    # -- states' keys: identical agents are interchangeable -----------------------------------

    def _key(self, state: State) -> tuple[Any, ...]:
        """What tells `state` apart from every other state, up to a renaming of identical
        agents (agents of equal scripts): the key of the state renamed so that each group
        of identical agents stands in the order of what they do (their code positions,
        held locks...); where that order leaves a tie, the key of least hash among the
        tied orders. Any renaming gives a key of an equivalent state (so the choice is never
        unsound); choosing alike for a state and its renamings is what merges them."""
        world, agents, places = state.world, state.agents, self._places
        unchanged = []
        before = []
        queued = None
        for n, agent in enumerate(agents):
            read = None if agent.dead else places[n].stamp_read[agent.node]
            unchanged.append(read is None or world.bears_stamp(*read))
            # Of the entries there were when an agent asked, only those still queued can
            # matter (at its grant): an entry that goes never comes back, each wait having
            # its token.
            if agent.before_me:
                if queued is None:
                    queued = _queued(world)
                before.append(agent.before_me & queued)
            else:
                before.append(agent.before_me)
        renamings = self._canonical_renamings(agents, tuple(unchanged))
        if len(renamings) == 1:
            return self._renamed_key(state, renamings[0], unchanged, before)
        return min((self._renamed_key(state, r, unchanged, before) for r in renamings), key=hash)

    def _stamp_unchanged(self, n: int, agent: Agent, world: World) -> bool:
        """The agent's entry still bears the turn stamp its wait read when it queued: all
        that the stamp's value tells the wait (`line._in_line`)."""
        read = None if agent.dead else self._places[n].stamp_read[agent.node]
        return read is None or world.bears_stamp(*read)

    def _canonical_renamings(
        self, agents: tuple[Agent, ...], unchanged: tuple[bool, ...]
    ) -> list[Renaming | None]:
        if not self._groups:
            return [None]
        shapes = tuple(map(self._shape, agents, unchanged))
        known = self._renamings_of.get(shapes)
        if known is None:
            known = self._renamings_of[shapes] = self._orders(shapes)
        return known

    def _orders(self, shapes: tuple[tuple[Any, ...], ...]) -> list[Renaming | None]:
        """The renamings that put each group of identical agents in the order of their
        shapes (every order of the agents a tie leaves)."""
        choices: list[tuple[int, ...]] = [tuple(range(len(shapes)))]
        for group in self._groups:
            ordered = sorted(group, key=shapes.__getitem__)
            blocks: list[list[int]] = []  # runs of agents that the order cannot tell apart
            for n in ordered:
                if blocks and shapes[blocks[-1][0]] == shapes[n]:
                    blocks[-1].append(n)
                else:
                    blocks.append([n])
            orders: list[list[int]] = [[]]
            for block in blocks:
                orders = [o + list(p) for o in orders for p in permutations(block)]
            grown = []
            for to in choices:
                for order in orders:
                    mapped = list(to)
                    for target, n in zip(group, order, strict=True):
                        mapped[n] = target
                    grown.append(tuple(mapped))
            choices = grown
        return [None if _identity(to) else self._renaming(to) for to in choices]

    def _renaming(self, to: tuple[int, ...]) -> Renaming:
        known = self._renaming_of.get(to)
        if known is None:
            known = self._renaming_of[to] = Renaming(to)
        return known

    def _shape(self, agent: Agent, unchanged: bool) -> tuple[Any, ...]:
        """What an agent does, without who it is: the same for an agent and its renaming
        (its code positions, whether it lives, what it waits for and holds)."""
        where = self._where_ids.get(id(agent.place))
        if where is None:  # places live as long as their agent's trie
            where = self._where_ids[id(agent.place)] = self._where_interned.setdefault(
                self._where(agent.place), len(self._where_interned)
            )
        held = tuple(sorted(name for name, _ in agent.holds)) if agent.holds else ()
        return (where, agent.dead, agent.waiting_on, held, unchanged)

    def _where(self, place: Any) -> tuple[tuple[str, int], ...]:
        """The code positions of a place (its recipes' names and offsets), computed once."""
        where = self._wheres.get(id(place))
        if where is None:  # places live as long as their agent's trie
            where = self._wheres[id(place)] = (
                () if place == ("done",) else tuple((c.co_qualname, i) for c, i, _ in place)
            )
        return where

    def _wait_ended(self, agent: Agent) -> bool:
        """The agent's wait is over (it got the lock, timed out or was cancelled): it is in
        `line._leave_line`, taking its entry away."""
        return any(code == "_leave_line" for code, _ in self._where(agent.place))

    def _renamed_key(
        self,
        state: State,
        renaming: Renaming | None,
        unchanged: list[bool],
        before: list[frozenset[tuple[str, str]]],
    ) -> tuple[Any, ...]:
        if renaming is None:
            ids = self._place_ids_by_id
            agents = tuple(
                (
                    ids.get(id(agent.place)) or self._place_id(agent.place),
                    agent.dead,
                    agent.waiting_on,
                    agent.holds,
                    before[n],
                    unchanged[n],
                )
                for n, agent in enumerate(state.agents)
            )
        else:
            keyed: list[Any] = [None] * len(state.agents)
            texts = renaming.texts
            for n, agent in enumerate(state.agents):
                keyed[renaming.to[n]] = (
                    self._renamed_place_id(agent.place, renaming),
                    agent.dead,
                    agent.waiting_on,
                    frozenset([(name, texts[token]) for name, token in agent.holds])
                    if agent.holds
                    else agent.holds,
                    frozenset([(name, texts[token]) for name, token in before[n]])
                    if before[n]
                    else before[n],
                    unchanged[n],
                )
            agents = tuple(keyed)
        return (
            state.world.key(renaming),
            agents,
            state.deaths,
            state.ticks,
            state.timeouts,
        )

    def _place_id(self, place: tuple[Any, ...]) -> int:
        """A small number for each distinct place (hashed once, not at every key; ids from
        1, so that `ids.get(...) or ...` finds every known one)."""
        known = self._place_ids_by_id.get(id(place))  # places live as long as their trie
        if known is None:
            known = self._place_ids_by_id[id(place)] = self._interned(place)
        return known

    def _interned(self, place: tuple[Any, ...]) -> int:
        return self._place_ids.setdefault(place, len(self._place_ids) + 1)

    def _renamed_place_id(self, place: tuple[Any, ...], renaming: Renaming) -> int:
        cached = (id(place), renaming.to)  # places live as long as their agent's trie
        known = self._renamed_ids.get(cached)
        if known is None:
            known = self._renamed_ids[cached] = self._interned(_renamed_place(place, renaming))
        return known

    # -- moves -------------------------------------------------------------------------------

    def _successors(self, state: State) -> Iterator[tuple[Move, State]]:
        for n, agent in enumerate(state.agents):
            if agent.dead:
                continue
            op = self._places[n].op[agent.node]
            if op is _DONE:
                continue
            yield from self._steps(state, n, agent, op)
            if state.deaths:
                world = state.world.copy()
                world.die(n + 1)
                # Where it died, what it waited for or believed it held: all forgotten.
                agents = _with(state.agents, n, Agent(agent.node, _DONE, dead=True))
                yield (
                    (f"{_who(n)} dies", ()),
                    State(world, agents, state.deaths - 1, state.ticks, state.timeouts),
                )
        if state.ticks:
            world = state.world.copy()
            world.tick()
            yield (
                ("tick", ()),
                State(world, state.agents, state.deaths, state.ticks - 1, state.timeouts),
            )

    def _steps(
        self, state: State, n: int, agent: Agent, op: tuple[Any, ...]
    ) -> Iterator[tuple[Move, State]]:
        if op[0] == SLEEP:
            yield from self._sleeps(state, n, agent, op[1])
            return
        world = state.world.copy()
        agent, done = self._carried_out(world, n, agent, op, state)
        yield (
            (_who(n), done),
            State(world, _with(state.agents, n, agent), state.deaths, state.ticks, state.timeouts),
        )

    def _carried_out(
        self, world: World, n: int, agent: Agent, op: tuple[Any, ...], state: State
    ) -> tuple[Agent, list[tuple[tuple[Any, ...], Any]]]:
        """Agent `n` does `op` on `world`, and the operations fused with it (`_fuses`): the
        agent after them, and each operation with its result."""
        done = []
        while True:
            kind = _name(op)
            if isinstance(op[0], str):
                agent, result = self._note(world, n, agent, op, state.agents), None
            else:
                ops = op[0].__self__
                ops.world = world
                if kind == "enqueue":
                    agent = agent.but(before_me=_entries(world, op[1]))
                result = op[0](*op[1:])
            agent = self._moved(n, agent, result)
            done.append((op, result))
            op = self._places[n].op[agent.node]
            if not self._fuses(kind, op, state.deaths):
                return agent, done

    def _fuses(self, before: str, op: tuple[Any, ...], deaths: int) -> bool:
        """Operation `op` runs in the same move as `before`, the operation before it of the
        same agent ("": a wake-up): see `_UNSEEN`, `_NOTED_AFTER`, `_NOTED_BEFORE`."""
        if op is _DONE or op[0] == SLEEP:
            return False
        kind = _name(op)
        if kind in _UNSEEN or (kind == "liveness" and not deaths):
            return True
        return self.fused and (kind in _NOTED_AFTER or before in _NOTED_BEFORE)

    def _sleeps(
        self, state: State, n: int, agent: Agent, awaited: Await
    ) -> Iterator[tuple[Move, State]]:
        sub = Sub.of(agent.waiting_on, awaited)
        pid = n + 1
        world = state.world
        if world.watchers.get(pid) != sub:
            yield self._woken(state, n, agent, True, "subscribes", lambda w: w.subscribe(pid, sub))
            return
        if pid in world.woken:
            yield self._woken(state, n, agent, True, "is woken", lambda w: None)
        elif self.backstops == "all" or (
            self.backstops == "lost" and _wake_could_be_lost(world, pid, awaited, sub)
        ):
            yield self._woken(state, n, agent, True, "re-checks", lambda w: None)
        if state.timeouts:
            yield self._woken(state, n, agent, False, "times out", lambda w: None, timeout=True)

    def _woken(
        self,
        state: State,
        n: int,
        agent: Agent,
        result: bool,
        what: str,
        change: Callable[[World], None],
        *,
        timeout: bool = False,
    ) -> tuple[Move, State]:
        world = state.world.copy()
        change(world)
        world.woken.discard(n + 1)
        agent = self._moved(n, agent, result)
        op = self._places[n].op[agent.node]
        done: list[tuple[tuple[Any, ...], Any]] = []
        if self._fuses("", op, state.deaths):
            agent, done = self._carried_out(world, n, agent, op, state)
        timeouts = state.timeouts - 1 if timeout else state.timeouts
        return (f"{_who(n)} {what}", tuple(done)), State(
            world, _with(state.agents, n, agent), state.deaths, state.ticks, timeouts
        )

    def _moved(self, n: int, agent: Agent, result: Any) -> Agent:
        places = self._places[n]
        node = places.after(agent.node, result)
        if places.op[node] is _DONE:  # nothing it noted matters any more
            return Agent(node, places.fingerprint[node])
        return Agent(
            node,
            places.fingerprint[node],
            agent.dead,
            agent.waiting_on,
            agent.holds,
            agent.before_me,
        )

    def _note(
        self, world: World, n: int, agent: Agent, op: tuple[Any, ...], agents: tuple[Agent, ...]
    ) -> Agent:
        """The explorer's own marks in an agent's script."""
        if op[0] == "ask":
            return agent.but(before_me=_entries(world, op[1]))
        if op[0] == "wait":
            return agent.but(waiting_on=op[1])
        if op[0] == "woke":  # the wait returned: its sleeper closes
            world.subscribe(n + 1, None)
            world.woken.discard(n + 1)
            return agent.but(waiting_on="")
        if op[0] == "held":
            self._granted(world, n, agent, op[1], agents)
            return agent.but(holds=agent.holds | {(op[1], op[2])})
        assert op[0] == "releases"
        return agent.but(holds=frozenset(h for h in agent.holds if h[0] != op[1]))

    # -- invariants ---------------------------------------------------------------------------

    def _granted(
        self, world: World, n: int, agent: Agent, name: str, agents: tuple[Agent, ...]
    ) -> None:
        """FIFO among the living: nobody who queued before this agent asked still waits.
        A waiter whose wait is over no longer waits, though its entry may still be there:
        leaving first, it stamps its successor's turn before its entry goes
        (`line._leave_as_head`), and that successor may take the lock in between."""
        for ticket, entry in world.queues.get(name, {}).items():
            if entry.rec.pid == n + 1:
                raise BrokenInvariantError(
                    f"{_who(n)} holds {name} with its entry {ticket} still queued"
                )
            if entry.rec.pid in world.dead or self._wait_ended(agents[entry.rec.pid - 1]):
                continue
            if (name, entry.rec.token) in agent.before_me:
                raise BrokenInvariantError(
                    f"{_who(n)} got {name} while {entry.rec.agent_id}, queued before it "
                    "asked, still waits"
                )

    def _check(self, state: State, key: tuple[Any, ...], seen: dict[Any, Any]) -> None:
        world = state.world
        try:
            if world.broken:
                raise BrokenInvariantError(world.broken)
            believers: dict[str, list[tuple[int, str]]] = {}
            for n, agent in enumerate(state.agents):
                if not agent.dead:
                    for name, token in agent.holds:
                        believers.setdefault(name, []).append((n, token))
            for name, holders in believers.items():
                if len(holders) > 1:
                    raise BrokenInvariantError(
                        f"two holders of {name}: {[_who(n) for n, _ in holders]}"
                    )
                [(n, token)] = holders
                if world.locks.get(name) != token:
                    raise BrokenInvariantError(
                        f"{_who(n)} believes it holds {name}, which holds {world.locks.get(name)!r}"
                    )
            finished = {
                n + 1
                for n, a in enumerate(state.agents)
                if not a.dead and self._places[n].op[a.node] is _DONE
            }
            if finished:
                everyone = all(a.dead or n + 1 in finished for n, a in enumerate(state.agents))
                self._check_nothing_left(state, finished, everyone)
        except BrokenInvariantError as broken:
            raise BrokenInvariantError(f"{broken}\n{self._trace(key, seen)}") from None

    def _check_nothing_left(self, state: State, alive: set[int], everyone: bool) -> None:
        """Nothing of the agents `alive` (each done, alive) is left behind; nor, when
        `everyone` is done or dead, an empty lock."""
        world = state.world
        for name, entries in world.queues.items():
            for ticket, entry in entries.items():
                if entry.rec.pid in alive:
                    raise BrokenInvariantError(
                        f"{entry.rec.agent_id}'s entry {ticket} of {name} left behind"
                    )
        for (name, token), rec in world.stagings.items():
            if token[0] in {_who(n - 1) for n in alive}:
                raise BrokenInvariantError(f"a staging {token} of {name} left behind ({rec})")
        for name, token in world.locks.items():
            if token is None:
                if everyone and not world.dead:  # a release that died half way leaves one, harmless
                    raise BrokenInvariantError(f"an empty lock {name} left behind")
                continue
            if world.holders[token].pid in alive:
                raise BrokenInvariantError(f"{name} still held by {world.holders[token].agent_id}")
        if set(world.bells.values()) & alive:
            raise BrokenInvariantError(f"doorbells left behind: {world.bells}")

    def _check_quiet(self, state: State, key: tuple[Any, ...], seen: dict[Any, Any]) -> None:
        """Nothing moves but the clock and the faults: no waiter may sleep whose turn has come."""
        world = state.world
        for name, entries in world.queues.items():
            live = [(t, e) for t, e in sorted(entries.items()) if e.rec.pid not in world.dead]
            if not live:
                continue
            _ticket, first = live[0]
            waiter = state.agents[first.rec.pid - 1]
            token = world.locks.get(name, "")
            free = (
                name not in world.locks
                or token is None
                or token == first.rec.token
                or world.holders[token].pid in world.dead
            )
            asleep = self._places[first.rec.pid - 1].op[waiter.node][0] == SLEEP
            if free and asleep:
                raise BrokenInvariantError(
                    f"{first.rec.agent_id} sleeps first in line at {name}, whose turn has come "
                    f"(lock: {token!r})\n{self._trace(key, seen)}"
                )


def _wake_could_be_lost(world: World, pid: int, awaited: Await, sub: Sub) -> bool:
    """Something the sleeping agent `pid` would act on may have happened with nothing to
    wake it (see `Explorer.backstops`)."""
    mine = world.queues.get(sub.name, {}).get(awaited.mine)
    return (
        pid in world.overdue
        or sub.pid is None
        or (sub.ahead is None and sub.bell is None)
        or mine is None
        or mine.rec.pid != pid
    )


def _entries(world: World, name: str) -> frozenset[tuple[str, str]]:
    return frozenset((name, entry.rec.token) for entry in world.queues.get(name, {}).values())


def _queued(world: World) -> frozenset[tuple[str, str]]:
    """(lock, wait token) of every queue entry."""
    return frozenset(
        (name, entry.rec.token) for name, queue in world.queues.items() for entry in queue.values()
    )


def _with(agents: tuple[Agent, ...], n: int, agent: Agent) -> tuple[Agent, ...]:
    return (*agents[:n], agent, *agents[n + 1 :])


def _who(n: int) -> str:
    return AGENT_NAMES[n]


def _name(op: tuple[Any, ...]) -> str:
    return op[0] if isinstance(op[0], str) else op[0].__name__


def _args(op: tuple[Any, ...]) -> str:
    shown = [a[-4:] if isinstance(a, str) and len(a) > 8 else a for a in op[1:] if not callable(a)]
    return "(" + ", ".join(map(str, shown)) + ")"


Move = tuple[str, tuple[tuple[tuple[Any, ...], Any], ...]]
"""A move: who moves and how ("b", "b times out", "tick"), and the operations it carried out
with their results (its text is made only for a trace)."""


def _move_text(move: Move) -> str:
    head, done = move
    if not done:
        return head
    operations = "; ".join(f"{_name(op)}{_args(op)} -> {result!r}" for op, result in done)
    return f"{head} {operations}" if " " not in head else f"{head}; {operations}"


def _identity(to: tuple[int, ...]) -> bool:
    return all(n == m for n, m in enumerate(to))


def _renamed_place(place: tuple[Any, ...], renaming: Renaming) -> tuple[Any, ...]:
    if place == ("done",):
        return place
    return tuple(
        (
            code,
            lasti,
            tuple(
                (name, renaming.pid(value) if name == "pid" else renaming.value(value))
                for name, value in local
            ),
        )
        for code, lasti, local in place
    )
