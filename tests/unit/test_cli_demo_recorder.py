import anyio
import anyio.lowlevel
import pytest

from lockyard.cli.demo.recorder import Phase, SessionRecorder
from lockyard.core.deadlock_info import CycleStep, DeadlockInfo
from lockyard.core.events import LockEvent, LockEventType


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def event(kind: LockEventType, agent: str, key: str) -> LockEvent:
    return LockEvent(event_type=kind, agent_id=agent, lock_path=key)


def test_handoff_is_timed_from_release_to_the_waiters_grant() -> None:
    clock = FakeClock()
    recorder = SessionRecorder(clock=clock)
    recorder.on_event(event(LockEventType.ACQUIRED, "a", "/r/f"))
    recorder.on_event(event(LockEventType.WAITING, "b", "/r/f"))
    assert recorder.waits_for() == [("b", "/r/f", "a")]
    clock.now = 1.0
    recorder.on_event(event(LockEventType.RELEASED, "a", "/r/f"))
    clock.now = 1.25
    recorder.on_event(event(LockEventType.ACQUIRED, "b", "/r/f"))
    assert recorder.handoffs == [0.25]
    assert recorder.holds == {"/r/f": ["b"]}
    assert recorder.waits_for() == []
    assert recorder.wait_events == 1


def test_grants_without_a_wait_are_not_handoffs_and_duplicates_are_ignored() -> None:
    recorder = SessionRecorder(clock=FakeClock())
    recorder.on_event(event(LockEventType.ACQUIRED, "a", "/r/f"))
    recorder.on_event(event(LockEventType.RELEASED, "a", "/r/f"))
    recorder.on_event(event(LockEventType.ACQUIRED, "b", "/r/f"))  # timeout-0 grant
    recorder.on_event(event(LockEventType.ACQUIRED, "b", "/r/f"))  # the hook's duplicate
    recorder.on_event(event(LockEventType.WAITING, "c", "/r/f"))
    recorder.on_event(event(LockEventType.WAITING, "c", "/r/f"))
    recorder.on_event(event(LockEventType.WAIT_ENDED, "c", "/r/f"))
    recorder.on_event(event(LockEventType.RELEASED, "c", "/r/f"))  # not the holder: ignored
    assert recorder.handoffs == []
    assert recorder.holds == {"/r/f": ["b"]}
    assert recorder.waits_for() == []
    assert recorder.wait_events == 1
    assert recorder.events == 8


def test_two_agents_inside_one_file_is_an_overlap() -> None:
    recorder = SessionRecorder(clock=FakeClock())
    recorder.add_agent("a", edits_total=2)
    recorder.add_agent("b", edits_total=1)
    recorder.enter("a", "/r/f")
    recorder.enter("b", "/r/f")
    recorder.leave("b", "/r/f")
    recorder.leave("a", "/r/f")
    recorder.enter("a", "/r/f")  # sequential again: fine
    recorder.leave("a", "/r/f")
    assert [(o.lock_key, o.agent_id, o.other_agent_id) for o in recorder.overlaps] == [
        ("/r/f", "b", "a")
    ]
    assert recorder.edits_done == 3
    assert recorder.edits_total == 3


def test_phases_and_deadlocks_are_kept() -> None:
    recorder = SessionRecorder()
    recorder.add_agent("a", edits_total=1)
    recorder.set_phase("a", Phase.WAITING, "f")
    recorder.count_deadlock_result("a")
    info = DeadlockInfo(
        cycle=(
            CycleStep(agent_id="a", lock_path="f2", held_by="b"),
            CycleStep(agent_id="b", lock_path="f1", held_by="a"),
        ),
        victim="a",
        victim_waits_on="f2",
        victim_waits_on_holder="b",
    )
    recorder.on_deadlock(info)
    assert recorder.agents["a"].phase is Phase.WAITING
    assert recorder.agents["a"].note == "f"
    assert recorder.agents["a"].deadlock_results == 1
    assert recorder.deadlocks == [info]


def test_handoffs_to_the_longest_waiting_agent_are_counted() -> None:
    recorder = SessionRecorder(clock=FakeClock())
    recorder.on_event(event(LockEventType.ACQUIRED, "a", "/r/f"))
    for waiter in ("b", "c", "d"):
        recorder.on_event(event(LockEventType.WAITING, waiter, "/r/f"))
    recorder.on_event(event(LockEventType.RELEASED, "a", "/r/f"))
    recorder.on_event(event(LockEventType.ACQUIRED, "b", "/r/f"))  # first in line
    recorder.on_event(event(LockEventType.RELEASED, "b", "/r/f"))
    recorder.on_event(event(LockEventType.ACQUIRED, "d", "/r/f"))  # jumped ahead of c
    recorder.on_event(event(LockEventType.RELEASED, "d", "/r/f"))
    recorder.on_event(event(LockEventType.WAIT_ENDED, "c", "/r/f"))
    assert len(recorder.handoffs) == 2
    assert recorder.handoffs_in_order == 1
    assert recorder.waits_for() == []


def test_a_handoff_reported_before_its_release_is_timed_from_the_release_call() -> None:
    # On PostgreSQL the server pushes the grant to the waiter while the holder's release call
    # is still returning: ACQUIRED can come before RELEASED.
    clock = FakeClock()
    recorder = SessionRecorder(clock=clock)
    recorder.on_event(event(LockEventType.ACQUIRED, "a", "/r/f"))
    recorder.on_event(event(LockEventType.WAITING, "b", "/r/f"))
    clock.now = 5.0
    recorder.releasing("a", ["/r/f"])
    clock.now = 5.25
    recorder.on_event(event(LockEventType.ACQUIRED, "b", "/r/f"))
    clock.now = 5.5
    recorder.on_event(event(LockEventType.RELEASED, "a", "/r/f"))  # late: ignored
    assert recorder.handoffs == [0.25]
    assert recorder.handoffs_in_order == 1
    assert recorder.holds == {"/r/f": ["b"]}


def test_a_stale_release_is_never_the_start_of_a_later_handoff() -> None:
    clock = FakeClock()
    recorder = SessionRecorder(clock=clock)
    recorder.on_event(event(LockEventType.ACQUIRED, "a", "/r/f"))
    recorder.on_event(event(LockEventType.RELEASED, "a", "/r/f"))  # at 0: nobody waited
    recorder.on_event(event(LockEventType.ACQUIRED, "b", "/r/f"))  # timeout-0 grant
    recorder.on_event(event(LockEventType.WAITING, "c", "/r/f"))
    clock.now = 9.0
    recorder.on_event(event(LockEventType.ACQUIRED, "c", "/r/f"))  # before b's RELEASED
    assert recorder.handoffs == []  # not 9 s since a's release


def test_readers_hold_a_key_together_and_a_writer_holds_it_alone() -> None:
    recorder = SessionRecorder(clock=FakeClock())
    recorder.reading("r1", ["tests/"])
    recorder.reading("r2", ["tests/"])
    recorder.on_event(event(LockEventType.ACQUIRED, "r1", "tests/"))
    recorder.on_event(event(LockEventType.ACQUIRED, "r2", "tests/"))
    recorder.on_event(event(LockEventType.WAITING, "w", "tests/"))
    assert recorder.holds == {"tests/": ["r1", "r2"]}
    assert recorder.waits_for() == [("w", "tests/", "r1, r2")]
    recorder.on_event(event(LockEventType.RELEASED, "r1", "tests/"))
    recorder.on_event(event(LockEventType.ACQUIRED, "w", "tests/"))  # before r2's RELEASED
    recorder.on_event(event(LockEventType.RELEASED, "r2", "tests/"))
    assert recorder.holds == {"tests/": ["w"]}


@pytest.mark.anyio
async def test_until_waiting_returns_when_the_agent_waits_for_the_key() -> None:
    recorder = SessionRecorder(clock=FakeClock())
    recorder.on_event(event(LockEventType.WAITING, "w", "a"))
    await recorder.until_waiting("w", "a")  # already waiting: at once
    async with anyio.create_task_group() as group:
        group.start_soon(recorder.until_waiting, "w", "tests/")
        await anyio.lowlevel.checkpoint()
        recorder.on_event(event(LockEventType.WAITING, "w", "tests/"))
