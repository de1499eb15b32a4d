"""What `lockyard stats` shows, summed from records; and a sealed segment's summary, cached.

Every figure is a sum or a maximum over single records (a release carries how long the lock
was held, a wait-end how long the wait lasted), so summaries of parts of the journal merge
into the summary of the whole without pairing records across parts. A sealed segment's
summary is written beside it (`00000041.summary`) by the process that sealed it, or by the
first reader that needs it; it says how many bytes of the segment it covers, so a record
appended to a segment after it was sealed (by a writer that had not yet noticed) is read
from the segment itself and merged in.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..atomic_files import open_dir, write_atomic
from .record import (
    DEADLOCK,
    DENIED,
    GRANT,
    GRANTED,
    HAND_OVER,
    OPERATOR_RELEASE,
    RECLAIM,
    RELEASE,
    TIMED_OUT,
    UPGRADE,
    WAIT_END,
    BadRecordError,
    JournalRecord,
    from_dict,
    loads_text,
)
from .scan import records_in

SUMMARY_VERSION: Final = 1
_FIGURED: Final = frozenset(
    {GRANT, HAND_OVER, RELEASE, RECLAIM, OPERATOR_RELEASE, WAIT_END, DENIED}
)
MAX_NAMES: Final = 20_000
"""A segment's summary lists the agents and files it names, up to this many of each (more:
the filters that would use the list read the segment instead)."""


@dataclass(slots=True)
class FileFigures:
    """One file: how often it was held, and what waiting for it cost."""

    holds: int = 0
    held: float = 0.0
    waits: int = 0
    waited: float = 0.0
    longest_wait: float = 0.0
    waits_granted: int = 0
    timeouts: int = 0
    denied: int = 0
    deadlocks: int = 0

    @property
    def contention(self) -> float:
        """The share of its grants that had to wait for it (0 to 1)."""
        return min(1.0, self.waits_granted / self.holds) if self.holds else 0.0

    def add(self, other: FileFigures) -> None:
        self.holds += other.holds
        self.held += other.held
        self.waits += other.waits
        self.waited += other.waited
        self.longest_wait = max(self.longest_wait, other.longest_wait)
        self.waits_granted += other.waits_granted
        self.timeouts += other.timeouts
        self.denied += other.denied
        self.deadlocks += other.deadlocks


@dataclass(slots=True)
class AgentFigures:
    """One agent: locks held and for how long, waits and their time, denials, deadlocks."""

    holds: int = 0
    held: float = 0.0
    waits: int = 0
    waited: float = 0.0
    longest_wait: float = 0.0
    denied: int = 0
    victim: int = 0

    def add(self, other: AgentFigures) -> None:
        self.holds += other.holds
        self.held += other.held
        self.waits += other.waits
        self.waited += other.waited
        self.longest_wait = max(self.longest_wait, other.longest_wait)
        self.denied += other.denied
        self.victim += other.victim


@dataclass(slots=True)
class Stats:
    """Figures of a stretch of the journal; `add` one record, `merge` another stretch."""

    records: int = 0
    first: float | None = None
    last: float | None = None
    kinds: dict[str, int] = field(default_factory=dict)
    files: dict[str, FileFigures] = field(default_factory=dict)
    agents: dict[str, AgentFigures] = field(default_factory=dict)
    deadlocks: list[JournalRecord] = field(default_factory=list)

    def add(self, record: JournalRecord) -> None:
        self.records += 1
        t = record.time
        self.first = t if self.first is None else min(self.first, t)
        self.last = t if self.last is None else max(self.last, t)
        kind = record.kind
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if kind == DEADLOCK:
            self.deadlocks.append(record)
            for name in record.files():
                self._file(name).deadlocks += 1
            if record.victim:
                self._agent(record.victim).victim += 1
            return
        if kind not in _FIGURED:
            return  # a wait's beginning, a pass-over: nothing to sum (its end says it all)
        # A record with no file (a denial the guard could not pin on one) counts for its
        # agent only: a figures sink stands in for the file.
        per_file = self._file(record.file) if record.file else FileFigures()
        per_agent = self._agent(record.agent)
        if kind in (GRANT, HAND_OVER):
            if record.outcome == UPGRADE:
                return  # the read's hold goes on, exclusive now: its grant counted it
            per_file.holds += 1
            per_agent.holds += 1
        elif kind in (RELEASE, RECLAIM, OPERATOR_RELEASE):
            held = record.held or 0.0
            per_file.held += held
            per_agent.held += held
        elif kind == WAIT_END:
            waited = record.waited or 0.0
            per_file.waits += 1
            per_file.waited += waited
            per_file.longest_wait = max(per_file.longest_wait, waited)
            per_agent.waits += 1
            per_agent.waited += waited
            per_agent.longest_wait = max(per_agent.longest_wait, waited)
            if record.outcome == GRANTED:
                per_file.waits_granted += 1
            elif record.outcome == TIMED_OUT:
                per_file.timeouts += 1
        elif kind == DENIED:
            per_file.denied += 1
            per_agent.denied += 1

    def _file(self, name: str) -> FileFigures:
        figures = self.files.get(name)
        if figures is None:
            figures = self.files[name] = FileFigures()
        return figures

    def _agent(self, name: str) -> AgentFigures:
        figures = self.agents.get(name)
        if figures is None:
            figures = self.agents[name] = AgentFigures()
        return figures

    def merge(self, other: Stats) -> None:
        self.records += other.records
        if other.first is not None:
            self.first = other.first if self.first is None else min(self.first, other.first)
        if other.last is not None:
            self.last = other.last if self.last is None else max(self.last, other.last)
        for kind, count in other.kinds.items():
            self.kinds[kind] = self.kinds.get(kind, 0) + count
        for name, file_figures in other.files.items():
            self._file(name).add(file_figures)
        for name, agent_figures in other.agents.items():
            self._agent(name).add(agent_figures)
        self.deadlocks.extend(other.deadlocks)

    @property
    def deadlock_cost(self) -> float:
        """Seconds waited, summed over every agent of every deadlock, until it was broken."""
        return sum(sum(record.costs.values()) for record in self.deadlocks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "first": self.first,
            "last": self.last,
            "kinds": dict(self.kinds),
            "files": {name: _fields(f) for name, f in self.files.items()},
            "agents": {name: _fields(a) for name, a in self.agents.items()},
            "deadlocks": [record.to_dict() for record in self.deadlocks],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Stats:
        return cls(
            records=int(data["records"]),
            first=data["first"],
            last=data["last"],
            kinds={str(k): int(v) for k, v in data["kinds"].items()},
            files={str(k): FileFigures(**v) for k, v in data["files"].items()},
            agents={str(k): AgentFigures(**v) for k, v in data["agents"].items()},
            deadlocks=[from_dict(d) for d in data["deadlocks"]],
        )


def _fields(figures: FileFigures | AgentFigures) -> dict[str, Any]:
    return {name: getattr(figures, name) for name in figures.__slots__}


@dataclass(slots=True)
class SegmentSummary:
    """A sealed segment: its time span, its figures, and the names it mentions (None: more
    than MAX_NAMES, so a filter must read the segment)."""

    covered: int
    """Bytes of the segment this summary covers."""
    stats: Stats
    namespaces: set[str] | None
    agent_names: set[str] | None
    file_names: set[str] | None

    @classmethod
    def of(cls, records: list[JournalRecord], covered: int) -> SegmentSummary:
        stats = Stats()
        namespaces: set[str] = set()
        agents: set[str] = set()
        files: set[str] = set()
        for record in records:
            stats.add(record)
            namespaces.add(record.namespace)
            agents.update(record.agents())
            files.update(record.files())
        return cls(
            covered=covered,
            stats=stats,
            namespaces=namespaces if len(namespaces) <= MAX_NAMES else None,
            agent_names=agents if len(agents) <= MAX_NAMES else None,
            file_names=files if len(files) <= MAX_NAMES else None,
        )

    def merge(self, other: SegmentSummary) -> None:
        self.covered = max(self.covered, other.covered)
        self.stats.merge(other.stats)
        self.namespaces = _union(self.namespaces, other.namespaces)
        self.agent_names = _union(self.agent_names, other.agent_names)
        self.file_names = _union(self.file_names, other.file_names)

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": SUMMARY_VERSION,
                "covered": self.covered,
                "stats": self.stats.to_dict(),
                "namespaces": _sorted(self.namespaces),
                "agents": _sorted(self.agent_names),
                "files": _sorted(self.file_names),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> SegmentSummary | None:
        """The summary, or None when the text is not one this lockyard wrote."""
        try:
            data = loads_text(text)
            if data["version"] != SUMMARY_VERSION:
                return None
            return cls(
                covered=int(data["covered"]),
                stats=Stats.from_dict(data["stats"]),
                namespaces=_names(data["namespaces"]),
                agent_names=_names(data["agents"]),
                file_names=_names(data["files"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError, BadRecordError):
            return None


def _union(a: set[str] | None, b: set[str] | None) -> set[str] | None:
    if a is None or b is None:
        return None
    merged = a | b
    return merged if len(merged) <= MAX_NAMES else None


def _sorted(names: set[str] | None) -> list[str] | None:
    return None if names is None else sorted(names)


def _names(value: Any) -> set[str] | None:
    return None if value is None else {str(name) for name in value}


def summary_path(segment: Path) -> Path:
    return segment.with_suffix(".summary")


def cached_summary(segment: Path) -> SegmentSummary:
    """The summary of a sealed segment: from its cache file when that covers the whole
    segment; else made (from the cache and the bytes after it), and cached when possible."""
    size = segment.stat().st_size
    cache = summary_path(segment)
    summary = None
    with contextlib.suppress(OSError):
        summary = SegmentSummary.from_json(cache.read_bytes())
    if summary is not None and summary.covered == size:
        return summary
    start = summary.covered if summary is not None and summary.covered < size else 0
    records, end = records_in(segment, start)
    fresh = SegmentSummary.of(records, end)
    if start and summary is not None:
        summary.merge(fresh)
        fresh = summary
    _write_cache(cache, fresh.to_json())
    return fresh


def _write_cache(path: Path, text: str) -> None:
    """Publish the cache file whole (a reader sees the old one or the new one), or not at
    all: a cache is never needed (the reader makes it again), so errors are ignored."""
    with contextlib.suppress(OSError), open_dir(path.parent) as dir_fd:
        # 0600, as the journal's segments.
        write_atomic(dir_fd, path.name, text.encode("ascii"), mode=0o600, temp_prefix=".tmp-")
