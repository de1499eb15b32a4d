"""The timeline's query and the bars and markers of journal records, trusting nothing."""

from __future__ import annotations

import pytest

from lockyard.cli.web.timeline import (
    TimelineQueryError,
    Window,
    item_of,
    items_between,
    parse_window,
)


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
    hold = item_of({"t": 100.0, "kind": "release", "agent": "a", "file": "f", "held": 30.0})
    assert hold == {"k": "hold", "a": "a", "f": "f", "s": 70.0, "e": 100.0}
    handed = item_of(
        {"t": 50.0, "kind": "hand-over", "agent": "b", "other": "a", "file": "f", "held": 5}
    )
    assert handed == {"k": "hold", "a": "a", "f": "f", "s": 45.0, "e": 50.0}
    wait = item_of(
        {"t": 9.0, "kind": "wait-end", "agent": "b", "file": "f", "waited": 4, "outcome": "victim"}
    )
    assert wait == {"k": "wait", "a": "b", "f": "f", "s": 5.0, "e": 9.0, "o": "victim"}


def test_deadlocks_and_denials_are_markers() -> None:
    deadlock = item_of(
        {
            "t": 7.0,
            "kind": "deadlock",
            "agent": "a",
            "victim": "b",
            "file": "",
            "cycle": [["a", "x", "b"], ["b", "y", "a"], ["bad"]],
            "released": ["y"],
        }
    )
    assert deadlock is not None
    assert deadlock["cycle"] == [["a", "x", "b"], ["b", "y", "a"]]
    assert (deadlock["a"], deadlock["x"]) == ("b", "released y")
    denied = item_of(
        {"t": 3.0, "kind": "denied", "agent": "a", "file": "f", "guard": "write", "reason": "no"}
    )
    assert denied == {"k": "denied", "a": "a", "f": "f", "s": 3.0, "x": "write: no"}


@pytest.mark.parametrize(
    "record",
    [
        {},
        {"t": "soon", "kind": "release"},
        {"t": float("nan"), "kind": "release"},
        {"t": 1.0, "kind": 5},
        {"t": 1.0, "kind": "grant", "agent": "a", "file": "f"},  # its bar comes with the release
        {"t": 1.0, "kind": "wait-end", "waited": -3},
        {"t": 1.0, "kind": "something-new"},
    ],
)
def test_records_that_make_no_bar_are_skipped(record: dict[str, object]) -> None:
    assert item_of(record) is None


def test_only_items_in_the_window_are_kept_and_the_latest_when_there_are_too_many() -> None:
    records = [
        {"t": float(t), "kind": "release", "agent": "a", "file": "f", "held": 1.0}
        for t in range(100)
    ]
    items, truncated = items_between(records, Window(50.0, 60.0, live=False))
    assert [item["e"] for item in items] == [float(t) for t in range(50, 62)]
    assert not truncated
    items, truncated = items_between(records, Window(0.0, 100.0, live=False), limit=10)
    assert truncated
    assert items[-1]["e"] == 99.0
    assert len(items) == 10
