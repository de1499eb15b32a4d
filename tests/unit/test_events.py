import pytest
from pydantic import ValidationError

from lockyard.core.events import LockEvent, LockEventType


def test_event_is_validated_and_frozen() -> None:
    event = LockEvent(event_type="WAITING", agent_id="a1", lock_path="/repo/x.py")
    assert event.event_type is LockEventType.WAITING
    assert event.timestamp > 0
    with pytest.raises(ValidationError):
        event.agent_id = "b"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("agent_id", "lock_path"),
    [("", "/x"), ("   ", "/x"), ("a", ""), ("a\x00b", "/x"), ("a", "/x\x00")],
)
def test_blank_or_nul_fields_are_rejected(agent_id: str, lock_path: str) -> None:
    with pytest.raises(ValidationError):
        LockEvent(event_type=LockEventType.ACQUIRED, agent_id=agent_id, lock_path=lock_path)


def test_unknown_event_type_is_rejected() -> None:
    with pytest.raises(ValidationError):
        LockEvent(event_type="STOLEN", agent_id="a", lock_path="/x")  # type: ignore[arg-type]


def test_an_event_can_be_built_positionally() -> None:
    event = LockEvent(LockEventType.WAITING, "a1", "src/x.py", 1700000000.0)
    assert event == LockEvent(
        event_type=LockEventType.WAITING, agent_id="a1", lock_path="src/x.py", timestamp=1.7e9
    )
    assert LockEvent("RELEASED", "a1", "src/x.py").timestamp > 0


def test_a_positional_event_is_validated_like_a_keyword_one() -> None:
    with pytest.raises(ValidationError, match="agent_id is empty"):
        LockEvent(LockEventType.WAITING, " ", "src/x.py")
    with pytest.raises(ValidationError, match="extra"):
        LockEvent(LockEventType.WAITING, "a", "src/x.py", 1.0, colour="red")
    with pytest.raises(TypeError):
        LockEvent(LockEventType.WAITING, "a", "src/x.py", 1.0, 2.0)  # type: ignore[misc]


def test_an_event_inside_another_model_is_validated_from_plain_data() -> None:
    from pydantic import BaseModel

    class Batch(BaseModel):
        events: list[LockEvent]

    batch = Batch.model_validate(
        {"events": [{"event_type": "ACQUIRED", "agent_id": "a", "lock_path": "f"}]}
    )
    assert batch.events[0].event_type is LockEventType.ACQUIRED
    round_trip = LockEvent.model_validate_json(batch.events[0].model_dump_json())
    assert round_trip == batch.events[0]
