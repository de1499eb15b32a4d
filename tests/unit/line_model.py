"""A lock directory in memory, for the explorer of the line (test_line_explorer.py).

`World` holds what the lock directory holds (locks and their grants, stagings, queues and
their entries, open doorbells) and what the world around it knows (which processes died,
how much time passed). `AgentOps` is `line.Operations` for one agent (one process) on a
world: each operation does to the world exactly what the lock directory's operation does on
disk (`disk.py`), atomically, and wakes whoever the real wake-ups would wake (`sleep.py`):
a removed entry wakes the waiters watching it, a ring wakes the doorbell's owner, a death
wakes whoever follows that process's exit. Every agent is a process of its own, so nothing
travels by in-process topics here.

Time is coarse: `World.epoch` counts the moments a turn's length passed (the explorer's
"tick"); an entry's turn is over when it was stamped before the last tick. A turn stamp is a
serial number, new at each stamp: the line only asks whether an entry's stamp changed since
it read it (`line._in_line`), so a world's key leaves the serials out and the explorer keeps,
for each waiter, only whether its entry still bears the stamp it read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from lockyard.infra.lockstore.liveness import Liveness
from lockyard.infra.lockstore.lockdir.line import TICKET_DIGITS, Await

AGENT_NAMES = "abcdefgh"
"""Agent n's name, and the letter its tokens start with."""


class Rec(NamedTuple):
    """A holder's or a waiter's record: who, under which token, in which process. (A named
    tuple, not a dataclass: states' keys hash many of them, and a tuple hashes in C.)"""

    agent_id: str
    token: str
    pid: int
    start_time: int | None = 0

    def liveness(self) -> tuple[Liveness, str]:
        raise AssertionError("the line asks `Operations.liveness`, never a record itself")


class Sub(NamedTuple):
    """What a sleeping agent is subscribed to, as `sleep.Sleeper` derives it from the line's
    `Await`: the entry ahead (watched by itself), the process whose exit it follows (when
    seen alive), its doorbell."""

    name: str
    ahead: str | None
    pid: int | None
    bell: str | None

    @classmethod
    def of(cls, name: str, awaited: Await) -> Sub:
        process = awaited.process
        pid = process.pid if awaited.alive and process is not None else None
        return cls(name, awaited.ahead, pid, awaited.bell)


@dataclass(frozen=True, slots=True)
class Entry:
    """A queue entry: its waiter's record and its turn stamp (epoch of the stamp, serial;
    `turned`: stamped since it was queued, not only queued)."""

    rec: Rec
    epoch: int
    stamp: int
    turned: bool = False


@dataclass(slots=True)
class World:
    locks: dict[str, str | None] = field(default_factory=dict)
    """lock name -> its grant's token (None: an empty lock, in mid-release)."""
    holders: dict[str, Rec] = field(default_factory=dict)
    """grant token -> the grant's record, for the grants in locks."""
    stagings: dict[tuple[str, str], Rec | None] = field(default_factory=dict)
    """(lock name, token) -> the staged grant's record (None: made, not written yet)."""
    queues: dict[str, dict[str, Entry]] = field(default_factory=dict)
    bells: dict[str, int] = field(default_factory=dict)
    """token -> the agent listening on that doorbell."""
    dead: frozenset[int] = frozenset()
    """The pids of the processes that died."""
    epoch: int = 0
    stamps: int = 0
    woken: set[int] = field(default_factory=set)
    """Agents woken since they last looked (filled by the operations)."""
    watchers: dict[int, Sub] = field(default_factory=dict)
    """agent -> what it sleeps on (its subscription)."""
    turns: dict[str, tuple[str, int]] = field(default_factory=dict)
    """lock -> (wait token, epoch) of its first entry and when its turn truly began: when it
    became first, or the lock's grant was dropped since (a turn stamped just before it
    became first counts from that stamp). What a pass-over is judged against, never what
    the line reads."""
    broken: str = ""
    """An invariant broken inside an operation (the explorer reports it with its trace)."""
    overdue: set[int] = field(default_factory=set)
    """Sleeping agents a turn's length of time passed for since they subscribed: their
    backstop re-check may find a turn over, which nothing else tells them."""

    def copy(self) -> World:
        return World(
            dict(self.locks),
            dict(self.holders),
            dict(self.stagings),
            {name: dict(entries) for name, entries in self.queues.items()},
            dict(self.bells),
            self.dead,
            self.epoch,
            self.stamps,
            set(self.woken),
            dict(self.watchers),
            dict(self.turns),
            self.broken,
            set(self.overdue),
        )

    def key(self, as_: Renaming | None = None) -> tuple[Any, ...]:
        """Everything that makes two worlds the same world (not the turn stamps' serials: see
        the module's docstring), with the agents renamed `as_` (see `Renaming`). A lock's
        grant and its holder's record are one item. Computed at every move the explorer
        makes: written for speed (lists into frozensets, the renamings' memos indexed)."""
        holders = self.holders
        if as_ is None:
            return (
                frozenset(
                    [
                        (name, None if token is None else holders[token])
                        for name, token in self.locks.items()
                    ]
                ),
                frozenset(
                    [(name, token, record) for (name, token), record in self.stagings.items()]
                ),
                frozenset(
                    [
                        (name, ticket, entry.rec, entry.epoch, entry.turned)
                        for name, queue in self.queues.items()
                        for ticket, entry in queue.items()
                    ]
                ),
                frozenset(self.bells.items()),
                self.dead,
                self.epoch,
                frozenset(self.woken),
                frozenset(self.watchers.items()),
                frozenset([(name, token, epoch) for name, (token, epoch) in self.turns.items()]),
                frozenset(self.overdue),
            )
        text, pid, rec, sub = as_.texts, as_.pids, as_.recs, as_.subs
        return (
            frozenset(
                [
                    (name, None if token is None else rec[holders[token]])
                    for name, token in self.locks.items()
                ]
            ),
            frozenset(
                [
                    (name, text[token], None if record is None else rec[record])
                    for (name, token), record in self.stagings.items()
                ]
            ),
            frozenset(
                [
                    (name, ticket, rec[entry.rec], entry.epoch, entry.turned)
                    for name, queue in self.queues.items()
                    for ticket, entry in queue.items()
                ]
            ),
            frozenset([(text[token], pid[agent]) for token, agent in self.bells.items()]),
            frozenset([pid[agent] for agent in self.dead]),
            self.epoch,
            frozenset([pid[agent] for agent in self.woken]),
            frozenset([(pid[agent], sub[s]) for agent, s in self.watchers.items()]),
            frozenset([(name, text[token], epoch) for name, (token, epoch) in self.turns.items()]),
            frozenset([pid[agent] for agent in self.overdue]),
        )

    def wake_watchers(self, wanted: Callable[[Sub], bool]) -> None:
        for agent, sub in self.watchers.items():
            if wanted(sub):
                self.woken.add(agent)

    def subscribe(self, agent: int, sub: Sub | None) -> None:
        """`agent` holds exactly `sub` from now on (None: nothing): its doorbell with it."""
        old = self.watchers.pop(agent, None)
        if old is not None and old.bell is not None:
            self.bells.pop(old.bell, None)
        self.overdue.discard(agent)
        if sub is not None:
            self.watchers[agent] = sub
            if sub.bell is not None:
                self.bells[sub.bell] = agent

    def die(self, pid: int) -> None:
        """Process `pid` ends: whoever follows its exit (a pidfd) is woken. Its doorbell
        stays (debris), listened to by nobody."""
        self.dead = self.dead | {pid}
        old = self.watchers.pop(pid, None)
        if old is not None and old.bell is not None:
            self.bells.pop(old.bell, None)
        self.woken.discard(pid)
        self.overdue.discard(pid)
        self.wake_watchers(lambda sub: sub.pid == pid)

    def tick(self) -> None:
        """A turn's length of time passes (for every sleeper too)."""
        self.epoch += 1
        self.overdue.update(self.watchers)

    def first_changed(self, name: str) -> None:
        """The first entry of lock `name` may have changed: its turn begins now (or at the
        stamp that announced it)."""
        queue = self.queues.get(name)
        if not queue:
            self.turns.pop(name, None)
            return
        first = queue[min(queue)]
        if self.turns.get(name, ("",))[0] != first.rec.token:
            self.turns[name] = (first.rec.token, first.epoch if first.turned else self.epoch)

    def bears_stamp(self, name: str, entry: str, stamp: int | None) -> bool:
        """Entry `entry` of lock `name` is there and bears turn stamp `stamp`."""
        found = self.queues.get(name, {}).get(entry)
        return found is not None and found.stamp == stamp


class _Memo(dict[Any, Any]):
    """A dict that computes (once) what it lacks: `memo[x]` is a lookup in C once known."""

    def __init__(self, compute: Callable[[Any], Any]) -> None:
        super().__init__()
        self._compute = compute

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self._compute(key)
        return value


class Renaming:
    """Agents of the same script exchanged: agent `n` (pid n + 1, name and token letter
    "abc..."[n]) becomes agent `to[n]`. Identical agents are interchangeable, so a state and
    its renaming are one state (the explorer's symmetry reduction). One renaming serves
    every state, so what it renamed once is remembered (`texts`, `pids`, `recs`, `subs`:
    index them with what to rename)."""

    def __init__(self, to: tuple[int, ...]) -> None:
        self.to = to
        self._letters = {AGENT_NAMES[n]: AGENT_NAMES[m] for n, m in enumerate(to)}
        self.pids = _Memo(lambda pid: pid)
        self.pids.update({n + 1: m + 1 for n, m in enumerate(to)})
        self.texts = _Memo(self._text)
        self.recs = _Memo(self._rec)
        self.subs = _Memo(self._sub)

    def pid(self, pid: int) -> int:
        return self.pids[pid]  # type: ignore[no-any-return]

    def text(self, text: str) -> str:
        """An agent's name or one of its tokens (its letter and a count), renamed; any
        other text (a lock's name, a ticket) as it is."""
        return self.texts[text]  # type: ignore[no-any-return]

    def rec(self, rec: Rec) -> Rec:
        return self.recs[rec]  # type: ignore[no-any-return]

    def sub(self, sub: Sub) -> Sub:
        return self.subs[sub]  # type: ignore[no-any-return]

    def _text(self, text: str) -> str:
        letter = self._letters.get(text[:1])
        if letter is None or not (len(text) == 1 or text[1:].isdigit()):
            return text
        return letter + text[1:]

    def _rec(self, rec: Rec) -> Rec:
        texts = self.texts
        return Rec(texts[rec.agent_id], texts[rec.token], self.pids[rec.pid], rec.start_time)

    def _sub(self, sub: Sub) -> Sub:
        pid = None if sub.pid is None else self.pids[sub.pid]
        bell = None if sub.bell is None else self.texts[sub.bell]
        return Sub(sub.name, sub.ahead, pid, bell)

    def value(self, value: Any) -> Any:
        """Anything a recipe keeps in its local variables (as the explorer freezes them)."""
        if isinstance(value, str):
            return self.texts[value]
        if isinstance(value, Rec):  # before tuples: a record is a named tuple
            return self.recs[value]
        if isinstance(value, tuple):
            return tuple(self.value(item) for item in value)
        if isinstance(value, Await):
            process = value.process
            return Await(
                value.mine,
                value.ahead,
                None if process is None else self.recs[process],
                value.alive,
                None if value.bell is None else self.texts[value.bell],
            )
        return value


class AgentOps:
    """`line.Operations` for agent `pid` (one process of its own) on `world`."""

    def __init__(self, pid: int, name: str) -> None:
        self.pid = pid
        self.name = name
        self.world = World()
        self.tokens = 0

    def new_token(self) -> str:
        self.tokens += 1
        return f"{self.name}{self.tokens}"

    # -- the lock ---------------------------------------------------------------------------

    def lock_exists(self, name: str) -> bool:
        return name in self.world.locks

    def read_holder(self, name: str) -> Rec | None:
        token = self.world.locks.get(name)
        return None if token is None else self.world.holders[token]

    def holds(self, name: str, token: str) -> bool:
        return self.world.locks.get(name, "") == token

    def publish(self, name: str, token: str, record: Rec) -> bool:
        if self.world.locks.get(name) is not None:
            return False
        self._set_lock(name, token, record)
        return True

    def drop_grant(self, name: str, token: str) -> bool:
        if name not in self.world.locks or self.world.locks[name] != token:
            return False
        self.world.locks[name] = None
        del self.world.holders[token]
        queue = self.world.queues.get(name)
        if queue:  # the lock is let go: the first entry's turn begins now
            self.world.turns[name] = (queue[min(queue)].rec.token, self.world.epoch)
        return True

    def free(self, name: str) -> None:
        if name in self.world.locks and self.world.locks[name] is None:
            del self.world.locks[name]

    def _set_lock(self, name: str, token: str | None, record: Rec | None) -> None:
        previous = self.world.locks.get(name)
        assert previous is None, "a rename onto a lock holding a grant must fail"
        self.world.locks[name] = token
        if token is not None and record is not None:
            self.world.holders[token] = Rec(record.agent_id, token, record.pid)

    # -- stagings ---------------------------------------------------------------------------

    def make_staging(self, name: str, token: str) -> bool:
        if (name, token) in self.world.stagings:
            return False
        self.world.stagings[(name, token)] = None
        return True

    def write_staging(self, name: str, token: str, record: Rec) -> bool:
        if (name, token) not in self.world.stagings:
            return False
        self.world.stagings[(name, token)] = record
        return True

    def rename_staging(self, name: str, token: str) -> bool | None:
        if (name, token) not in self.world.stagings:
            return None
        if self.world.locks.get(name) is not None:
            return False
        record = self.world.stagings.pop((name, token))
        self._set_lock(name, None if record is None else token, record)
        return True

    def unstage(self, name: str, token: str) -> bool:
        if self.world.stagings.get((name, token)) is None:
            return False  # no record to unlink (the empty staging is debris for the reaper)
        del self.world.stagings[(name, token)]
        return True

    # -- the queue --------------------------------------------------------------------------

    def queue_exists(self, name: str) -> bool:
        return name in self.world.queues

    def enqueue(self, name: str, token: str, record_for: Callable[[int], Rec]) -> str:
        entries = self.world.queues.setdefault(name, {})
        ticket = max((int(entry) for entry in entries), default=0) + 1
        entry = f"{ticket:0{TICKET_DIGITS}d}"
        self.world.stamps += 1
        entries[entry] = Entry(record_for(ticket), self.world.epoch, self.world.stamps)
        self.world.first_changed(name)
        return entry

    def queue_order(self, name: str) -> Sequence[str]:
        return tuple(sorted(self.world.queues.get(name, ())))

    checked_queue_order = queue_order

    def queued(self, name: str, entry: str) -> bool:
        return entry in self.world.queues.get(name, ())

    def bears(self, name: str, entry: str, token: str) -> bool:
        return self._entry(name, entry, token) is not None

    def _entry(self, name: str, entry: str, token: str) -> Entry | None:
        """Entry `entry` when it is wait `token`'s (on disk: its record, named by the token)."""
        found = self.world.queues.get(name, {}).get(entry)
        return found if found is not None and found.rec.token == token else None

    def entry_token(self, name: str, entry: str) -> str | None:
        found = self.world.queues.get(name, {}).get(entry)
        return None if found is None else found.rec.token

    def waiter(self, name: str, entry: str) -> Rec | None:
        found = self.world.queues.get(name, {}).get(entry)
        return None if found is None else found.rec

    def dequeue(self, name: str, entry: str, token: str) -> bool:
        entries = self.world.queues.get(name)
        if entries is None or self._entry(name, entry, token) is None:
            return False
        self._judge_removal(name, entries[entry].rec)
        del entries[entry]
        if not entries:
            del self.world.queues[name]
        # inotify on that entry wakes whoever waits behind it
        self.world.wake_watchers(lambda sub: sub.name == name and sub.ahead == entry)
        self.world.first_changed(name)
        return True

    def _judge_removal(self, name: str, waiter: Rec) -> None:
        """A live waiter's entry is removed by someone else only to pass it over: it must be
        first, and its turn must have lasted a turn's length (FIFO among the living)."""
        world = self.world
        if waiter.pid == self.pid or waiter.pid in world.dead or world.broken:
            return
        token, began = world.turns.get(name, ("", world.epoch))
        if token != waiter.token or began >= world.epoch:
            why = "its turn began now" if token == waiter.token else "not first"
            world.broken = (
                f"{self.name} passed {waiter.agent_id} over at {name} before its turn lasted "
                f"a turn's length ({why})"
            )

    def stamp_turn(self, name: str, entry: str, token: str) -> bool:
        entries = self.world.queues.get(name, {})
        if self._entry(name, entry, token) is None:
            return False
        self.world.stamps += 1
        entries[entry] = Entry(entries[entry].rec, self.world.epoch, self.world.stamps, True)
        return True

    def turn_stamp(self, name: str, entry: str, token: str) -> int | None:
        found = self._entry(name, entry, token)
        return None if found is None else found.stamp

    def turn_over(self, name: str, entry: str, token: str) -> bool:
        found = self._entry(name, entry, token)
        return found is not None and found.epoch < self.world.epoch

    # -- processes, wake-ups, reports -------------------------------------------------------

    def liveness(self, record: Rec) -> Liveness:
        return Liveness.DEAD if record.pid in self.world.dead else Liveness.ALIVE

    def ring(self, name: str, token: str) -> None:
        listener = self.world.bells.get(token)
        if listener is not None:
            self.world.woken.add(listener)

    def claim_asleep(self, token: str) -> str | None:
        return None  # in-process only: every agent here is a process of its own

    def let_wake(self, token: str, accepted: object) -> None:
        raise AssertionError("no head is ever claimed here")

    def lock_changed(self, name: str) -> None:
        pass  # in-process topics only: every agent here is a process of its own

    def entry_gone(self, name: str, entry: str) -> None:
        pass  # in-process topics only (other processes hear of it by inotify: `dequeue`)

    def reclaimed(self, name: str, holder: Rec, by_agent: str | None) -> object:
        return ("reclaimed", holder.token)

    def passed_over(self, name: str, waiter: Rec) -> None:
        pass

    def waits_without_space(self, key: str, agent: str, error: Exception) -> None:
        raise AssertionError("the model never runs out of space")
