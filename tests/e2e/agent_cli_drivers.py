"""How each agent CLI is started as its user would run it, offline, and what its tools are
called: one `CliDriver` per CLI for the scenarios in `test_e2e_agent_cli_sessions.py`."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import claude_agent_sdk
from cli_sessions import LOCKYARD, CliSession
from fake_chat_completions_api import FakeChatCompletionsApi
from fake_gemini_api import FakeGeminiApi
from fake_messages_api import Action, FakeMessagesApi, ToolUse, Turn
from fake_responses_api import FakeResponsesApi
from npm_clis import install_home, installed_cli

WriteCall = tuple[str, dict[str, Any]] | Callable[[Turn], Action]

# How long a scripted step waits for another session to start and act before the play fails:
# a CLI's start-up alone takes a minute or more when a full test run shares two cores with it,
# and a gate that opens returns at once, so only a failing play pays for this bound.
GATE_SECONDS = 300.0

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
    refuses_stale_writes: ClassVar[bool] = False
    """Whether the CLI's own write tool refuses a file changed since its read, before any hook
    (lockyard's refusal of a stale write is then seen through the shell tool)."""

    def api(self) -> FakeMessagesApi:
        return FakeMessagesApi(gate_timeout=GATE_SECONDS)

    npm: ClassVar[bool] = True
    """Installed from the npm registry (Claude Code comes inside claude-agent-sdk)."""

    def write(self, path: Path, content: str) -> WriteCall:
        """A call of the CLI's file-writing tool (or, where the tool depends on whether the
        file exists, a step that chooses when it is answered)."""
        return self.write_tool, {"file_path": str(path), "content": content}

    def run(self, command: str) -> tuple[str, dict[str, Any]]:
        """A call of the CLI's shell tool."""
        return self.shell, {"command": command}

    def read(self, path: Path) -> tuple[str, dict[str, Any]] | None:
        return None if self.read_tool is None else (self.read_tool, {"file_path": str(path)})

    def view(self, path: Path) -> tuple[str, dict[str, Any]]:
        """A call that shows the agent the whole file: its read tool, else `cat`."""
        return self.read(path) or self.run(f"cat {shlex.quote(str(path))}")

    def env(self, api: FakeMessagesApi, name: str, home: Path) -> dict[str, str]:
        return {"PATH": os.environ["PATH"], **api.cli_env(name, str(home))}

    def start(self, name: str, api: FakeMessagesApi, repo: Path, tmp: Path) -> CliSession:
        raise NotImplementedError


class ClaudeCodeDriver(CliDriver):
    """The CLI bundled in claude-agent-sdk, run as `claude -p` (print mode)."""

    npm = False
    refuses_stale_writes = True  # "File has been modified since read"

    def api(self) -> FakeMessagesApi:
        # `claude -p` sends its first turn while its MCP servers still connect.
        return FakeMessagesApi(gate_timeout=GATE_SECONDS, warm_up=ToolUse(*self.run("sleep 1")))

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
        return FakeGeminiApi(gate_timeout=GATE_SECONDS)

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
    fake's model name Codex offers no `apply_patch` tool. Its commands run outside Codex's
    sandbox (`danger-full-access`): in `workspace-write` .git is read-only and each command
    has a PID namespace of its own, where no git turn can be held (docs/clis/codex.md)."""

    # Traced (strace -f) with Codex 0.169.0: at exit it sends SIGTERM to an MCP server's process
    # group and SIGKILL to the server straight after, so `lockyard serve` may die before it
    # gives back its locks.
    kills_its_mcp_servers = True

    def api(self) -> FakeMessagesApi:
        return FakeResponsesApi(gate_timeout=GATE_SECONDS)

    def write(self, path: Path, content: str) -> tuple[str, dict[str, Any]]:
        return self.run(f"printf %s {shlex.quote(content)} > {shlex.quote(str(path))}")

    def run(self, command: str) -> tuple[str, dict[str, Any]]:
        # Codex hands a command still running after `yield_time_ms` (10 s by default) back to
        # the model as a session to poll: a commit waiting for git's turn must not be cut short.
        return self.shell, {"cmd": command, "yield_time_ms": 120_000}

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
        # Codex runs commands in a login shell, whose PATH is the profile's (the machine's
        # /etc/profile sets one): a user's profile puts lockyard on it.
        (home / ".profile").write_text(f'PATH="{Path(LOCKYARD).parent}:$PATH"\n')
        env = {"PATH": os.environ["PATH"], **api.cli_env(name, str(home))}
        # Codex asks a person to review a project's command hooks before they run; a test has
        # none to ask, so it takes Codex's switch for automation that vets hooks itself.
        argv = [str(codex), "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust",
                "-s", "danger-full-access", "go"]  # fmt: skip
        return CliSession(name, argv, repo, env, tmp / "logs")


class OpenCodeDriver(CliDriver):
    """OpenCode from npm, run as `opencode run` with the fake as an OpenAI-compatible provider
    (given in `OPENCODE_CONFIG_CONTENT`, so each session has its own base URL).

    OpenCode loads plugins (lockyard's guard is one) only after its own npm install of
    `@opencode-ai/plugin` into every config directory has ended: offline that install fails
    only after about a minute of retries, which `npm_config_offline=true` cuts short.

    Its git snapshots of the worktree (its undo, kept in a repository of its own, taken
    before and after every step) are off, as for Kilo: lockyard reads nothing of them, and
    they cost a third of a session's CPU (a play: 30 s of CPU with them, 20 s without)."""

    refuses_stale_writes = True
    config_env = "OPENCODE_CONFIG_CONTENT"
    config_extra: ClassVar[dict[str, object]] = {"snapshot": False}
    extra: ClassVar[list[str]] = []
    switches: ClassVar[dict[str, str]] = {
        "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
    }  # fmt: skip

    def api(self) -> FakeMessagesApi:
        return FakeChatCompletionsApi(gate_timeout=GATE_SECONDS, is_refusal=self.refused)

    def refused(self, text: str) -> bool:
        return self.acquire in text  # the plugin throws lockyard's reason, which names it

    def write(self, path: Path, content: str) -> tuple[str, dict[str, Any]]:
        return "write", {"filePath": str(path), "content": content}

    def read(self, path: Path) -> tuple[str, dict[str, Any]] | None:
        return "read", {"filePath": str(path)}

    def run(self, command: str) -> tuple[str, dict[str, Any]]:
        return "bash", {"command": command, "description": "run a command"}

    def start(self, name: str, api: FakeMessagesApi, repo: Path, tmp: Path) -> CliSession:
        home = tmp / f"home-{name}"
        home.mkdir(parents=True, exist_ok=True)
        provider = {"npm": "@ai-sdk/openai-compatible", "name": "fake",
                    "options": {"baseURL": api.base_url(name), "apiKey": "fake-key"},
                    "models": {"fake-model": {"name": "fake", "tool_call": True}}}  # fmt: skip
        config = {"provider": {"fake": provider}, "model": "fake/fake-model", **self.config_extra}
        env = {**self.env(api, name, home), self.config_env: json.dumps(config),
               "npm_config_offline": "true", **self.switches}  # fmt: skip
        argv = [str(installed_cli(self.cli)), "run", *self.extra, "-m", "fake/fake-model", "go"]
        return CliSession(name, argv, repo, env, tmp / "logs")


class KiloDriver(OpenCodeDriver):
    """Kilo Code's CLI (an OpenCode fork), run as `kilo run` like OpenCode.

    Kilo's start costs CPU, not waits: without git snapshots of the worktree (taken before
    and after each step, with `git gc`-style upkeep of their repository at start), a file
    watcher, an embedded web UI, a daemon, its built-in plugins (lockyard's is a project
    plugin and still loads), session ingest and presence, a session costs about a third
    less CPU."""

    config_env = "KILO_CONFIG_CONTENT"
    # `kilo run` rejects a permission request (Kilo asks again for a shell command its hook
    # refused before, such as a git line rerun in its turn) and ends the run, unless --auto.
    extra: ClassVar[list[str]] = ["--auto"]
    config_extra: ClassVar[dict[str, object]] = {"snapshot": False}
    switches: ClassVar[dict[str, str]] = {
        "KILO_DISABLE_MODELS_FETCH": "1", "KILO_DISABLE_AUTOUPDATE": "1",
        "KILO_TELEMETRY_LEVEL": "off", "KILO_DISABLE_CODEBASE_INDEXING": "1",
        "KILO_NO_DAEMON": "1", "KILO_DISABLE_DEFAULT_PLUGINS": "1",
        "KILO_EXPERIMENTAL_DISABLE_FILEWATCHER": "1", "KILO_DISABLE_EMBEDDED_WEB_UI": "1",
        "KILO_DISABLE_SESSION_INGEST": "1", "KILO_DISABLE_PRESENCE": "1",
    }  # fmt: skip


class CopilotDriver(CliDriver):
    """GitHub Copilot CLI from npm, run as `copilot -p` with the fake as its BYOK provider
    (`COPILOT_PROVIDER_BASE_URL`, Chat Completions) in a folder trusted in its config."""

    # Seen with Copilot CLI 1.0.102: at exit it does not wait for its MCP server to give back
    # what the session held (the server dies with it).
    kills_its_mcp_servers = True

    def api(self) -> FakeMessagesApi:
        return FakeChatCompletionsApi(
            gate_timeout=GATE_SECONDS,
            is_refusal=lambda t: t.startswith("Denied by preToolUse hook"),
            warm_up=ToolUse(*self.run("sleep 1")),
        )

    def write(self, path: Path, content: str) -> Callable[[Turn], Action]:
        # `create` refuses an existing file; `edit` replaces its text.
        def chosen(_turn: Turn) -> Action:
            if path.exists():
                old = path.read_text()
                return ToolUse("edit", {"path": str(path), "old_str": old, "new_str": content})
            return ToolUse("create", {"path": str(path), "file_text": content})

        return chosen

    def run(self, command: str) -> tuple[str, dict[str, Any]]:
        return "bash", {"command": command, "description": "run a command"}

    def start(self, name: str, api: FakeMessagesApi, repo: Path, tmp: Path) -> CliSession:
        home = tmp / f"home-{name}"
        (home / ".copilot").mkdir(parents=True, exist_ok=True)
        # What trusting the folder once records: a project's hooks and MCP servers are
        # loaded only in a trusted folder.
        (home / ".copilot" / "config.json").write_text(json.dumps({"trustedFolders": [str(repo)]}))
        env = {**self.env(api, name, home), "COPILOT_OFFLINE": "true",
               "COPILOT_PROVIDER_BASE_URL": api.base_url(name), "COPILOT_MODEL": "fake-model",
               # the launcher unpacks its 235 MB package into $XDG_CACHE_HOME: once, shared
               "XDG_CACHE_HOME": str(install_home(self.cli) / "xdg-cache")}  # fmt: skip
        argv = [str(installed_cli(self.cli)), "-p", "go", "--allow-all-tools"]
        return CliSession(name, argv, repo, env, tmp / "logs")


class QwenDriver(CliDriver):
    """Qwen Code from npm, run as `qwen --yolo` (one prompt) with OpenAI-compatible auth
    pointed at the fake; the user settings turn telemetry and update checks off. Its
    `write_file` refuses to overwrite a file the session has not read (`read_tool`)."""

    def api(self) -> FakeMessagesApi:
        return FakeChatCompletionsApi(
            gate_timeout=GATE_SECONDS, is_refusal=lambda t: self.acquire in t
        )

    def start(self, name: str, api: FakeMessagesApi, repo: Path, tmp: Path) -> CliSession:
        home = tmp / f"home-{name}"
        (home / ".qwen").mkdir(parents=True, exist_ok=True)
        settings = {"security": {"auth": {"selectedType": "openai"}},
                    "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
                    "general": {"disableAutoUpdate": True, "disableUpdateNag": True}}  # fmt: skip
        (home / ".qwen" / "settings.json").write_text(json.dumps(settings))
        env = {**self.env(api, name, home), "OPENAI_BASE_URL": api.base_url(name),
               "OPENAI_API_KEY": "fake-key", "OPENAI_MODEL": "fake-model",
               "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"}  # fmt: skip
        argv = [str(installed_cli(self.cli)), "--auth-type", "openai", "--yolo", "go"]
        return CliSession(name, argv, repo, env, tmp / "logs")


class PiDriver(CliDriver):
    """pi from npm, run as `pi -p` with the fake as a custom `openai-completions` provider
    in its `models.json`, offline (`PI_OFFLINE=1`)."""

    def api(self) -> FakeMessagesApi:
        return FakeChatCompletionsApi(
            gate_timeout=GATE_SECONDS, is_refusal=lambda t: self.acquire in t
        )

    def write(self, path: Path, content: str) -> tuple[str, dict[str, Any]]:
        return "write", {"path": str(path), "content": content}

    def start(self, name: str, api: FakeMessagesApi, repo: Path, tmp: Path) -> CliSession:
        home = tmp / f"home-{name}"
        (home / ".pi" / "agent").mkdir(parents=True, exist_ok=True)
        provider = {"baseUrl": api.base_url(name), "api": "openai-completions",
                    "apiKey": "fake-key", "models": [{"id": "fake-model"}],
                    "compat": {"supportsDeveloperRole": False,
                               "supportsReasoningEffort": False}}  # fmt: skip
        models = {"providers": {"fake": provider}}
        (home / ".pi" / "agent" / "models.json").write_text(json.dumps(models))
        env = {**self.env(api, name, home), "PI_OFFLINE": "1"}
        argv = [str(installed_cli(self.cli)), "-p", "--provider", "fake", "--model", "fake-model",
                "go"]  # fmt: skip
        return CliSession(name, argv, repo, env, tmp / "logs")


class DroidDriver(CliDriver):
    """Factory's droid from npm, run as `droid exec --auto high` with the fake as a custom
    (bring-your-own-key) Chat Completions model in its user settings; no Factory login."""

    def api(self) -> FakeMessagesApi:
        return FakeChatCompletionsApi(
            gate_timeout=GATE_SECONDS, is_refusal=lambda t: self.acquire in t
        )

    def write(self, path: Path, content: str) -> Callable[[Turn], Action]:
        # `Create` writes a new file; `Edit` replaces text in an existing one.
        def chosen(_turn: Turn) -> Action:
            if path.exists():
                old = path.read_text()
                return ToolUse("Edit", {"file_path": str(path), "old_str": old,
                                        "new_str": content})  # fmt: skip
            return ToolUse("Create", {"file_path": str(path), "content": content})

        return chosen

    def run(self, command: str) -> tuple[str, dict[str, Any]]:
        # droid's shell tool refuses a call without the model's own risk rating
        return self.shell, {"command": command, "riskLevelReason": "a test step",
                            "riskLevel": "low"}  # fmt: skip

    def start(self, name: str, api: FakeMessagesApi, repo: Path, tmp: Path) -> CliSession:
        home = tmp / f"home-{name}"
        (home / ".factory").mkdir(parents=True, exist_ok=True)
        model = {"model": "fake-model", "displayName": "fake", "baseUrl": api.base_url(name),
                 "apiKey": "fake-key", "provider": "generic-chat-completion-api",
                 "maxOutputTokens": 4096}  # fmt: skip
        settings = {"customModels": [model]}
        (home / ".factory" / "settings.json").write_text(json.dumps(settings))
        argv = [str(installed_cli(self.cli)), "exec", "--auto", "high",
                "-m", "custom:fake-model", "go"]  # fmt: skip
        return CliSession(name, argv, repo, self.env(api, name, home), tmp / "logs")


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
    "opencode": OpenCodeDriver(
        "opencode", "lockyard_lock_acquire", "lockyard_lock_release", "bash", "write", "read",
    ),
    "kilo": KiloDriver(
        "kilo", "lockyard_lock_acquire", "lockyard_lock_release", "bash", "write", "read",
    ),
    "pi": PiDriver("pi", "lock_acquire", "lock_release", "bash", "write", None),
    "copilot": CopilotDriver(
        "copilot", "lockyard-lock_acquire", "lockyard-lock_release", "bash", "create", None,
    ),
    "qwen": QwenDriver(
        "qwen", "mcp__lockyard__lock_acquire", "mcp__lockyard__lock_release",
        "run_shell_command", "write_file", "read_file",
    ),
    "droid": DroidDriver(
        "droid", "lockyard___lock_acquire", "lockyard___lock_release", "Execute", "Create",
        "Read",
    ),
}  # fmt: skip
