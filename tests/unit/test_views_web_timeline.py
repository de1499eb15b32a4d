"""The timeline's query and the bars and markers of journal records, trusting nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lockyard.cli.web.timeline import (
    TimelineQueryError,
    Window,
    item_of,
    items_between,
    parse_window,
    read_window,
)
from lockyard.infra.lockstore import FileJournal, JournalRecord
from lockyard.infra.lockstore.journal.files import JournalFiles, journal_dir
from lockyard.infra.lockstore.journal.record import CycleStep


def rec(t: float, kind: str, agent: str = "a", file: str = "f", **extra: Any) -> JournalRecord:
    return JournalRecord(t, kind, "ns", agent, file, "1.1", 1, "h", **extra)


def test_no_parameters_mean_the_last_hour_until_now() -> None:
    window = parse_window({}, now=10_000.0)
    assert window == Window(6400.0, 10_000.0, live=True)


def test_a_chosen_window_is_not_live() -> None:
    window = parse_window({"from": ["100"], "to": ["200.5"]}, now=10_000.0)
    assert window == Window(100.0, 200.5, live=False)


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"from": ["soon"]}, "seconds since the epoch"),
        ({"from": ["inf"]}, "seconds since the epoch"),
        ({"to": ["-5"]}, "seconds since the epoch"),
        ({"from": ["1" * 40]}, "seconds since the epoch"),
        ({"from": ["300"], "to": ["200"]}, "before"),
        ({"from": ["1"], "to": ["9999999999"]}, "31 days"),
        ({"to": ["1", "2"]}, "once"),
        ({"by": ["file"]}, "unknown parameter"),
    ],
)
def test_a_malformed_query_is_refused_with_what_to_pass(
    params: dict[str, list[str]], says: str
) -> None:
    with pytest.raises(TimelineQueryError, match=says):
        parse_window(params, now=10_000.0)


def test_a_release_is_a_whole_hold_and_a_wait_end_a_whole_wait() -> None:
    hold = item_of(rec(100.0, "release", held=30.0))
    assert hold == {"k": "hold", "a": "a", "f": "f", "s": 70.0, "e": 100.0}
    handed = item_of(rec(50.0, "hand-over", agent="b", other="a", held=5.0))
    assert handed == {"k": "hold", "a": "a", "f": "f", "s": 45.0, "e": 50.0}
    wait = item_of(rec(9.0, "wait-end", agent="b", waited=4.0, outcome="victim"))
    assert wait == {"k": "wait", "a": "b", "f": "f", "s": 5.0, "e": 9.0, "o": "victim"}


def test_deadlocks_and_denials_are_markers() -> None:
    cycle = (CycleStep("a", "x", "b"), CycleStep("b", "y", "a"))
    deadlock = item_of(rec(7.0, "deadlock", file="", victim="b", cycle=cycle, released=("y",)))
    assert deadlock is not None
    assert deadlock["cycle"] == [["a", "x", "b"], ["b", "y", "a"]]
    assert (deadlock["a"], deadlock["x"]) == ("b", "released y")
    denied = item_of(rec(3.0, "denied", guard="write", reason="no"))
    assert denied == {"k": "denied", "a": "a", "f": "f", "s": 3.0, "x": "write: no"}


@pytest.mark.parametrize(
    "record",
    [
        rec(float("nan"), "release", held=1.0),
        rec(1.0, "grant"),  # its bar comes with the release
        rec(1.0, "wait-end", waited=-3.0),
        rec(1.0, "release", held=float("inf")),
        rec(1.0, "hand-over"),  # the lock directory's: the release before it has the hold
        rec(1.0, "wait-begin"),
    ],
)
def test_records_that_make_no_bar_are_skipped(record: JournalRecord) -> None:
    assert item_of(record) is None


def test_only_items_in_the_window_are_kept_and_the_latest_when_there_are_too_many() -> None:
    records = [rec(float(t), "release", held=1.0) for t in range(100)]
    items, truncated = items_between(records, Window(50.0, 60.0, live=False))
    assert [item["e"] for item in items] == [float(t) for t in range(50, 62)]
    assert not truncated
    items, truncated = items_between(records, Window(0.0, 100.0, live=False), limit=10)
    assert truncated
    assert items[-1]["e"] == 99.0
    assert len(items) == 10


@pytest.fixture
def journal(tmp_path: Path) -> FileJournal:
    """A journal of 300 s: each second a grant, then a release of a 0.5 s hold."""
    writer = JournalFiles(journal_dir(tmp_path))
    for t in range(1000, 1300):
        writer.append(rec(float(t), "grant"))
        writer.append(rec(t + 0.5, "release", held=0.5))
    writer.close()
    return FileJournal(tmp_path)


def test_a_window_that_ends_now_gets_its_latest_items_and_says_when_some_were_left_out(
    journal: FileJournal,
) -> None:
    items, truncated = read_window(journal, Window(1100.0, 1300.0, live=True), limit=50)
    assert truncated
    assert [item["e"] for item in items] == [t + 0.5 for t in range(1250, 1300)]
    items, truncated = read_window(journal, Window(1290.0, 1300.0, live=True), limit=50)
    assert not truncated
    assert [item["e"] for item in items] == [t + 0.5 for t in range(1290, 1300)]


def test_a_chosen_window_gets_the_holds_that_ended_after_it(journal: FileJournal) -> None:
    items, truncated = read_window(journal, Window(1010.2, 1012.2, live=False))
    assert not truncated
    assert [(item["s"], item["e"]) for item in items] == [
        (1010.0, 1010.5), (1011.0, 1011.5), (1012.0, 1012.5)
    ]  # fmt: skip


def test_a_chosen_window_gets_a_wait_that_began_in_it_and_none_that_began_after(
    tmp_path: Path,
) -> None:
    writer = JournalFiles(journal_dir(tmp_path))
    writer.append(rec(1030.0, "wait-end", agent="w", waited=15.0, outcome="granted"))
    writer.append(rec(1035.0, "release", agent="late", held=5.0))  # began after the window
    writer.append(rec(1038.0, "deadlock", agent="v"))  # a marker after the window
    writer.close()
    items, _ = read_window(FileJournal(tmp_path), Window(1000.0, 1020.0, live=False))
    assert [(item["k"], item["a"], item["s"], item["e"]) for item in items] == [
        ("wait", "w", 1015.0, 1030.0)
    ]
