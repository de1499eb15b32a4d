"""One agent id per agent CLI session, derived from the process tree with no configuration.

The anchor of a session is the CLI process itself: the process that started `lockyard serve`
(its MCP server) directly. Every hook that CLI runs is a descendant of the same process (via a
shell, or any launcher), so a hook finds its session by walking up from itself to the first
ancestor that anchors one (see `registry.py`). Neither side looks at executable names: the
relation is the process tree alone, so it holds for `claude`, `node`, `codex` or a script.

The agent id is `<cli>-<anchor pid>`; the lock records of a session name the anchor process
(pid and start time), so its locks live exactly as long as the CLI process does, whatever
happens to the MCP server.
"""

from __future__ import annotations

import os
import re
from typing import Final

from .process_tree import ProcessRef, parent_of

DEFAULT_CLI: Final = "agent"
_CLI_NAME: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")


class SessionIdError(Exception):
    """No session agent id can be derived (no parent process, or a bad CLI name)."""


def check_cli_name(cli: str) -> str:
    if not _CLI_NAME.fullmatch(cli):
        raise SessionIdError(
            f"CLI name {cli!r} must be 1-32 characters of a-z, 0-9 and '-', starting with a "
            "letter or digit (for example claude-code, codex, opencode, gemini)"
        )
    return cli


def server_anchor(pid: int | None = None) -> ProcessRef:
    """The session anchor of an MCP server: the process that started it (its parent)."""
    parent = parent_of(os.getpid() if pid is None else pid)
    if parent is None or parent.pid == 1:
        raise SessionIdError(
            "no agent CLI process started this server (its parent is init or gone), so no "
            "session id can be derived; pass --agent-id ID"
        )
    return parent


def session_agent_id(cli: str, anchor: ProcessRef) -> str:
    """The agent id of the session anchored at `anchor`, e.g. `claude-code-4242`."""
    return f"{check_cli_name(cli)}-{anchor.pid}"
