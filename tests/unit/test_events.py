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
