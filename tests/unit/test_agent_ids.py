"""One agent id rule: every layer that takes an agent id accepts and refuses the same ids."""

from collections.abc import Callable
from pathlib import Path

import pytest

from lockyard.core.agent_ids import MAX_AGENT_ID_CHARS, AgentIdError, validate_agent_id
from lockyard.core.events import LockEvent, LockEventType
from lockyard.domain.monitor import DeadlockMonitor
from lockyard.infra.lockstore import InvalidAgentIdError, LockStore
from lockyard.infra.tools.lock_tools import LockTools
from lockyard.infra.transports.stdio.serve_config import ServeConfigError, open_serve_store

GOOD_IDS = ["agent-1", "ü-agent", "a b", "x" * MAX_AGENT_ID_CHARS]
BAD_IDS: list[object] = [
    "",
    "   ",
    "a\nb",
    "tab\there",
    "nul\x00",
    "del\x7f",
    "x" * (MAX_AGENT_ID_CHARS + 1),
    5,
    None,
]


def _entry_points(repo: Path, lock_dir: Path) -> dict[str, Callable[[object], object]]:
    store = LockStore(repo, lock_dir)
    monitor = DeadlockMonitor()
    return {
        "core rule": validate_agent_id,
        "lock event": lambda agent: LockEvent(
            event_type=LockEventType.WAITING,
            agent_id=agent,  # type: ignore[arg-type]
            lock_path="a.py",
        ),
        "monitor": monitor.register_agent,  # type: ignore[dict-item]
        "lock store": lambda agent: store.try_lock("a.py", agent),  # type: ignore[arg-type]
        "lock tools": lambda agent: LockTools(store, agent),  # type: ignore[arg-type]
        "serve": lambda agent: open_serve_store(agent, repo, lock_dir),  # type: ignore[arg-type]
    }


@pytest.mark.parametrize("agent", GOOD_IDS)
def test_every_layer_accepts_the_same_agent_ids(repo: Path, lock_dir: Path, agent: str) -> None:
    for name, take in _entry_points(repo, lock_dir).items():
        try:
            take(agent)
        except Exception as error:  # pragma: no cover - the failure message names the layer
            pytest.fail(f"{name} refused the valid agent id {agent!r}: {error}")


@pytest.mark.parametrize("agent", BAD_IDS)
def test_every_layer_refuses_the_same_agent_ids_with_the_rules_message(
    repo: Path, lock_dir: Path, agent: object
) -> None:
    with pytest.raises(AgentIdError) as expected:
        validate_agent_id(agent)
    for name, take in _entry_points(repo, lock_dir).items():
        with pytest.raises((ValueError, ServeConfigError)) as refused:
            take(agent)
        assert str(expected.value) in str(refused.value), name


def test_the_store_error_for_a_bad_agent_id_is_the_rules_error() -> None:
    assert issubclass(InvalidAgentIdError, AgentIdError)
    assert issubclass(InvalidAgentIdError, ValueError)
