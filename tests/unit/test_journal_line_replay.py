"""Each lock's line rebuilt from hand-made journal records: a grant to the head of its line
counts as first come first served, and a grant that went past the head is caught."""

from __future__ import annotations

from lockyard.infra.lockstore import JournalRecord, replay_lines
from lockyard.infra.lockstore.journal.record import (
    GRANT,
    GRANTED,
    RELEASE,
    TIMED_OUT,
    WAIT_BEGIN,
    WAIT_END,
)

NS = "github.com/acme/app"


def record(kind: str, agent: str, file: str = "/r/a.py", outcome: str | None = None,
           namespace: str = NS) -> JournalRecord:  # fmt: skip
    return JournalRecord(
        time=0.0, kind=kind, namespace=namespace, agent=agent, file=file, session="1",
        pid=1, host="h", outcome=outcome,
    )  # fmt: skip


def begin(agent: str, file: str = "/r/a.py", namespace: str = NS) -> JournalRecord:
    return record(WAIT_BEGIN, agent, file, namespace=namespace)


def end(agent: str, outcome: str = GRANTED, file: str = "/r/a.py", namespace: str = NS
        ) -> JournalRecord:  # fmt: skip
    return record(WAIT_END, agent, file, outcome, namespace)


def test_grants_in_ticket_order_all_go_to_the_head() -> None:
    replay = replay_lines([
        record(GRANT, "holder"), begin("a"), begin("b"), begin("c"),
        record(RELEASE, "holder"), end("a"), record(RELEASE, "a"), end("b"), end("c"),
    ])  # fmt: skip
    assert [grant.agent for grant in replay.grants] == ["a", "b", "c"]
    assert replay.to_head == 3
    assert replay.out_of_order == ()
    assert replay.grants[0].line == ("a", "b", "c")


def test_a_grant_past_the_head_of_its_line_is_caught() -> None:
    replay = replay_lines([begin("a"), begin("b"), begin("c"), end("b"), end("a"), end("c")])
    assert replay.to_head == 2
    assert len(replay.grants) == 3
    (broken,) = replay.out_of_order
    assert (broken.agent, broken.line, broken.file) == ("b", ("a", "b", "c"), "/r/a.py")


def test_a_wait_that_ended_otherwise_leaves_the_line_and_is_remembered() -> None:
    replay = replay_lines([begin("a"), begin("b"), end("a", TIMED_OUT), end("b")])
    (grant,) = replay.grants
    assert grant.to_head
    assert grant.line == ("b",)
    assert grant.earlier_ends == (("a", TIMED_OUT),)


def test_each_lock_of_each_namespace_has_its_own_line() -> None:
    replay = replay_lines([
        begin("a", "/r/a.py"), begin("b", "/r/b.py"), begin("c", "/r/b.py", namespace="other"),
        end("c", file="/r/b.py", namespace="other"), end("b", file="/r/b.py"), end("a"),
    ])  # fmt: skip
    assert replay.to_head == 3 == len(replay.grants)


def test_a_wait_begun_before_the_records_read_is_left_out() -> None:
    replay = replay_lines([end("early"), begin("a"), end("a")])
    assert [grant.agent for grant in replay.grants] == ["a"]
    assert replay.to_head == 1
