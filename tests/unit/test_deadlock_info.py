from lockyard.core.deadlock_info import CycleStep, DeadlockInfo


def test_deadlock_info_describes_its_cycle_and_round_trips_as_json() -> None:
    info = DeadlockInfo(
        cycle=(
            CycleStep(agent_id="a", lock_path="/r/f2", held_by="b"),
            CycleStep(agent_id="b", lock_path="/r/f1", held_by="a"),
        ),
        victim="b",
        victim_waits_on="/r/f1",
        victim_waits_on_holder="a",
    )
    assert info.agents == ["a", "b"]
    assert info.lock_paths == ["/r/f2", "/r/f1"]
    assert info.describe() == ("a waits for /r/f2 (held by b) -> b waits for /r/f1 (held by a)")
    assert DeadlockInfo.model_validate(info.to_dict()) == info
