"""A query's test on a line's bytes (what lets a reader skip parsing most of a big journal)
never drops a record the query matches, and drops what it can; a filter that can match
nothing by construction is refused with what to write instead."""

from __future__ import annotations

import fnmatch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lockyard.infra.lockstore.journal.query import BadQueryError, JournalQuery
from lockyard.infra.lockstore.journal.record import KINDS, JournalRecord, decode, encode

T0 = 1_764_245_100.0
names = st.sampled_from(["agent-1", "held", "waited", ',"held":0', '"kind":"release"', "é<b>"])
figures = st.none() | st.floats(min_value=0, max_value=1e6) | st.sampled_from([0.0, 10.0, 10.5])


@st.composite
def records(draw: st.DrawFn) -> JournalRecord:
    return JournalRecord(
        time=T0 + draw(st.floats(min_value=0, max_value=100)), kind=draw(st.sampled_from(KINDS)),
        namespace=draw(st.sampled_from(["ns", "other"])), agent=draw(names), file=draw(names),
        session="1.1", pid=1, host="h", waited=draw(figures), held=draw(figures),
        reason=draw(st.none() | names), other=draw(st.none() | names),
        costs=draw(st.dictionaries(names, st.floats(min_value=0, max_value=1e3), max_size=2)),
    )  # fmt: skip


@st.composite
def queries(draw: st.DrawFn) -> JournalQuery:
    return JournalQuery.of(
        kinds=draw(st.sets(st.sampled_from(KINDS), max_size=4)),
        agents=draw(st.sets(names, max_size=2)),
        files=draw(st.sets(names, max_size=2)),
        namespaces=draw(st.sets(st.sampled_from(["ns", "other"]), max_size=1)),
        began_before=draw(st.none() | st.floats(min_value=T0 - 20, max_value=T0 + 120)),
    )


@given(record=records(), query=queries())
def test_a_lines_test_passes_every_record_the_query_matches(
    record: JournalRecord, query: JournalQuery
) -> None:
    line = encode(record).rstrip(b"\n")
    keep = query.prefilter()
    if query.matches(decode(line)):
        assert keep is None or keep(line)


@given(record=records(), before=st.floats(min_value=T0 - 20, max_value=T0 + 120))
def test_a_lines_test_passes_every_hold_or_wait_that_began_before_the_time(
    record: JournalRecord, before: float
) -> None:
    query = JournalQuery.of(began_before=before)
    line = encode(record).rstrip(b"\n")
    keep = query.prefilter()
    assert keep is not None
    assert keep(line) or not query.matches(decode(line))


def test_only_holds_and_waits_that_began_before_the_time_match() -> None:
    query = JournalQuery.of(began_before=T0 + 10)
    release = JournalRecord(T0 + 12, "release", "ns", "a", "f", "1.1", 1, "h", held=2.5)
    wait_end = JournalRecord(T0 + 12, "wait-end", "ns", "a", "f", "1.1", 1, "h", waited=1.5)
    grant = JournalRecord(T0 + 5, "grant", "ns", "a", "f", "1.1", 1, "h")
    assert query.matches(release)
    assert not query.matches(wait_end)
    assert not query.matches(grant)  # says nothing of how long anything lasted


def test_the_bytes_of_a_hold_that_began_later_are_dropped_unparsed() -> None:
    keep = JournalQuery.of(kinds=["release"], began_before=T0 + 10).prefilter()
    assert keep is not None

    def line(held: float, **more: str) -> bytes:
        record = JournalRecord(T0 + 12, "release", "ns", "a", "f", "1.1", 1, "h", held=held)
        for name, value in more.items():
            setattr(record, name, value)
        return encode(record).rstrip(b"\n")

    assert keep(line(2.5))
    wait = JournalRecord(T0 + 12, "wait-end", "ns", "a", "f", "1.1", 1, "h", waited=2.5)
    assert keep(encode(wait)) is False  # a kind the query does not take
    waits = JournalQuery.of(kinds=["wait-end"], began_before=T0 + 10).prefilter()
    assert waits is not None
    assert waits(encode(wait))
    assert not keep(line(1.5))
    assert not keep(line(1.5, file=',"held":9.0', reason='"held":9'))  # quoted: not a key
    torn = b'{"t":1764245112.0,"kind":"release","ns":"n' + line(2.5)
    assert keep(torn)  # a whole record glued to a torn one: left to the parser


@given(
    glob=st.text("ab/*?[]!-\\.^", min_size=1, max_size=8),
    name=st.text("ab/[]!-\\.^", max_size=6),
)
def test_a_file_glob_matches_what_fnmatch_matches_or_is_refused(glob: str, name: str) -> None:
    try:
        query = JournalQuery.of(files=[glob])
    except BadQueryError:
        return
    assert query.file_matches(name) == fnmatch.fnmatchcase(name, glob)


@pytest.mark.parametrize(
    ("filters", "says", "hint"),
    [
        ({"files": ["["]}, "the '[' at character 1 is never closed", "[[]"),
        ({"files": ["src/[!]"]}, "the '[' at character 5 is never closed", "[a-z]"),
        ({"files": ["f[z-a].py"]}, "the range z-a is backwards", "write a-z"),
        ({"files": [""]}, "--file '' is empty", "src/*.py"),
        ({"files": ["./src/a.py"]}, "not a path from the repository's root", "write src/a.py"),
        ({"files": ["/home/me/app/a.py"]}, "not a path from the repository's root", "not /home"),
        ({"files": ["src/\udcff.py"]}, "is not UTF-8 text", "lockyard log --json"),
        ({"agents": [""]}, "--agent '' is empty", "as `lockyard log` shows it"),
        ({"namespaces": [""]}, "--namespace '' is empty", "as `lockyard log` shows it"),
        ({"agents": ["\udcff"]}, "--agent '\\udcff' is not UTF-8 text", "--json"),
        ({"kinds": [""]}, "unknown event kind ''", "grant, wait-begin"),
        ({"since": T0, "until": T0}, "ends before it begins", None),
    ],
)
def test_a_filter_that_can_match_nothing_says_why_and_what_to_write(
    filters: dict[str, object], says: str, hint: str | None
) -> None:
    with pytest.raises(BadQueryError) as refused:
        JournalQuery.of(**filters)  # type: ignore[arg-type]
    assert says in str(refused.value)
    assert hint is None or (refused.value.hint is not None and hint in refused.value.hint)


def test_a_literal_bracket_or_star_is_written_as_a_set() -> None:
    query = JournalQuery.of(files=["src/[[]x].py", "[*]"])
    assert query.file_matches("src/[x].py")
    assert query.file_matches("*")
    assert not query.file_matches("src/x.py")
