"""Which records a reader wants: by agent, file glob, kind, namespace and time window."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _quote

from .file_glob import BadGlobError, FileGlob
from .record import KINDS, RECORD_START, JournalRecord
from .scan import time_of
from .summary import SegmentSummary

_WILDCARD = re.compile(r"[*?\[]")


class BadQueryError(ValueError):
    """A filter that can match nothing by construction (an unknown kind, an empty window, a
    glob that is not one, an empty or undecodable name); the message says what is wrong,
    the message or the hint what to write instead."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True, slots=True)
class JournalQuery:
    """Records that name one of `agents` (any, when empty), a file matching one of `files`
    (shell-style globs on the repository-relative path; `*` crosses `/`, as in git's
    pathspecs; file_glob.py), of one of `kinds`, in one of `namespaces`, with `since <= time
    < until`; with `began_before`, only the records of a hold or a wait (they say how long it
    lasted: `held`, `waited`) that began before that time. Made by `of`, which checks it."""

    agents: frozenset[str] = frozenset()
    files: tuple[str, ...] = ()
    kinds: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()
    since: float | None = None
    until: float | None = None
    began_before: float | None = None
    globs: tuple[FileGlob, ...] = field(default=(), compare=False, repr=False)
    """`files`, checked: what `file_matches` and PostgreSQL's reader match with."""
    _file_match: Callable[[str], object] | None = field(default=None, compare=False, repr=False)

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
        began_before: float | None = None,
    ) -> JournalQuery:
        """A query; BadQueryError for an unknown kind, a window that ends before it starts,
        a file glob that is not one (file_glob.py), an empty or undecodable agent or
        namespace."""
        wanted = frozenset(kinds)
        unknown = sorted(wanted - set(KINDS))
        if unknown:
            raise BadQueryError(
                f"unknown event kind {', '.join(map(repr, unknown))}",
                f"use one of {', '.join(KINDS)}",
            )
        if since is not None and until is not None and until <= since:
            raise BadQueryError("the time window ends before it begins: --until must be later")
        agents, namespaces = _names("--agent", agents), _names("--namespace", namespaces)
        try:
            globs = tuple(FileGlob.parse(pattern) for pattern in dict.fromkeys(files))
        except BadGlobError as error:
            raise BadQueryError(str(error), error.hint) from None
        matcher = None
        if globs:
            either = "|".join(f"(?:{glob.regex})" for glob in globs)
            matcher = re.compile(either, re.DOTALL).fullmatch
        return cls(
            agents, tuple(glob.pattern for glob in globs), wanted, namespaces, since, until,
            began_before, globs, matcher,
        )  # fmt: skip

    @property
    def narrows_records(self) -> bool:
        """True when it picks records by what they name, not only by time."""
        return bool(
            self.agents or self.files or self.kinds or self.namespaces
            or self.began_before is not None
        )  # fmt: skip

    def in_window(self, t: float) -> bool:
        return (self.since is None or t >= self.since) and (self.until is None or t < self.until)

    def matches(self, record: JournalRecord) -> bool:
        if not self.in_window(record.time):
            return False
        if self.kinds and record.kind not in self.kinds:
            return False
        if self.began_before is not None and not _began_before(record, self.began_before):
            return False
        if self.namespaces and record.namespace not in self.namespaces:
            return False
        if self.agents and not (record.agents() & self.agents):
            return False
        return not self.files or any(self.file_matches(name) for name in record.files())

    def file_matches(self, name: str) -> bool:
        """True when `name` matches one of the query's globs."""
        return self._file_match is not None and self._file_match(name) is not None

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
            tests.append(_contains_any(f'"kind":{_quote(kind)}' for kind in self.kinds))
        if self.namespaces:
            tests.append(_contains_any(f'"ns":{_quote(ns)}' for ns in self.namespaces))
        if self.agents:
            tests.append(_contains_any(_quote(agent) for agent in self.agents))
        if self.files and not any(_WILDCARD.search(pattern) for pattern in self.files):
            tests.append(_contains_any(_quote(name) for name in self.files))
        if self.began_before is not None:
            before = self.began_before
            tests.append(lambda line: _may_begin_before(line, before))
        if not tests:
            return None
        if len(tests) == 1:
            return tests[0]
        return lambda line: all(test(line) for test in tests)


def _names(option: str, names: Iterable[str]) -> frozenset[str]:
    """`names`, each checked: an empty one, or one that is not UTF-8 text (a name the shell
    passed as bytes), can be in no record."""
    checked = frozenset(names)
    for name in checked:
        if not name:
            raise BadQueryError(f"{option} '' is empty", "give a name as `lockyard log` shows it")
        if any("\ud800" <= char <= "\udfff" for char in name):
            raise BadQueryError(
                f"{option} {name!r} is not UTF-8 text: no record names it",
                "write the name as `lockyard log --json` shows it",
            )
    return checked


def _contains_any(texts: Iterable[str]) -> Callable[[bytes], bool]:
    """A test whether a line holds one of `texts` (one search in C for them all)."""
    wanted = sorted({text.encode() for text in texts})
    if len(wanted) == 1:
        only = wanted[0]
        return lambda line: only in line
    search = re.compile(b"|".join(re.escape(text) for text in wanted)).search
    return lambda line: search(line) is not None


def _began_before(record: JournalRecord, before: float) -> bool:
    lasted = record.held if record.held is not None else record.waited
    return lasted is not None and record.time - lasted < before


_FIGURE = re.compile(rb',"(?:held|waited)":([-+.0-9eE]+)')


def _may_begin_before(line: bytes, before: float) -> bool:
    """False when a line's own bytes show a hold or wait that began at `before` or later, or
    show no figure of how long one lasted (a key's quotes never occur inside a JSON string);
    True when unsure. A search costs a hundredth of parsing the line."""
    t = time_of(line)
    if t is None or line.find(RECORD_START, 1) >= 0:
        return True  # torn, or a whole record glued to a torn one: the parser decides
    for figure in _FIGURE.findall(line):
        try:
            if t - float(figure) < before:
                return True
        except ValueError:
            return True
    return False


def _may_share(wanted: frozenset[str], present: set[str] | None) -> bool:
    """False only when some names are wanted and the complete list of those present has none."""
    return not wanted or present is None or bool(present & wanted)


EVERYTHING = JournalQuery()
