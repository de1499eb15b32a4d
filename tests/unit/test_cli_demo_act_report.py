"""The act on `tests/` as the journal shows it: holds rebuilt from records, and each part
that the records lack named as a problem."""

from lockyard.cli.demo.act_report import ActReport, Hold, act_report, holds_of, together
from lockyard.cli.demo.person import PersonRun
from lockyard.cli.demo.scenario import PERSON, build_scenario
from lockyard.infra.lockstore import JournalRecord

DEMO_PID = 100
PERSON_PID = 200
KEYS = {"tests/": "tests/", "tests/test_models.py": "tests/test_models.py"}


def record(
    t: float,
    kind: str,
    agent: str,
    file: str,
    pid: int = DEMO_PID,
    outcome: str | None = None,
    waited: float | None = None,
) -> JournalRecord:
    return JournalRecord(
        t, kind, "/repo", agent, file, "s", pid, "host", outcome=outcome, waited=waited
    )


def the_act_recorded() -> list[JournalRecord]:
    return [
        record(1.0, "grant", "agent-7", "tests/", outcome="shared"),
        record(1.1, "grant", "agent-8", "tests/", outcome="shared"),
        record(1.2, "grant", "agent-6", "tests/"),
        record(1.5, "release", "agent-8", "tests/"),
        record(1.6, "release", "agent-7", "tests/"),
        # The person's try under the held directory: a grant given back at once.
        record(2.0, "grant", PERSON, "tests/test_models.py", PERSON_PID),
        record(2.001, "release", PERSON, "tests/test_models.py", PERSON_PID),
        record(2.1, "wait-begin", PERSON, "tests/", PERSON_PID),
        record(2.3, "release", "agent-6", "tests/"),
        record(2.31, "wait-end", PERSON, "tests/", PERSON_PID, outcome="granted", waited=0.21),
        record(2.32, "grant", PERSON, "tests/test_models.py", PERSON_PID),
        record(2.4, "release", PERSON, "tests/test_models.py", PERSON_PID),
    ]


def report(records: list[JournalRecord]) -> ActReport:
    act = build_scenario().act
    assert act is not None
    run = PersonRun(
        "lockyard lock tests/test_models.py -- sh -c ...", PERSON_PID, ["waiting for x"], 0
    )
    return act_report(act, records, KEYS, run, DEMO_PID)


def test_holds_run_from_grant_or_hand_over_to_release() -> None:
    holds = holds_of(the_act_recorded())
    assert Hold("agent-6", "tests/", 1.2, 2.3, DEMO_PID) in holds
    unreleased = holds_of([record(1.0, "hand-over", "a", "f")])
    assert unreleased == [Hold("a", "f", 1.0, None, DEMO_PID)]
    assert unreleased[0].seconds() is None


def test_together_is_the_time_every_hold_overlapped() -> None:
    a, b = Hold("a", "k", 1.0, 3.0, 1), Hold("b", "k", 2.0, 4.0, 1)
    assert together([a, b]) == 1.0
    assert together([a, Hold("b", "k", 3.5, 4.0, 1)]) is None  # one after the other
    assert together([a, Hold("b", "k", 2.0, None, 1)]) is None


def test_the_whole_act_shows_and_is_no_problem() -> None:
    seen = report(the_act_recorded())
    assert seen.readers_together_s is not None
    assert abs(seen.readers_together_s - 0.4) < 1e-9
    assert seen.writer_held_s is not None
    assert abs(seen.writer_held_s - 1.1) < 1e-9
    assert seen.person_waited_s == 0.21
    assert seen.person_held_s is not None
    assert abs(seen.person_held_s - 0.08) < 1e-9
    assert seen.person_in_own_process
    assert seen.problems() == []


def test_each_missing_part_of_the_act_is_a_problem() -> None:
    one_reader_after_the_other = [
        r for r in the_act_recorded() if not (r.agent == "agent-8" and r.file == "tests/")
    ] + [record(1.7, "grant", "agent-8", "tests/"), record(1.8, "release", "agent-8", "tests/")]
    assert report(one_reader_after_the_other).problems() == [
        "the journal shows agent-7 and agent-8 never holding tests/ together"
    ]
    no_writer = [r for r in the_act_recorded() if r.agent != "agent-6"]
    assert report(no_writer).problems() == ["the journal shows no lock of tests/ held by agent-6"]
    person_in_the_demo_process = [
        record(r.time, r.kind, r.agent, r.file, DEMO_PID) for r in the_act_recorded()
    ]
    assert report(person_in_the_demo_process).problems() == [
        "the journal shows no lock held by the person's own process"
    ]
