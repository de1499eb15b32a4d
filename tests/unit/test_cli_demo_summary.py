import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from lockyard.cli.demo.act_report import ActReport
from lockyard.cli.demo.recorder import SessionRecorder
from lockyard.cli.demo.scenario import PERSON, Scenario, build_scenario, file_header
from lockyard.cli.demo.summary import (
    DemoReport,
    build_report,
    check_file,
    percentile,
    render_report,
    with_server_order,
)
from lockyard.core.deadlock_info import CycleStep, DeadlockInfo
from lockyard.infra.lockstore import JournalRecord, JournalStep, LineGrant, LineReplay, Stats

REPO = Path("/repo")
NS = "github.com/acme/app"


def test_check_file_finds_lost_duplicated_and_unexpected_lines() -> None:
    header = "# f\n"
    good = check_file("f", ["a 1", "b 1"], header + "b 1\na 1\n", header)
    assert good.ok
    bad = check_file("f", ["a 1", "b 1", "c 1"], header + "a 1\na 1\nzz\n", header)
    assert not bad.ok
    assert bad.missing == ("b 1", "c 1")
    assert bad.duplicated == ("a 1",)
    assert bad.unexpected == ("zz",)


def test_check_file_without_its_header_counts_the_header_as_unexpected() -> None:
    check = check_file("f", ["a 1"], "# other\na 1\n", "# f\n")
    assert check.unexpected == ("# other",)


@pytest.mark.parametrize(
    ("values", "fraction", "expected"),
    [
        ([], 0.5, None),
        ([3.0], 0.99, 3.0),
        ([4.0, 1.0, 3.0, 2.0], 0.5, 2.0),
        ([*range(1, 101)], 0.99, 99),
    ],
)
def test_percentile_is_nearest_rank(
    values: list[float], fraction: float, expected: float | None
) -> None:
    assert percentile(values, fraction) == expected


def perfect_run(scenario: Scenario) -> tuple[SessionRecorder, dict[str, str]]:
    recorder = SessionRecorder()
    for agent in scenario.agents:
        edits = sum(task.edits for task in agent.tasks)
        recorder.add_agent(agent.agent_id, edits)
        recorder.agents[agent.agent_id].edits_done = edits
    if scenario.act is not None:  # the person's one line
        recorder.add_agent(PERSON, 1)
        recorder.agents[PERSON].edits_done = 1
    for group in scenario.deadlock_groups:
        steps = tuple(
            CycleStep(
                agent_id=member,
                lock_path=str(REPO / group.files[(i + 1) % len(group.files)]),
                held_by=group.members[(i + 1) % len(group.members)],
            )
            for i, member in enumerate(group.members)
        )
        recorder.on_deadlock(
            DeadlockInfo(
                cycle=steps,
                victim=steps[0].agent_id,
                victim_waits_on=steps[0].lock_path,
                victim_waits_on_holder=steps[0].held_by,
            )
        )
    recorder.handoffs.extend([0.001, 0.002, 0.004])
    recorder.handoffs_in_order = 3
    recorder.floor_cycles.extend([0.001, 0.001, 0.003])
    recorder.floor_name = "a raw mkdir+rmdir on this disk"
    recorder.loop_turns.extend([0.0005, 0.0001, 0.0002])
    contents = {
        name: file_header(name) + "".join(line + "\n" for line in lines)
        for name, lines in scenario.expected_lines().items()
    }
    return recorder, contents


def report_for(
    scenario: Scenario,
    recorder: SessionRecorder,
    contents: dict[str, str],
    leftovers: list[str] | None = None,
) -> DemoReport:
    return build_report(
        scenario,
        recorder,
        contents,
        seconds=1.5,
        leftover_locks=leftovers or [],
        base=REPO,
        header_of={name: file_header(name) for name in scenario.files},
    )


def test_a_perfect_run_is_ok_and_says_so() -> None:
    scenario = build_scenario()
    recorder, contents = perfect_run(scenario)
    report = report_for(scenario, recorder, contents)
    assert report.ok, report.problems
    assert report.edits_done == report.edits_expected == scenario.total_edits
    assert report.handoffs == 3
    assert report.handoff_median_s == 0.002
    assert len(report.deadlocks) == 2
    assert report.deadlocks[0].cycle.startswith("agent-1 waits for src/")
    payload = json.loads(json.dumps(report.to_dict()))
    assert payload["ok"] is True
    assert payload["lost_edits"] == 0
    console = Console(record=True, width=200)
    render_report(report, console)
    text = console.export_text()
    assert "all invariants held" in text
    assert "no edit lost" in text
    assert "victim agent-1" in text
    assert "= 2.0x a raw mkdir+rmdir on this disk (1.00 ms)" in text
    assert "10.0x the busy event loop's wake-up delay (0.20 ms)" in text
    assert payload["floor_median_s"] == 0.001
    assert payload["floor"] == "a raw mkdir+rmdir on this disk"
    # The two scripted deadlocks each made a different agent give way.
    assert payload["most_times_given_way"] == {"times": 1, "agents": ["agent-1", "agent-3"]}
    assert "the most one agent gave way: once (agent-1, agent-3)" in text


def test_every_broken_invariant_is_a_problem() -> None:
    scenario = build_scenario()
    recorder, contents = perfect_run(scenario)
    recorder.deadlocks.pop()  # the ring's deadlock went unseen
    recorder.handoffs.clear()  # and nobody waited: no latency, no baseline line
    lost_file = next(name for name, lines in scenario.expected_lines().items() if lines)
    contents[lost_file] = file_header(lost_file)
    recorder.enter("agent-1", "/repo/x")
    recorder.enter("agent-2", "/repo/x")
    recorder.agents["agent-8"].edits_done -= 1
    recorder.anomalies.append("agent-3 failed: boom")
    report = report_for(scenario, recorder, contents, leftovers=["/repo/y"])
    assert not report.ok
    assert report.lost_edits == len(scenario.expected_lines()[lost_file])
    text = "\n".join(report.problems)
    assert f"{lost_file}: lost edit" in text
    assert "x: agent-2 edited while agent-1 did" in text
    assert "agent-8 did not finish" in text
    assert "scripted deadlock ring" in text
    assert "agent-3 failed: boom" in text
    assert "lock left behind after the run: /repo/y" in text
    console = Console(record=True, width=120)
    render_report(report, console)
    rendered = console.export_text()
    assert "INVARIANT BROKEN" in rendered
    assert "overlapping holders" in rendered
    assert "mkdir+rmdir" not in rendered


def test_the_servers_order_is_shown_and_a_grant_past_the_head_breaks_the_run() -> None:
    """On PostgreSQL the demo adds the server's own order, replayed from its journal."""
    scenario = build_scenario()
    recorder, contents = perfect_run(scenario)
    report = report_for(scenario, recorder, contents)
    in_order = LineGrant(NS, "/repo/src/a.py", "agent-1", ("agent-1", "agent-2"), ())
    fifo = with_server_order(report, LineReplay((in_order,)), REPO)
    assert fifo.ok, fifo.problems
    assert (fifo.to_dict()["server_grants"], fifo.to_dict()["server_grants_to_head"]) == (1, 1)
    console = Console(record=True, width=200)
    render_report(fifo, console)
    text = console.export_text()
    assert "on the server (its journal): all 1 granted waits went to the head of the line" in text
    assert "longest-waiting agent (as the lock events show it)" in text

    past_head = LineGrant(NS, "/repo/src/a.py", "agent-2", ("agent-1", "agent-2"), ())
    broken = with_server_order(report, LineReplay((in_order, past_head)), REPO)
    assert not broken.ok
    assert broken.problems == (
        "src/a.py: the server granted it to agent-2 ahead of agent-1, first in its line "
        "(FIFO broken, per the server's journal)",
    )
    console = Console(record=True, width=200)
    render_report(broken, console)
    assert "1 of 2 granted waits went to the head of the line" in console.export_text()


def test_the_act_is_told_in_three_rows_within_80_columns() -> None:
    scenario = build_scenario()
    recorder, contents = perfect_run(scenario)
    act = ActReport(
        directory="tests/", files=2, writer="agent-6", writer_held_s=1.25,
        readers=("agent-7", "agent-8"), readers_together_s=0.052,
        person_command="lockyard lock tests/test_models.py -- sh -c 'echo person edit 1 >> x'",
        person_pid=4242, person_exit=0, person_waited_s=0.0213, person_held_s=0.04,
        person_in_own_process=True,
        person_said=("waiting for tests/test_models.py: held by agent-6 for 1 s (tests/)", "x"),
    )  # fmt: skip
    report = replace(report_for(scenario, recorder, contents), act=act)
    console = Console(record=True, width=80)
    render_report(report, console)
    lines = console.export_text().splitlines()
    assert all(len(line) <= 80 for line in lines)
    text = " ".join(" ".join(line.strip("│ ").split()) for line in lines)
    assert "shared agent-7 and agent-8 read tests/ together (mode shared) for 52.0 ms" in text
    assert "directory agent-6 locked all of tests/ (its 2 files) in one lock_acquire" in text
    assert "held 1.25 s" in text
    assert "(pid 4242): waited 21.3 ms in line behind agent-6" in text
    assert "it said: waiting for tests/test_models.py: held by agent-6 for 1 s (tests/)" in text
    assert json.loads(json.dumps(report.to_dict()))["act"]["person_exit"] == 0


def test_the_runs_closing_stats_read_whole_at_80_columns() -> None:
    """Sub-second sums in ms (not `0.0s`), both tables one width, and no sentence broken."""
    stats = Stats()
    at = 1764245100.0

    def record(kind: str, agent: str, file: str, **more: Any) -> None:
        stats.add(JournalRecord(at, kind, NS, agent, file, "1.1", 1, "host", **more))

    for number in range(1, 8):
        agent, file = f"agent-{number}", f"src/app/module_{number}.py"
        record("grant", agent, file)
        record("release", agent, file, held=0.0123 * number)
        record("wait-end", f"agent-{number + 1}", file, waited=0.0042 * number, outcome="granted")
    steps = tuple(JournalStep(f"agent-{n}", f"src/app/module_{n}.py", "x") for n in range(1, 4))
    record(
        "deadlock", "agent-1", "src/app/module_1.py", cycle=steps, victim="agent-1",
        released=("src/app/module_1.py",), costs={"agent-1": 0.021, "agent-2": 0.017},
    )  # fmt: skip
    scenario = build_scenario()
    recorder, contents = perfect_run(scenario)
    report = replace(
        report_for(scenario, recorder, contents),
        journal_stats=stats, journal_location="/dev/shm/lockyard-demo-x1y2z3/locks/journal",
    )  # fmt: skip
    console = Console(record=True, width=80)
    render_report(report, console)
    lines = console.export_text().splitlines()
    closing = lines[next(n for n, line in enumerate(lines) if "What the journal" in line) :]
    assert all(len(line) <= 80 for line in lines)
    assert "0.0s" not in "\n".join(closing)
    assert closing[0].endswith("(`lockyard stats` shows it any time):")
    assert "  22 records, " in closing[2]
    rules = [line for line in closing if line and set(line) == {"─"}]
    assert len(rules) == 2  # the files' and the agents' tables
    assert len(set(rules)) == 1
    assert any(line.startswith("Deadlocks: 1, costing 38ms of waiting (") for line in closing)
    assert " 49ms " in "\n".join(closing)  # agent-4 held 0.0492 s: ms below a second
    assert any("cost 38ms (agent-1 21ms, agent-2 17ms)" in line for line in closing)
