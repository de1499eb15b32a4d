"""The parts of lockyard that come with an extra, and the error for a use that lacks one.

The plain install carries what agent CLI sessions need (`serve`, `hook`, `init`, `status`,
`monitor`, `top`, `web`, `demo`); an orchestrator that hands options to the Claude Agent SDK
installs `lockyard[sdk]` (the SDK bundles a ~370 MB Claude CLI, and its in-process MCP server
needs the mcp library), and agents on many hosts `lockyard[postgres]` (PostgreSQL's driver).
A use that needs a missing part says, in one line, which extra to install, instead of a
ModuleNotFoundError from deep inside lockyard.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Extra:
    name: str
    """As in `lockyard[NAME]` (pyproject.toml's optional-dependencies)."""
    module: str
    """The top-level module it brings."""
    what: str
    """The part, as a person knows it."""


SDK = Extra("sdk", "claude_agent_sdk", "the Claude Agent SDK (claude-agent-sdk)")
MCP = Extra("sdk", "mcp", "the MCP library (mcp)")
"""The SDK's in-process server is an mcp `Server`; `lockyard serve` speaks MCP without it."""
POSTGRES = Extra("postgres", "psycopg", "PostgreSQL's driver (psycopg)")


class MissingExtraError(ImportError):
    """`use` needs a part of `extra` that this install of lockyard does not have."""

    def __init__(self, extra: Extra, use: str) -> None:
        super().__init__(
            f"{use} needs {extra.what}, which this install of lockyard lacks: install "
            f"lockyard[{extra.name}] (from a checkout: python3 scripts/uv tool install "
            f"--reinstall '.[{extra.name}]')",
            name=extra.module,
        )
        self.extra = extra
        self.use = use


def require(extra: Extra, use: str) -> ModuleType:
    """The module `extra` brings, or MissingExtraError naming the extra `use` needs."""
    try:
        return importlib.import_module(extra.module)
    except ModuleNotFoundError as error:
        if error.name is None or error.name.partition(".")[0] != extra.module:
            raise  # the extra is there but broken: that traceback is the useful one
        raise MissingExtraError(extra, use) from None


def installed(extra: Extra) -> bool:
    """Whether `extra`'s module can be imported here (without importing it)."""
    from importlib.util import find_spec

    return find_spec(extra.module) is not None
