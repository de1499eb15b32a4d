"""`lockyard init --ipc DIR`: an agent CLI set up inside a sandbox, whose lock tools and write
guard go through its IPC folder to `lockyard ipc-host` (no lock directory, no network)."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lockyard.cli.app import app


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.chdir(root)
    return root


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout + result.stderr


def test_init_in_a_sandbox_serves_and_guards_through_the_ipc_folder(repo: Path) -> None:
    code, out = run("init", "claude-code", "codex", "gemini", "opencode", "--ipc", "/ipc",
                    "--command", "lockyard")  # fmt: skip
    assert code == 0, out
    server = json.loads((repo / ".mcp.json").read_text())["mcpServers"]["lockyard"]
    assert server == {"type": "stdio", "command": "lockyard", "args": ["serve", "--ipc", "/ipc"]}
    claude = json.loads((repo / ".claude/settings.json").read_text())
    (group,) = claude["hooks"]["PreToolUse"]
    assert group["hooks"] == [
        {"type": "command", "command": "lockyard hook pre-tool-use --cli claude-code --ipc /ipc",
         "timeout": 60}
    ]  # fmt: skip
    codex = tomllib.loads((repo / ".codex/config.toml").read_text())
    assert codex["mcp_servers"]["lockyard"]["args"] == ["serve", "--ipc", "/ipc"]
    codex_hooks = (repo / ".codex/hooks.json").read_text()
    assert "hook pre-tool-use --cli codex --ipc /ipc" in codex_hooks
    gemini = json.loads((repo / ".gemini/settings.json").read_text())
    assert gemini["mcpServers"]["lockyard"]["args"] == ["serve", "--ipc", "/ipc"]
    assert "--cli gemini --ipc /ipc" in json.dumps(gemini["hooks"])
    plugin = (repo / ".opencode/plugin/lockyard.js").read_text()
    assert '["hook", "pre-tool-use", "--cli", "opencode", "--ipc", "/ipc"]' in plugin
    assert "const GUARD_URL = null;" in plugin  # no guard listens in a sandbox: the hook asks

    code, out = run("uninstall")
    assert code == 0, out
    assert not (repo / ".mcp.json").exists(), "uninstall takes back what init --ipc wrote"
    assert not (repo / ".opencode/plugin/lockyard.js").exists()


def test_init_ipc_usage_errors(repo: Path) -> None:
    code, out = run("init", "--ipc", "/ipc", "--lock-dir", "/tmp/locks")
    assert code == 2
    assert "--ipc and --lock-dir do not go together" in out
    code, out = run("init", "--ipc", "ipc")
    assert code == 2
    assert "is not an absolute path" in out
    assert not (repo / ".mcp.json").exists()
