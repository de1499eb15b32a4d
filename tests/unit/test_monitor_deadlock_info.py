"""DeadlockInfo accepts only a real cycle: what the monitor reports, and what notices carry."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from lockyard.core.deadlock_info import CycleStep, DeadlockInfo


def step(agent: str, lock: str, holder: str) -> CycleStep:
    return CycleStep(agent_id=agent, lock_path=lock, held_by=holder)


GOOD: dict[str, Any] = {
    "cycle": (step("a", "f2", "b"), step("b", "f3", "c"), step("c", "f1", "a")),
    "victim": "b",
    "victim_waits_on": "f3",
    "victim_waits_on_holder": "c",
}


def test_a_consistent_cycle_is_accepted() -> None:
    info = DeadlockInfo(**GOOD)
    assert info.agents == ["a", "b", "c"]
    assert DeadlockInfo.model_validate(info.to_dict()) == info


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"cycle": (step("a", "f2", "b"), step("b", "f1", "c"))}, "next step"),
        ({"cycle": (step("a", "f1", "a"),), "victim": "a"}, "self-wait"),
        ({"victim": "z"}, "not an agent of the cycle"),
        ({"victim_waits_on": "f1"}, "not a step of the victim"),
        ({"victim_waits_on_holder": "a"}, "not a step of the victim"),
        ({"cycle": ()}, "at least 1"),
    ],
)
def test_an_inconsistent_deadlock_is_rejected_with_a_clear_error(
    change: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(ValidationError, match=complaint):
        DeadlockInfo(**{**GOOD, **change})
