"""How each agent CLI is started as its user would run it, offline, and what its tools are
called: one `CliDriver` per CLI for the scenarios in `test_e2e_agent_cli_sessions.py`."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import claude_agent_sdk
from cli_sessions import CliSession
from fake_gemini_api import FakeGeminiApi
from fake_messages_api import FakeMessagesApi
from fake_responses_api import FakeResponsesApi
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
    kills_its_mcp_servers: ClassVar[bool] = False
    """Whether the CLI ends its MCP servers with SIGKILL at exit, without waiting for them."""

    def api(self) -> FakeMessagesApi:
        # A gate waits for another CLI session to start and act: minutes on a loaded machine.
        return FakeMessagesApi(gate_timeout=120.0)

    def write(self, path: Path, content: str) -> tuple[str, dict[str, Any]]:
        return self.write_tool, {"file_path": str(path), "content": content}

    def run(self, command: str) -> tuple[str, dict[str, Any]]:
        """A call of the CLI's shell tool."""
        return self.shell, {"command": command}

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
        return FakeGeminiApi(gate_timeout=120.0)

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


class CodexDriver(CliDriver):
    """Codex CLI from npm, run as `codex exec` with a custom model provider (the fake
    Responses API) in a trusted project. Its writes go through its shell tool: with the
    fake's model name Codex offers no `apply_patch` tool."""

    # Traced (strace -f) with Codex 0.169.0: at exit it sends SIGTERM to an MCP server's process
    # group and SIGKILL to the server straight after, so `lockyard serve` may die before it
    # gives back its locks.
    kills_its_mcp_servers = True

    def api(self) -> FakeMessagesApi:
        return FakeResponsesApi(gate_timeout=120.0)

    def write(self, path: Path, content: str) -> tuple[str, dict[str, Any]]:
        return self.run(f"printf %s {shlex.quote(content)} > {shlex.quote(str(path))}")

    def run(self, command: str) -> tuple[str, dict[str, Any]]:
        return self.shell, {"cmd": command}

    def start(self, name: str, api: FakeMessagesApi, repo: Path, tmp: Path) -> CliSession:
        codex = installed_cli("codex")
        home = tmp / f"home-{name}"
        home.mkdir(parents=True, exist_ok=True)
        # What a user's own configuration holds: the model provider (here, the fake) and the
        # project marked trusted (Codex reads a project's .codex/ only then).
        (home / "config.toml").write_text(
            'model = "gpt-5"\nmodel_provider = "fake"\n\n'
            "[model_providers.fake]\n"
            'name = "fake"\n'
            f'base_url = "{api.base_url(name)}/v1"\n'
            'env_key = "FAKE_OPENAI_KEY"\nwire_api = "responses"\n\n'
            f'[projects."{repo}"]\ntrust_level = "trusted"\n'
        )
        env = {"PATH": os.environ["PATH"], **api.cli_env(name, str(home))}
        # Codex asks a person to review a project's command hooks before they run; a test has
        # none to ask, so it takes Codex's switch for automation that vets hooks itself.
        argv = [str(codex), "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust",
                "-s", "workspace-write", "go"]  # fmt: skip
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
    "codex": CodexDriver(
        "codex", "mcp__lockyard__lock_acquire", "mcp__lockyard__lock_release", "exec_command",
        "exec_command", None,
    ),
}  # fmt: skip
