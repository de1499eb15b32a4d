from pathlib import Path

from rich.console import Console

from lockyard.cli.demo.live import LiveView
from lockyard.cli.demo.recorder import Phase, SessionRecorder
from lockyard.core.deadlock_info import CycleStep, DeadlockInfo
from lockyard.core.events import LockEvent, LockEventType


def test_live_view_shows_holds_waits_progress_and_deadlocks() -> None:
    recorder = SessionRecorder()
    recorder.add_agent("agent-1", edits_total=4)
    recorder.add_agent("agent-2", edits_total=2)
    recorder.on_event(
        LockEvent(event_type=LockEventType.ACQUIRED, agent_id="agent-1", lock_path="/repo/a.py")
    )
    recorder.on_event(
        LockEvent(event_type=LockEventType.WAITING, agent_id="agent-2", lock_path="/repo/a.py")
    )
    recorder.on_event(
        LockEvent(event_type=LockEventType.WAITING, agent_id="agent-2", lock_path="/repo/b.py")
    )
    recorder.set_phase("agent-1", Phase.EDITING)
    recorder.set_phase("agent-2", Phase.WAITING)
    recorder.agents["agent-1"].edits_done = 3
    recorder.on_deadlock(
        DeadlockInfo(
            cycle=(
                CycleStep(agent_id="agent-2", lock_path="/repo/a.py", held_by="agent-1"),
                CycleStep(agent_id="agent-1", lock_path="/repo/c.py", held_by="agent-2"),
            ),
            victim="agent-2",
            victim_waits_on="/repo/a.py",
            victim_waits_on_holder="agent-1",
        )
    )
    console = Console(record=True, width=140)
    console.print(LiveView(recorder, Path("/repo"), "demo title"))
    text = console.export_text()
    assert "demo title" in text
    assert "agent-1" in text
    assert "editing" in text
    assert "a.py (agent-1), b.py (free)" in text
    assert "3/4" in text
    assert "3/6 edits" in text
    assert "deadlock: agent-2 waits a.py → agent-1 waits c.py; victim agent-2" in text


def test_live_view_shows_readers_together_and_what_the_person_said_it_waits_for() -> None:
    recorder = SessionRecorder()
    for agent in ("agent-7", "agent-8", "person"):
        recorder.add_agent(agent, edits_total=1)
    recorder.reading("agent-7", ["tests/"])
    recorder.reading("agent-8", ["tests/"])
    for reader in ("agent-7", "agent-8"):
        recorder.on_event(
            LockEvent(event_type=LockEventType.ACQUIRED, agent_id=reader, lock_path="tests/")
        )
    said = "tests/test_models.py: held by agent-6 for 1 s (tests/), nobody else waiting"
    recorder.set_phase("person", Phase.WAITING, said)
    console = Console(record=True, width=200)
    console.print(LiveView(recorder, Path("/repo"), "demo title"))
    text = console.export_text()
    assert text.count("tests/ (shared)") == 2
    assert said in text
