"""The names of the agent CLIs `lockyard init` sets up, in its order: a module of its own so
that `lockyard serve --help` can list them without loading every CLI's setup."""

from __future__ import annotations

from typing import Final

CLI_NAMES: Final = (
    "claude-code", "codex", "opencode", "gemini", "copilot", "qwen", "pi", "kilo", "droid",
    "auggie", "crush",
)  # fmt: skip
