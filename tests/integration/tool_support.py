"""What the tests that call the agent tools in process share."""

from __future__ import annotations

import json
from typing import Any

from lockyard.infra.tools.lock_tools import ToolOutcome


def data(outcome: ToolOutcome) -> dict[str, Any]:
    """A tool result's JSON object; the result must not be an error (its text says why)."""
    assert not outcome.is_error, outcome.text
    parsed: dict[str, Any] = json.loads(outcome.text)
    return parsed
