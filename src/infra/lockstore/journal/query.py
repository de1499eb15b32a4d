"""Which records a reader wants: by agent, file glob, kind, namespace and time window."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _quote

from .record import KINDS, JournalRecord
from .summary import SegmentSummary

_WILDCARD = re.compile(r"[*?\[]")


class BadQueryError(ValueError):
    """A filter that can match nothing by construction (an unknown kind, an empty window)."""


@dataclass(frozen=True, slots=True)
class JournalQuery:
    """Records that name one of `agents` (any, when empty), a file matching one of `files`
    (shell-style globs on the repository-relative path; `*` crosses `/`, as in git's
    pathspecs), of one of `kinds`, in one of `namespaces`, with `since <= time < until`."""

    agents: frozenset[str] = frozenset()
    files: tuple[str, ...] = ()
    kinds: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()
    since: float | None = None
    until: float | None = None

    @classmethod
    def of(
        cls,
        *,
        agents: Iterable[str] = (),
        files: Iterable[str] = (),
        kinds: Iterable[str] = (),
        namespaces: Iterable[str] = (),
        since: float | None = None,
        until: float | None = None,
    ) -> JournalQuery:
        """A query; BadQueryError for an unknown kind or a window that ends before it starts."""
        wanted = frozenset(kinds)
        unknown = sorted(wanted - set(KINDS))
        if unknown:
            raise BadQueryError(
                f"unknown event kind {', '.join(unknown)}: use one of {', '.join(KINDS)}"
            )
        if since is not None and until is not None and until <= since:
            raise BadQueryError("the time window ends before it begins: --until must be later")
        return cls(frozenset(agents), tuple(files), wanted, frozenset(namespaces), since, until)

    @property
    def narrows_records(self) -> bool:
        """True when it picks records by what they name, not only by time."""
        return bool(self.agents or self.files or self.kinds or self.namespaces)

    def in_window(self, t: float) -> bool:
        return (self.since is None or t >= self.since) and (self.until is None or t < self.until)

    def matches(self, record: JournalRecord) -> bool:
        if not self.in_window(record.time):
            return False
        if self.kinds and record.kind not in self.kinds:
            return False
        if self.namespaces and record.namespace not in self.namespaces:
            return False
        if self.agents and not (record.agents() & self.agents):
            return False
        return not self.files or any(self.file_matches(name) for name in record.files())

    def file_matches(self, name: str) -> bool:
        """True when `name` matches one of the query's globs."""
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.files)

    def could_match(self, summary: SegmentSummary) -> bool:
        """False when no record a segment's summary describes can match (skip the segment)."""
        stats = summary.stats
        if stats.records == 0:
            return False
        if self.since is not None and stats.last is not None and stats.last < self.since:
            return False
        if self.until is not None and stats.first is not None and stats.first >= self.until:
            return False
        if self.kinds and not any(stats.kinds.get(kind) for kind in self.kinds):
            return False
        if not _may_share(self.namespaces, summary.namespaces):
            return False
        if not _may_share(self.agents, summary.agent_names):
            return False
        if self.files and summary.file_names is not None:
            return any(self.file_matches(name) for name in summary.file_names)
        return True

    def prefilter(self) -> Callable[[bytes], bool] | None:
        """A test on a line's raw bytes that every matching record passes (most others
        fail it), to skip parsing; None when there is no cheap test."""
        tests: list[Callable[[bytes], bool]] = []
        if self.kinds:
            kinds = [f'"kind":{_quote(kind)}'.encode() for kind in self.kinds]
            tests.append(lambda line: any(k in line for k in kinds))
        if self.namespaces:
            spaces = [f'"ns":{_quote(ns)}'.encode() for ns in self.namespaces]
            tests.append(lambda line: any(n in line for n in spaces))
        if self.agents:
            agents = [_quote(agent).encode() for agent in self.agents]
            tests.append(lambda line: any(a in line for a in agents))
        if self.files and not any(_WILDCARD.search(pattern) for pattern in self.files):
            files = [_quote(name).encode() for name in self.files]
            tests.append(lambda line: any(f in line for f in files))
        if not tests:
            return None
        if len(tests) == 1:
            return tests[0]
        return lambda line: all(test(line) for test in tests)


def _may_share(wanted: frozenset[str], present: set[str] | None) -> bool:
    """False only when some names are wanted and the complete list of those present has none."""
    return not wanted or present is None or bool(present & wanted)


EVERYTHING = JournalQuery()
