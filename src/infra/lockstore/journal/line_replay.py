"""Each lock's line of waiters, rebuilt from the journal, and whether every granted wait
went to the head of its line (first come, first served).

On PostgreSQL the journal is written by triggers in the transactions that change the line
(`journal_schema.py`), so the records of one lock come in the order of its line's changes:
a wait-begin when a waiter takes its ticket, a wait-end when it leaves (granted, or not).
Replaying them gives the server's own order, not the order in which clients reported their
waits. On the lock directory the records are written by each process after its change, so
their order is not proved to be the line's order: the replay is meant for PostgreSQL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from .record import GRANTED, WAIT_BEGIN, WAIT_END, JournalRecord


@dataclass(frozen=True, slots=True)
class LineGrant:
    """One wait that ended granted, and its lock's line as it was at that moment."""

    namespace: str
    file: str
    agent: str
    line: tuple[str, ...]
    """The waiters in line when the grant was made, head first (the granted one included)."""
    earlier_ends: tuple[tuple[str, str], ...]
    """(agent, outcome) of how each agent's last earlier wait for this lock had ended."""

    @property
    def to_head(self) -> bool:
        return self.line[0] == self.agent


@dataclass(frozen=True, slots=True)
class LineReplay:
    grants: tuple[LineGrant, ...]

    @property
    def to_head(self) -> int:
        return sum(grant.to_head for grant in self.grants)

    @property
    def out_of_order(self) -> tuple[LineGrant, ...]:
        """The grants that went past the head of their line: FIFO broken."""
        return tuple(grant for grant in self.grants if not grant.to_head)


@dataclass
class _Line:
    waiting: list[str] = field(default_factory=list)
    ended: dict[str, str] = field(default_factory=dict)


def replay_lines(records: Iterable[JournalRecord]) -> LineReplay:
    """Replay wait-begin / wait-end records (oldest first) lock by lock.

    A wait whose beginning is not among the records (it began before the window read) is
    left out: where it stood in line is unknown."""
    lines: dict[tuple[str, str], _Line] = defaultdict(_Line)
    grants: list[LineGrant] = []
    for record in records:
        if record.kind not in (WAIT_BEGIN, WAIT_END):
            continue
        key = (record.namespace, record.file)
        line = lines[key]
        if record.kind == WAIT_BEGIN:
            line.waiting.append(record.agent)
            continue
        if record.agent not in line.waiting:
            continue
        # A granted wait ends in the statement that grants it (its hand-over record may
        # come before or after): this is when the server chose it.
        if record.outcome == GRANTED:
            grants.append(
                LineGrant(*key, record.agent, tuple(line.waiting), tuple(line.ended.items()))
            )
        line.waiting.remove(record.agent)
        line.ended[record.agent] = record.outcome or "?"
    return LineReplay(tuple(grants))
