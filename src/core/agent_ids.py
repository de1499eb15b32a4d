"""The one rule for agent ids, used by every layer that takes one (events, the monitor, the
lock store, the tools, the CLI), so an id accepted anywhere is accepted everywhere."""

from __future__ import annotations

import functools
import re
from typing import Final

MAX_AGENT_ID_CHARS: Final = 256
_CONTROL_CHARS: Final = re.compile(r"[\x00-\x1f\x7f]")


class AgentIdError(ValueError):
    """The agent id is not a string, blank, too long, contains control characters or is not
    valid UTF-8 text."""


def validate_agent_id(agent_id: object) -> str:
    """`agent_id` itself when it is a valid agent id; else AgentIdError saying what to pass."""
    if type(agent_id) is str:
        return _validated_text(agent_id)  # the same few ids come on every call
    return _validate(agent_id)


def _validate(agent_id: object) -> str:
    if not isinstance(agent_id, str):
        raise AgentIdError(
            f"agent_id must be a string, got {type(agent_id).__name__}; pass the agent's name"
        )
    if not agent_id.strip():
        raise AgentIdError("agent_id is empty; pass a non-blank agent name")
    if len(agent_id) > MAX_AGENT_ID_CHARS:
        raise AgentIdError(
            f"agent_id is {len(agent_id)} characters long; the limit is {MAX_AGENT_ID_CHARS}"
        )
    if _CONTROL_CHARS.search(agent_id):
        raise AgentIdError(
            "agent_id contains control characters (NUL, newline...); pass a printable name"
        )
    try:
        agent_id.encode("utf-8")
    except UnicodeEncodeError:
        # Records are UTF-8 JSON: such an id would be written into records nobody can read.
        raise AgentIdError(
            "agent_id is not valid UTF-8 text (it holds bytes that are not UTF-8, or an "
            "escaped lone surrogate); pass the agent's name as UTF-8 text"
        ) from None
    return agent_id


_validated_text = functools.lru_cache(maxsize=4096)(_validate)
"""A pure check, remembered for valid ids (a refused id raises and is not remembered)."""
