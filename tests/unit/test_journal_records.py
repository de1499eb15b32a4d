"""Journal records: one line of JSON each, read back whole, cut short when too long, and
never mistaken for something else when damaged or hostile."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lockyard.infra.lockstore.journal.record import (
    DEADLOCK,
    GRANT,
    KINDS,
    MAX_RECORD_BYTES,
    RECORD_START,
    BadRecordError,
    CycleStep,
    JournalRecord,
    LockLines,
    deadlock_record,
    decode,
    encode,
)
from lockyard.infra.lockstore.journal.scan import parse_line, time_of


def grant(**changes: object) -> JournalRecord:
    fields: dict[str, object] = {
        "time": 1_764_245_100.25, "kind": GRANT, "namespace": "github.com/acme/app",
        "agent": "codex-4242", "file": "src/models.py", "session": "4242.99", "pid": 4242,
        "host": "build-1",
    }  # fmt: skip
    fields.update(changes)
    return JournalRecord(**fields)  # type: ignore[arg-type]


def a_deadlock() -> JournalRecord:
    return deadlock_record(
        time=1_764_245_200.5, namespace="github.com/acme/app",
        cycle=[CycleStep("a1", "x.py", "a2"), CycleStep("a2", "y.py", "a1")], victim="a2",
        victim_waits_on="y.py", released=["x.py"], costs={"a1": 1.5, "a2": 2.25},
        session="7", pid=7, host="h",
    )  # fmt: skip


def test_a_record_is_one_ascii_line_starting_with_its_time() -> None:
    line = encode(grant(fence=12, held=None))
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert line.startswith(RECORD_START)
    assert time_of(line) == pytest.approx(1_764_245_100.25)
    assert json.loads(line)["fence"] == 12


@pytest.mark.parametrize("record", [grant(fence=3), grant(held=2.5, kind="release"), a_deadlock()])
def test_a_record_reads_back_equal(record: JournalRecord) -> None:
    assert decode(encode(record)) == record


def test_a_deadlock_names_every_agent_and_file_of_its_cycle() -> None:
    record = a_deadlock()
    assert record.kind == DEADLOCK
    assert record.agent == "a2"
    assert record.agents() == {"a1", "a2"}
    assert record.files() == {"x.py", "y.py"}


@given(
    agent=st.text(min_size=1, max_size=40),
    file=st.text(max_size=200),
    reason=st.text(max_size=300),
)
def test_any_text_in_any_field_reads_back_as_the_same_text(
    agent: str, file: str, reason: str
) -> None:
    record = grant(agent=agent, file=file, reason=reason)
    line = encode(record)
    assert line.isascii()
    assert parse_line(line.rstrip(b"\n")) == record


def test_a_record_too_long_is_cut_short_and_says_so() -> None:
    record = grant(kind="denied", reason="é" * 50_000, file="<script>" * 2000, guard="shell")
    line = encode(record)
    assert len(line) <= MAX_RECORD_BYTES
    back = decode(line)
    assert back.truncated
    assert back.reason is not None
    assert back.reason.startswith("é")
    many = a_deadlock()
    many.cycle = tuple(CycleStep(f"agent-{i}" * 30, f"f{i}" * 200, "x" * 300) for i in range(500))
    assert len(encode(many)) <= MAX_RECORD_BYTES


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"not json",
        b'{"t":1,"kind":"gr',  # torn
        b'{"t":"soon","kind":"grant","ns":"n","agent":"a","file":"f","session":"s","pid":1,"host":"h"}',
        b'{"t":1,"kind":"grant","ns":"n","agent":"a","file":"f","session":"s","pid":"1","host":"h"}',
        b'{"t":1,"kind":"grant","ns":"n","agent":"a","file":"f","session":"s","pid":1}',
        b'{"t":1,"kind":"grant","ns":"n","agent":7,"file":"f","session":"s","pid":1,"host":"h"}',
        b'{"t":1,"kind":"deadlock","ns":"n","agent":"a","file":"f","session":"s","pid":1,'
        b'"host":"h","cycle":[["a","b"]]}',
        b"[1, 2, 3]",
        b'{"t":1,"kind":"\xff\xfe"}',
    ],
)
def test_a_damaged_or_foreign_line_is_no_record(line: bytes) -> None:
    assert parse_line(line) is None
    with pytest.raises(BadRecordError):
        decode(line)


def test_a_whole_record_after_a_torn_one_on_the_same_line_is_found() -> None:
    torn = encode(grant(agent="first"))[:40]
    whole = encode(grant(agent="second")).rstrip(b"\n")
    assert parse_line(torn + whole) == grant(agent="second")


def test_every_kind_has_a_distinct_name() -> None:
    assert len(set(KINDS)) == len(KINDS) == 10


@given(
    agent=st.text(max_size=40),
    file=st.text(max_size=12_000),
    waited=st.none() | st.floats(min_value=0, max_value=1e6),
    held=st.none() | st.floats(min_value=0, max_value=1e6),
    outcome=st.none() | st.sampled_from(["granted", "timed-out"]),
)
def test_the_lock_paths_lines_are_the_bytes_encode_writes(
    agent: str, file: str, waited: float | None, held: float | None, outcome: str | None
) -> None:
    record = grant(agent=agent, file=file, waited=waited, held=held, outcome=outcome)
    lines = LockLines(record.namespace, record.session, record.pid, record.host)
    made = lines.line(record.time, record.kind, agent, file, waited=waited, held=held,
                      outcome=outcome)  # fmt: skip
    assert made == encode(record)
    assert len(made) <= MAX_RECORD_BYTES


def test_a_lone_surrogate_escape_reads_as_a_replacement_character_and_a_pair_as_its_character() -> (
    None
):
    line = encode(grant(agent="x", file="y")).replace(b'"x"', b'"a\\ud800b"')
    line = line.replace(b'"y"', b'"\\ud83d\\ude00\\udcff"')
    record = decode(line)
    assert record.agent == "a\ufffdb"
    assert record.file == "\U0001f600\ufffd"
    assert record.to_json().isascii()
    record.file.encode("utf-8")  # printable, sendable: no lone surrogate is left
