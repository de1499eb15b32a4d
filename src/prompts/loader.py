"""Load and render the implementer prompt shipped with the package."""

from __future__ import annotations

import os
from functools import cache
from importlib.resources import files
from string import Template

IMPLEMENTER_PROMPT_FILE = "implementer_prompt.md"


@cache
def implementer_prompt_template() -> Template:
    """The raw prompt: `$agent_id`, `$repo`, `$lock_dir`, `$acquire_tool`, `$release_tool`."""
    return Template((files(__package__) / IMPLEMENTER_PROMPT_FILE).read_text(encoding="utf-8"))


def render_implementer_prompt(
    *,
    agent_id: str,
    repo: str | os.PathLike[str],
    lock_dir: str | os.PathLike[str],
    acquire_tool: str = "mcp__lockyard__lock_acquire",
    release_tool: str = "mcp__lockyard__lock_release",
) -> str:
    """The prompt for one agent; every placeholder must be filled (KeyError otherwise)."""
    return implementer_prompt_template().substitute(
        agent_id=agent_id,
        repo=os.fspath(repo),
        lock_dir=os.fspath(lock_dir),
        acquire_tool=acquire_tool,
        release_tool=release_tool,
    )
