from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lockyard.cli.demo.scenario import (
    MAX_AGENTS,
    MAX_FILES,
    MIN_AGENTS,
    MIN_FILES,
    PERSON,
    PERSON_WAITS,
    READERS,
    TASKS_PER_AGENT,
    WRITER_WAITS,
    build_scenario,
    edit_line,
    file_names,
)


def test_default_scenario_has_eight_agents_a_pair_and_a_ring() -> None:
    scenario = build_scenario()
    assert [agent.agent_id for agent in scenario.agents] == [f"agent-{i}" for i in range(1, 9)]
    assert [group.name for group in scenario.deadlock_groups] == ["pair", "ring"]
    pair, ring = scenario.deadlock_groups
    assert pair.members == ("agent-1", "agent-2")
    assert ring.members == ("agent-3", "agent-4", "agent-5")
    # Distinct files within and across the scripted rings (the repo has enough of them).
    assert len(set(pair.files + ring.files)) == 5


def test_ring_members_take_opposite_orders() -> None:
    scenario = build_scenario(agents=5, files=6, seed=3)
    first_tasks = {agent.agent_id: agent.tasks[0] for agent in scenario.agents}
    for group in scenario.deadlock_groups:
        wanted = [first_tasks[member] for member in group.members]
        assert all(task.incremental and task.rendezvous == group.name for task in wanted)
        # Member i holds what member i-1 asks for next: a ring.
        for index, task in enumerate(wanted):
            previous = wanted[index - 1]
            assert task.files[0] == previous.files[1]


@pytest.mark.parametrize(("agents", "files"), [(4, 3), (4, 12), (8, 5)])
def test_small_teams_or_repos_have_only_the_pair(agents: int, files: int) -> None:
    scenario = build_scenario(agents=agents, files=files, seed=1)
    assert [group.name for group in scenario.deadlock_groups] == ["pair"]


def test_same_seed_same_plan_and_other_seed_other_plan() -> None:
    assert build_scenario(seed=11) == build_scenario(seed=11)
    assert build_scenario(seed=11) != build_scenario(seed=12)


@given(
    agents=st.integers(MIN_AGENTS, MAX_AGENTS),
    files=st.integers(MIN_FILES, 40),
    seed=st.integers(0, 2**32),
)
def test_every_plan_is_well_formed(agents: int, files: int, seed: int) -> None:
    scenario = build_scenario(agents=agents, files=files, seed=seed)
    assert len(scenario.files) == len(set(scenario.files)) == files
    expected = scenario.expected_lines()
    total = 0
    for agent in scenario.agents:
        assert [task.number for task in agent.tasks] == list(range(1, TASKS_PER_AGENT + 1))
        for task in agent.tasks:
            assert len(task.files) == len(set(task.files)) >= 1
            assert set(task.files) <= set(scenario.files)
            for name in () if task.shared else task.files:
                assert edit_line(agent.agent_id, task.number) in expected[name]
            total += task.edits
    total += scenario.act is not None  # the person's line
    assert total == scenario.total_edits == sum(len(lines) for lines in expected.values())
    for lines in expected.values():
        assert not [line for line, n in Counter(lines).items() if n > 1]
    # A ring's files are its own: no ordinary task can block a member at the rendezvous.
    reserved = {name for group in scenario.deadlock_groups for name in group.files}
    assert len(reserved) == sum(len(group.members) for group in scenario.deadlock_groups)
    for agent in scenario.agents:
        for task in agent.tasks:
            assert task.incremental or not set(task.files) & reserved
    # The act's files are its own as well: a reader holding them waits for no one unseen.
    if scenario.act is not None:
        assert not set(scenario.act.files) & reserved
        for agent in scenario.agents:
            for task in agent.tasks[1:]:
                assert not set(task.files) & set(scenario.act.files)


def test_the_default_plan_has_the_act_on_tests_a_writer_two_readers_and_a_person() -> None:
    scenario = build_scenario()
    act = scenario.act
    assert act is not None
    assert act.directory == "tests/"
    assert act.files == ("tests/test_models.py", "tests/test_views.py")
    first = {agent.agent_id: agent.tasks[0] for agent in scenario.agents}
    writer = first[act.writer]
    assert (writer.directory, writer.shared, writer.lock_paths) == ("tests/", False, ("tests/",))
    assert writer.after == READERS
    assert writer.hold_until == PERSON_WAITS
    assert writer.edits == 2
    for reader in act.readers:
        task = first[reader]
        assert (task.shared, task.lock_paths, task.edits) == (True, ("tests/",), 0)
        assert task.rendezvous == READERS
        assert task.hold_until == WRITER_WAITS
    assert act.writer not in act.readers
    # The person appends one line to its file, and no reader's task counts as an edit.
    assert scenario.expected_lines()[act.person_file][-1] == edit_line(PERSON, 1)
    assert not any(line.startswith(act.readers) for line in scenario.expected_lines()[act.files[1]])


@pytest.mark.parametrize(("agents", "files"), [(7, 12), (8, 11), (8, 9)])
def test_no_act_without_three_spare_agents_or_two_test_files(agents: int, files: int) -> None:
    assert build_scenario(agents=agents, files=files).act is None


def test_no_act_where_the_backend_has_no_directory_or_shared_locks() -> None:
    plain = build_scenario(scopes=False)
    assert plain.act is None
    assert not any(task.directory or task.shared for a in plain.agents for task in a.tasks)


def test_hot_files_are_picked_more_often() -> None:
    scenario = build_scenario(agents=32, files=12, seed=5)
    counts = Counter(
        name for agent in scenario.agents for task in agent.tasks for name in task.files
    )
    assert counts[scenario.files[0]] > counts[scenario.files[-1]]


def test_file_names_extend_past_the_builtin_list() -> None:
    names = file_names(20)
    assert len(set(names)) == 20
    assert names[-1] == "src/app/module_019.py"


@pytest.mark.parametrize(
    ("agents", "files", "message"),
    [
        (1, 12, "--agents must be between"),
        (MAX_AGENTS + 1, 12, "--agents must be between"),
        (8, 2, "--files must be between"),
        (8, MAX_FILES + 1, "--files must be between"),
    ],
)
def test_sizes_out_of_range_are_refused(agents: int, files: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_scenario(agents=agents, files=files)
