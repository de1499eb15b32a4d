"""How each agent CLI is started as its user would run it, offline, and what its tools are
called: one `CliDriver` per CLI for the scenarios in `test_e2e_agent_cli_sessions.py`."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import claude_agent_sdk
from cli_sessions import CliSession
from fake_gemini_api import FakeGeminiApi
from fake_messages_api import FakeMessagesApi
from npm_clis import installed_cli

CLAUDE = str(Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude")


@dataclass(frozen=True)
class CliDriver:
    cli: str
    """The name `lockyard init` and `--cli` use."""
    acquire: str
    release: str
    shell: str
    write_tool: str
    read_tool: str | None
    """A tool the CLI insists on before it overwrites an existing file (None: no such rule)."""

    def api(self) -> FakeMessagesApi:
        return FakeMessagesApi(gate_timeout=30.0)

    def write(self, path: Path, content: str) -> tuple[str, dict[str, Any]]:
        return self.write_tool, {"file_path": str(path), "content": content}

    def read(self, path: Path) -> tuple[str, dict[str, Any]] | None:
        return None if self.read_tool is None else (self.read_tool, {"file_path": str(path)})

    def start(self, name: str, api: FakeMessagesApi, repo: Path, tmp: Path) -> CliSession:
        raise NotImplementedError


class ClaudeCodeDriver(CliDriver):
    """The CLI bundled in claude-agent-sdk, run as `claude -p` (print mode)."""

    def start(self, name: str, api: FakeMessagesApi, repo: Path, tmp: Path) -> CliSession:
        home = tmp / f"home-{name}"
        home.mkdir(parents=True, exist_ok=True)
        # What accepting the trust dialog once records: project settings (our hooks, the
        # lock tools' permissions) apply only in a trusted workspace.
        trusted = {"projects": {str(repo): {"hasTrustDialogAccepted": True}}}
        (home / ".claude.json").write_text(json.dumps(trusted))
        env = {"PATH": os.environ["PATH"], **api.cli_env(name, str(home))}
        argv = [CLAUDE, "-p", "go", "--output-format", "stream-json", "--verbose",
                "--model", "claude-sonnet-4-5", "--permission-mode", "acceptEdits",
                "--allowedTools", "Bash(git:*)"]  # fmt: skip
        return CliSession(name, argv, repo, env, tmp / "logs")


class GeminiDriver(CliDriver):
    """Gemini CLI from npm, run as `gemini -p` with an explicit model (no routing call)."""

    def api(self) -> FakeMessagesApi:
        return FakeGeminiApi(gate_timeout=30.0)

    def start(self, name: str, api: FakeMessagesApi, repo: Path, tmp: Path) -> CliSession:
        gemini = installed_cli("gemini")
        home = tmp / f"home-{name}"
        (home / ".gemini").mkdir(parents=True, exist_ok=True)
        # What a user's first run records: the API-key login, and trust in this folder
        # (project settings, our MCP server and hook among them, apply only when trusted).
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
        (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
        (home / ".gemini" / "trustedFolders.json").write_text(
            json.dumps({str(repo): "TRUST_FOLDER"})
        )
        env = {"PATH": os.environ["PATH"], **api.cli_env(name, str(home))}
        argv = [str(gemini), "-p", "go", "--approval-mode", "yolo", "-m", "gemini-2.5-flash"]
        return CliSession(name, argv, repo, env, tmp / "logs")


DRIVERS = {
    "claude-code": ClaudeCodeDriver(
        "claude-code", "mcp__lockyard__lock_acquire", "mcp__lockyard__lock_release", "Bash",
        "Write", "Read",
    ),
    "gemini": GeminiDriver(
        "gemini", "mcp_lockyard_lock_acquire", "mcp_lockyard_lock_release", "run_shell_command",
        "write_file", None,
    ),
}  # fmt: skip
