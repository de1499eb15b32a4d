"""What the journal shows of the act on `tests/`: the directory lock, the readers together,
the person's `lockyard lock`.

Read from the run's journal records alone (not from what the agents said they did), so the
summary states only what the lock service recorded: a hold is a grant or hand-over of a key
to an agent, until that agent's release of it. Pure, so every rule is unit-tested.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...infra.lockstore import JournalRecord
from .person import PersonRun
from .scenario import PERSON, TestsAct

HOLD_STARTS = ("grant", "hand-over")
HOLD_ENDS = ("release", "operator-release", "reclaim")


@dataclass(frozen=True)
class Hold:
    """One hold of `key` by `agent` as the journal has it (`end` None: never released)."""

    agent: str
    key: str
    start: float
    end: float | None
    pid: int

    def seconds(self) -> float | None:
        return None if self.end is None else max(0.0, self.end - self.start)


@dataclass(frozen=True)
class ActReport:
    """The act as recorded; a None figure means the journal does not show that part."""

    directory: str
    files: int
    writer: str
    writer_held_s: float | None
    readers: tuple[str, ...]
    readers_together_s: float | None
    """How long every reader held the directory at once (shared)."""
    person_command: str
    person_pid: int | None
    person_exit: int | None
    person_waited_s: float | None
    """The person's wait in line, from its wait-end record (None: it never waited)."""
    person_held_s: float | None
    person_in_own_process: bool
    """Its records name another process than the agents' (the demo's own)."""
    person_said: tuple[str, ...]

    def problems(self) -> list[str]:
        """Each part of the act the journal does not show."""
        found = []
        if self.writer_held_s is None:
            found.append(f"the journal shows no lock of {self.directory} held by {self.writer}")
        if self.readers_together_s is None:
            readers = " and ".join(self.readers)
            found.append(f"the journal shows {readers} never holding {self.directory} together")
        if self.person_held_s is None or not self.person_in_own_process:
            found.append("the journal shows no lock held by the person's own process")
        return found


def holds_of(records: Iterable[JournalRecord]) -> list[Hold]:
    """Every hold the records show, in the order they began."""
    open_holds: dict[tuple[str, str], tuple[float, int]] = {}
    holds: list[Hold] = []
    for record in sorted(records, key=lambda r: r.time):
        pair = (record.agent, record.file)
        if record.kind in HOLD_STARTS and pair not in open_holds:
            open_holds[pair] = (record.time, record.pid)
        elif record.kind in HOLD_ENDS and pair in open_holds:
            start, pid = open_holds.pop(pair)
            holds.append(Hold(record.agent, record.file, start, record.time, pid))
    holds += [Hold(a, k, start, None, pid) for (a, k), (start, pid) in open_holds.items()]
    return sorted(holds, key=lambda hold: hold.start)


def together(holds: Sequence[Hold]) -> float | None:
    """How long all `holds` overlapped (None: they never did, or one is missing)."""
    if not holds or any(hold.end is None for hold in holds):
        return None
    overlap = min(h.end or 0.0 for h in holds) - max(h.start for h in holds)
    return overlap if overlap > 0 else None


def act_report(
    act: TestsAct,
    records: Sequence[JournalRecord],
    keys: dict[str, str],
    person: PersonRun,
    own_pid: int,
) -> ActReport:
    """The act as `records` (the run's journal) show it; `keys` maps names to lock keys."""
    directory = keys[act.directory]
    holds = holds_of(records)

    def longest(agent: str, key: str) -> Hold | None:
        mine = [h for h in holds if h.agent == agent and h.key == key and h.end is not None]
        return max(mine, key=lambda h: h.seconds() or 0.0, default=None)

    writer = longest(act.writer, directory)
    readers = [longest(reader, directory) for reader in act.readers]
    person_hold = longest(PERSON, keys[act.person_file])
    waits = [r.waited for r in records if r.agent == PERSON and r.kind == "wait-end"]
    return ActReport(
        directory=act.directory,
        files=len(act.files),
        writer=act.writer,
        writer_held_s=None if writer is None else writer.seconds(),
        readers=act.readers,
        readers_together_s=None if None in readers else together([r for r in readers if r]),
        person_command=person.command,
        person_pid=person.pid,
        person_exit=person.exit_status,
        person_waited_s=sum(w for w in waits if w is not None) if waits else None,
        person_held_s=None if person_hold is None else person_hold.seconds(),
        person_in_own_process=person_hold is not None and person_hold.pid != own_pid,
        person_said=tuple(person.said),
    )
