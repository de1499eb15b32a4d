"""`lockyard init` / `lockyard uninstall` on real repositories: merging, idempotence, dry runs,
exact removal, and every kind of bad existing file (nothing written)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lockyard.cli.app import app
from lockyard.infra.agentcli.guard_address import guard_port, lock_dir_tag
from lockyard.infra.agentcli.hook_timeouts import HOOK_DEADLINE_SECONDS
from lockyard.infra.gitturn.switch import turns_switched_on
from lockyard.infra.lockstore import default_lock_dir_path

LOCKYARD = str(Path(sys.executable).parent / "lockyard")
GIT = shutil.which("git") or "git"  # the tests' PATH holds only the CLIs they install


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.chdir(root)
    # No agent CLI on PATH unless a test installs one in `bin` (init looks for them there).
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return root


def install_command(repo: Path, name: str) -> Path:
    """An executable named `name` on the test's PATH, as an installed CLI would leave."""
    command = repo.parent / "bin" / name
    command.write_text("#!/bin/sh\n")
    command.chmod(0o755)
    return command


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout + result.stderr


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): path.read_text()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(root).parts
    }


def test_init_with_no_cli_named_sets_up_claude_code(repo: Path) -> None:
    code, out = run("init", "--command", "lockyard")
    assert code == 0, out
    assert json.loads((repo / ".mcp.json").read_text()) == {
        "mcpServers": {
            "lockyard": {
                "type": "stdio",
                "command": "lockyard",
                "args": ["serve", "--cli", "claude-code"],
            }
        }
    }
    settings = json.loads((repo / ".claude/settings.json").read_text())
    lock_dir = default_lock_dir_path()
    url = (
        f"http://127.0.0.1:{guard_port(lock_dir)}/v1/pre-tool-use?cli=claude-code"
        f"&dir={lock_dir_tag(lock_dir)}"
    )
    assert settings["hooks"]["PreToolUse"] == [
        {
            "matcher": "Read|Write|Edit|MultiEdit|NotebookEdit|Bash",
            "hooks": [{"type": "http", "url": url, "timeout": 30, "onFailure": "block"}],
        }
    ]
    assert settings["permissions"]["allow"] == [
        "mcp__lockyard__lock_acquire",
        "mcp__lockyard__lock_release",
        "mcp__lockyard__lock_status",
        "Bash(lockyard git-turn:*)",  # the prefix git turns ask for, never a prompt
    ]
    assert settings["enabledMcpjsonServers"] == ["lockyard"]
    assert "lock_acquire" in (repo / "CLAUDE.md").read_text()
    assert "created .mcp.json" in out


def test_init_merges_keeps_other_entries_and_is_idempotent(repo: Path) -> None:
    (repo / ".claude").mkdir()
    (repo / ".claude/settings.json").write_text(json.dumps({
        "model": "opus",
        "hooks": {"PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}
        ]},
        "permissions": {"allow": ["Read"]},
    }))  # fmt: skip
    (repo / "CLAUDE.md").write_text("# Project\n\nBe nice.\n")
    assert run("init", "claude-code", "--command", "lockyard")[0] == 0
    settings = json.loads((repo / ".claude/settings.json").read_text())
    assert settings["model"] == "opus"
    assert settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == "audit"
    assert len(settings["hooks"]["PreToolUse"]) == 2
    assert settings["permissions"]["allow"][0] == "Read"
    assert (repo / "CLAUDE.md").read_text().startswith("# Project\n\nBe nice.\n")
    first = snapshot(repo)
    code, out = run("init", "claude-code", "--command", "lockyard")
    assert (code, snapshot(repo)) == (0, first)
    assert "nothing to change" in out


def test_uninstall_takes_back_exactly_what_init_added(repo: Path) -> None:
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"db": {"command": "pg-mcp"}}}))
    (repo / "AGENTS.md").write_text("Team rules.\n")
    (repo / ".codex").mkdir()
    (repo / ".codex/config.toml").write_text('model = "o4"\n')
    before = {k: json.loads(v) if k.endswith(".json") else v for k, v in snapshot(repo).items()}
    assert (
        run("init", "claude-code", "codex", "opencode", "gemini", "--command", "lockyard")[0] == 0
    )
    assert (repo / ".opencode/plugin/lockyard.js").exists()
    assert run("uninstall")[0] == 0
    after = {k: json.loads(v) if k.endswith(".json") else v for k, v in snapshot(repo).items()}
    assert after == before
    assert not (repo / ".claude").exists()
    assert not (repo / ".opencode").exists()


def test_git_turns_are_switched_on_for_the_whole_clone_and_off_by_a_full_uninstall(
    repo: Path,
) -> None:
    switch = repo / ".git" / "lockyard" / "git-turns.on"
    code, out = run("init", "codex", "--git-turns", "--dry-run", "--command", "lockyard")
    assert (code, switch.exists()) == (0, False), out
    assert "would create" in out
    code, out = run("init", "codex", "--git-turns", "--command", "lockyard")
    assert (code, switch.exists()) == (0, True), out
    assert "git turns on" in out
    # a linked worktree of the clone finds the same switch
    git = [GIT, "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "c"], check=True)
    linked = repo.parent / "linked"
    subprocess.run([*git, "worktree", "add", "-q", str(linked)], check=True)
    assert turns_switched_on(str(linked))
    assert run("uninstall", "codex")[0] == 0
    assert switch.exists()  # one CLI less: the other sessions still take turns
    code, out = run("uninstall")
    assert (code, switch.exists()) == (0, False), out


def test_clis_sharing_agents_md_keep_its_block_until_the_last_one_goes(repo: Path) -> None:
    assert run("init", "codex", "opencode", "--command", "lockyard")[0] == 0
    assert run("uninstall", "codex")[0] == 0
    assert "lockyard:begin" in (repo / "AGENTS.md").read_text()
    assert run("uninstall", "opencode")[0] == 0
    assert not (repo / "AGENTS.md").exists()


def test_a_guard_port_given_to_init_reaches_every_server_and_hook(repo: Path) -> None:
    code, out = run("init", "claude-code", "codex", "--command", "lockyard",
                    "--lock-dir", "/run/locks", "--guard-port", "4321")  # fmt: skip
    assert code == 0, out
    server = json.loads((repo / ".mcp.json").read_text())["mcpServers"]["lockyard"]
    assert server["args"] == [
        "serve", "--cli", "claude-code", "--lock-dir", "/run/locks", "--guard-port", "4321"
    ]  # fmt: skip
    [hook] = json.loads((repo / ".claude/settings.json").read_text())["hooks"]["PreToolUse"]
    assert hook["hooks"][0]["url"] == (
        f"http://127.0.0.1:4321/v1/pre-tool-use?cli=claude-code&dir={lock_dir_tag('/run/locks')}"
    )
    [codex] = json.loads((repo / ".codex/hooks.json").read_text())["hooks"]["PreToolUse"]
    assert codex["hooks"][0]["command"] == (
        "lockyard hook pre-tool-use --cli codex --lock-dir /run/locks --guard-port 4321"
    )
    assert run("uninstall")[0] == 0
    assert not (repo / ".claude/settings.json").exists()


@pytest.mark.parametrize("port", ["0", "65536", "http", " "])
def test_a_bad_guard_port_is_a_usage_error_and_writes_nothing(repo: Path, port: str) -> None:
    code, out = run("init", "--command", "lockyard", "--guard-port", port)
    assert code == 2
    assert "is not a port number (1-65535)" in out
    assert snapshot(repo) == {}


def test_init_finds_the_clis_a_repository_is_configured_for(repo: Path) -> None:
    (repo / ".gemini").mkdir()
    (repo / "opencode.json").write_text("{}")
    (repo / ".pi").mkdir()
    (repo / ".github" / "hooks").mkdir(parents=True)
    code, out = run("init", "--command", "lockyard")
    assert code == 0, out
    assert "found OpenCode: opencode.json in the repository" in out
    assert "found Gemini CLI: .gemini in the repository" in out
    assert "found GitHub Copilot CLI: .github/hooks in the repository" in out
    assert "found pi: .pi in the repository" in out
    assert "set up for OpenCode, Gemini CLI, GitHub Copilot CLI, pi." in out
    assert (repo / ".github/hooks/lockyard.json").exists()
    assert any((repo / ".pi/extensions").iterdir())
    assert not (repo / ".mcp.json").exists()


def test_init_finds_the_clis_installed_on_this_machine_and_says_where(repo: Path) -> None:
    qwen = install_command(repo, "qwen")
    install_command(repo, "kilocode")
    droid = install_command(repo, "droid")
    (repo / ".codex").mkdir()
    code, out = run("init", "--command", "lockyard", "--dry-run")
    assert code == 0, out
    assert f"found Qwen Code: qwen on PATH ({qwen})" in out.splitlines()
    assert "found Kilo Code: kilocode on PATH" in out
    assert "found Codex CLI: .codex in the repository" in out
    assert f"found droid: droid on PATH ({droid})" in out.splitlines()
    assert "set up for Codex CLI, Qwen Code, Kilo Code, droid" in out
    code, out = run("init", "--command", "lockyard")
    assert code == 0, out
    assert json.loads((repo / ".qwen/settings.json").read_text())["mcpServers"]["lockyard"]
    assert json.loads((repo / "kilo.json").read_text())["mcp"]["lockyard"]
    assert (repo / ".kilo/plugin/lockyard.js").exists()
    assert not (repo / ".mcp.json").exists()


def test_init_with_no_cli_found_says_so_and_sets_up_claude_code(repo: Path) -> None:
    code, out = run("init", "--command", "lockyard")
    assert code == 0, out
    assert out.startswith("found no agent CLI on PATH or in the repository")
    assert (repo / ".mcp.json").exists()


def test_each_cli_gets_its_own_mcp_and_hook_configuration(repo: Path) -> None:
    assert run("init", "codex", "opencode", "gemini", "--command", "/opt/ly bin/lockyard",
               "--lock-dir", "/run/locks")[0] == 0  # fmt: skip
    codex = tomllib.loads((repo / ".codex/config.toml").read_text())
    assert codex["mcp_servers"]["lockyard"] == {
        "command": "/opt/ly bin/lockyard",
        "args": ["serve", "--cli", "codex", "--lock-dir", "/run/locks"],
        "default_tools_approval_mode": "approve",
    }
    hooks = json.loads((repo / ".codex/hooks.json").read_text())["hooks"]["PreToolUse"][0]
    assert hooks["matcher"] == "apply_patch|Edit|Write|Bash"
    assert hooks["hooks"][0]["command"] == (
        "'/opt/ly bin/lockyard' hook pre-tool-use --cli codex --lock-dir /run/locks"
    )
    opencode = json.loads((repo / "opencode.json").read_text())["mcp"]["lockyard"]
    assert opencode["command"][:4] == ["/opt/ly bin/lockyard", "serve", "--cli", "opencode"]
    plugin = (repo / ".opencode/plugin/lockyard.js").read_text()
    assert '"--lock-dir", "/run/locks"' in plugin
    assert "tool.execute.before" in plugin
    gemini = json.loads((repo / ".gemini/settings.json").read_text())
    assert (
        gemini["hooks"]["BeforeTool"][0]["matcher"]
        == "read_file|write_file|replace|run_shell_command"
    )
    assert gemini["mcpServers"]["lockyard"]["args"][:3] == ["serve", "--cli", "gemini"]


def test_copilot_qwen_pi_and_kilo_get_their_own_files_and_lose_exactly_them(repo: Path) -> None:
    (repo / ".github/hooks").mkdir(parents=True)
    audit = {"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "audit"}]}}
    (repo / ".github/hooks/audit.json").write_text(json.dumps(audit))
    (repo / ".qwen").mkdir()
    (repo / ".qwen/settings.json").write_text(json.dumps({"model": {"name": "qwen3"}}))
    before = snapshot(repo)
    code, out = run("init", "copilot", "qwen", "pi", "kilo", "--command", "/opt/ly/lockyard",
                    "--lock-dir", "/run/locks")  # fmt: skip
    assert code == 0, out
    servers = json.loads((repo / ".github/mcp.json").read_text())["mcpServers"]
    assert servers["lockyard"] == {
        "type": "stdio", "command": "/opt/ly/lockyard",
        "args": ["serve", "--cli", "copilot", "--lock-dir", "/run/locks"], "tools": ["*"],
    }  # fmt: skip
    hooks = json.loads((repo / ".github/hooks/lockyard.json").read_text())
    assert hooks == {"version": 1, "hooks": {"preToolUse": [{
        "type": "command", "timeoutSec": 60,
        "bash": "/opt/ly/lockyard hook pre-tool-use --cli copilot --lock-dir /run/locks",
    }]}}  # fmt: skip
    assert snapshot(repo)[".github/hooks/audit.json"] == before[".github/hooks/audit.json"]
    qwen = json.loads((repo / ".qwen/settings.json").read_text())
    assert qwen["model"] == {"name": "qwen3"}
    assert qwen["mcpServers"]["lockyard"]["args"] == ["serve", "--cli", "qwen", "--lock-dir",
                                                      "/run/locks"]  # fmt: skip
    # longer than Qwen Code's 30 s wait for a stdio server's tools (a loaded machine)
    assert qwen["mcpServers"]["lockyard"]["discoveryTimeoutMs"] == 120_000
    [group] = qwen["hooks"]["PreToolUse"]
    assert group["matcher"] == "^(read_file|write_file|edit|notebook_edit|run_shell_command)$"
    assert group["hooks"][0]["command"].endswith("--cli qwen --lock-dir /run/locks")
    extension = (repo / ".pi/extensions/lockyard.ts").read_text()
    assert "// `lockyard init pi` wrote this file" in extension.splitlines()[1]
    assert '["serve", "--cli", "pi", "--lock-dir", "/run/locks"]' in extension
    assert '"__' not in extension  # every placeholder filled
    plugin = (repo / ".kilo/plugin/lockyard.js").read_text()
    assert '["hook", "pre-tool-use", "--cli", "kilo", "--lock-dir", "/run/locks"]' in plugin
    # The plugins ask the lock directory's guard over HTTP first (the hook is the fallback).
    url = f"http://127.0.0.1:{guard_port('/run/locks')}/v1/pre-tool-use?cli=kilo"
    assert f'const GUARD_URL = "{url}&dir={lock_dir_tag("/run/locks")}&via=command";' in plugin
    assert "?cli=pi&dir=" in extension
    assert '"__' not in plugin
    assert json.loads((repo / "kilo.json").read_text())["mcp"]["lockyard"]["command"][3] == "kilo"
    assert "lock_acquire" in (repo / "QWEN.md").read_text()
    code, out = run("uninstall")
    assert code == 0, out
    assert "lockyard removed for GitHub Copilot CLI, Qwen Code, pi, Kilo Code" in out
    assert snapshot(repo) == before


def test_droid_gets_its_server_and_hook_beside_its_own_settings_and_loses_exactly_them(
    repo: Path,
) -> None:
    (repo / ".factory").mkdir()
    theirs = {"customModels": [{"model": "m"}], "hooks": {"PostToolUse": [{"hooks": []}]}}
    (repo / ".factory/settings.json").write_text(json.dumps(theirs))
    before = snapshot(repo)
    code, out = run("init", "--command", "/opt/ly/lockyard", "--lock-dir", "/run/locks")
    assert code == 0, out
    assert "found droid: .factory in the repository" in out
    servers = json.loads((repo / ".factory/mcp.json").read_text())["mcpServers"]
    assert servers["lockyard"] == {
        "type": "stdio", "command": "/opt/ly/lockyard",
        "args": ["serve", "--cli", "droid", "--lock-dir", "/run/locks"],
    }  # fmt: skip
    settings = json.loads((repo / ".factory/settings.json").read_text())
    assert settings["customModels"] == theirs["customModels"]
    assert settings["hooks"]["PostToolUse"] == theirs["hooks"]["PostToolUse"]
    [group] = settings["hooks"]["PreToolUse"]
    assert group["matcher"] == "Read|Create|Edit|MultiEdit|ApplyPatch|Execute"
    assert group["hooks"] == [{
        "type": "command", "timeout": 60,
        "command": "/opt/ly/lockyard hook pre-tool-use --cli droid --lock-dir /run/locks",
    }]  # fmt: skip
    assert "lock them first (lockyard)" in (repo / "AGENTS.md").read_text()
    code, out = run("uninstall", "droid")
    assert code == 0, out
    assert snapshot(repo) == before


def test_auggie_gets_its_server_and_hook_and_crush_the_lock_tools_only_and_both_lose_them(
    repo: Path,
) -> None:
    auggie = install_command(repo, "auggie")
    theirs = {"mcp": {"docs": {"type": "http", "url": "http://x"}}, "options": {"debug": True}}
    (repo / "crush.json").write_text(json.dumps(theirs))
    before = snapshot(repo)
    code, out = run("init", "--command", "lockyard")
    assert code == 0, out
    assert f"found Auggie: auggie on PATH ({auggie})" in out.splitlines()
    assert "found Crush: crush.json in the repository" in out.splitlines()
    assert "set up for Auggie, Crush" in out
    assert "Crush gets the lock tools only: no hook of it refuses a write" in out
    assert "New sessions of Auggie are guarded" in " ".join(out.split())
    entry = {"type": "stdio", "command": "lockyard", "args": ["serve", "--cli", "auggie"]}
    augment = json.loads((repo / ".augment/settings.json").read_text())
    assert augment["mcpServers"] == {"lockyard": entry}
    assert augment["hooks"]["PreToolUse"] == [{
        "matcher": "^(view|save-file|str-replace-editor|remove-files|launch-process)$",
        "hooks": [{"type": "command", "timeout": 60_000,
                   "command": "lockyard hook pre-tool-use --cli auggie"}],
    }]  # fmt: skip
    crush = json.loads((repo / "crush.json").read_text())
    assert crush["mcp"] == {**theirs["mcp"], "lockyard": {**entry, "args": [
        "serve", "--cli", "crush"]}}  # fmt: skip
    assert crush["options"] == theirs["options"]
    assert "lock them first (lockyard)" in (repo / "AGENTS.md").read_text()
    assert "nothing to change" in run("init", "auggie", "crush", "--command", "lockyard")[1]
    code, out = run("uninstall")
    assert code == 0, out
    assert "lockyard removed for Auggie, Crush" in out
    assert snapshot(repo) == before


def test_every_command_hook_init_writes_has_a_timeout_the_hook_answers_well_within(
    repo: Path,
) -> None:
    """Codex, Gemini CLI, Qwen Code and Copilot let a call through when their hook times out,
    OpenCode/Kilo/pi wait for their plugin for ever: each hook's timeout (in its CLI's unit)
    leaves the hook's own deadline, at which it refuses, 35 s to spare."""
    before = snapshot(repo)
    code, out = run("init", "codex", "gemini", "qwen", "copilot", "opencode", "kilo", "pi",
                    "droid", "--command", "/opt/ly/lockyard")  # fmt: skip
    assert code == 0, out
    assert run("init", "claude-code", "--ipc", "/ipc")[0] == 0

    def only_hook(path: str, event: str) -> dict[str, object]:
        [group] = json.loads((repo / path).read_text())["hooks"][event]
        [hook] = group.get("hooks", [group])  # Copilot's entry is the hook itself
        assert isinstance(hook, dict)
        return hook

    seconds = {
        "codex": only_hook(".codex/hooks.json", "PreToolUse")["timeout"],
        "gemini (ms)": only_hook(".gemini/settings.json", "BeforeTool")["timeout"],
        "qwen (ms)": only_hook(".qwen/settings.json", "PreToolUse")["timeout"],
        "copilot": only_hook(".github/hooks/lockyard.json", "preToolUse")["timeoutSec"],
        "droid": only_hook(".factory/settings.json", "PreToolUse")["timeout"],
        "claude-code in a sandbox": only_hook(".claude/settings.json", "PreToolUse")["timeout"],
    }
    assert seconds == {"codex": 60, "gemini (ms)": 60000, "qwen (ms)": 60000, "copilot": 60,
                       "droid": 60, "claude-code in a sandbox": 60}  # fmt: skip
    assert HOOK_DEADLINE_SECONDS == 25
    for plugin in (".opencode/plugin/lockyard.js", ".kilo/plugin/lockyard.js",
                   ".pi/extensions/lockyard.ts"):  # fmt: skip
        text = (repo / plugin).read_text()
        assert "const GUARD_DEADLINE_MS = 25000;" in text, plugin
        assert "const HOOK_TIMEOUT_MS = 60000;" in text, plugin
        assert "did not answer within 25 s" in text, plugin
    # Uninstall recognises the hooks it wrote, timeouts included.
    assert run("uninstall")[0] == 0
    assert snapshot(repo) == before


@pytest.mark.parametrize(
    ("cli", "name"),
    [("pi", ".pi/extensions/lockyard.ts"), ("copilot", ".github/hooks/lockyard.json")],
)
def test_a_guard_file_lockyard_did_not_write_stops_init(repo: Path, cli: str, name: str) -> None:
    (repo / name).parent.mkdir(parents=True)
    (repo / name).write_text('{"version": 1}\n')
    code, out = run("init", cli, "--command", "lockyard")
    assert code == 2
    assert "lockyard did not write it" in out
    assert not (repo / "AGENTS.md").exists()


def test_dry_run_shows_a_diff_and_writes_nothing(repo: Path) -> None:
    code, out = run("init", "codex", "--dry-run", "--command", "lockyard")
    assert code == 0
    assert "+++ b/.codex/config.toml" in out
    assert "+[mcp_servers.lockyard]" in out
    assert "dry run: nothing written" in out
    assert snapshot(repo) == {}
    assert run("init", "codex", "--command", "lockyard")[0] == 0
    code, out = run("uninstall", "--dry-run")
    assert "--- a/.codex/config.toml" in out
    assert (repo / ".codex/config.toml").exists()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (".mcp.json", "{not json", ".mcp.json is not valid JSON"),
        (".mcp.json", "[1]", "holds a JSON list, not an object"),
        (".mcp.json", '{"mcpServers": []}', "mcpServers is not an object"),
        (".mcp.json", '{"mcpServers": {"lockyard": {"command": "npx", "args": ["other-locks"]}}}',
         "already has an MCP server named 'lockyard' that is not the one `lockyard init` writes"),
        (".claude/settings.json", '{"hooks": {"PreToolUse": {}}}',
         "hooks.PreToolUse is not a list"),
        (".codex/config.toml", "model = ", "config.toml is not valid TOML"),
        (".codex/config.toml", '[mcp_servers.lockyard]\ncommand = "x"\n', "lockyard did not write"),
        ("opencode.json", "// jsonc\n{not json", "opencode.json is not valid JSON (with comments)"),
        (".opencode/plugin/lockyard.js", "export {}", "exists and lockyard did not write it"),
        ("AGENTS.md", "<!-- lockyard:begin sha256:0123456789ab -->\nhalf a block\n",
         "never ends"),
    ],
)  # fmt: skip
def test_a_bad_existing_file_stops_init_with_a_clear_error_and_nothing_written(
    repo: Path, name: str, content: str, message: str
) -> None:
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text(content)
    before = snapshot(repo)
    code, out = run("init", "claude-code", "codex", "opencode", "--command", "lockyard")
    assert code == 2
    assert message in out
    assert "lockyard: error:" in out
    assert snapshot(repo) == before


def test_init_outside_a_repository_and_unknown_clis_are_usage_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = run("init")
    assert code == 2
    assert "is not inside a git repository" in out
    code, out = run("init", "--repo", str(tmp_path / "missing"))
    assert (code, "is not a directory" in out) == (2, True)
    subprocess.run(["git", "init", "-q"], check=True)
    code, out = run("init", "cursor")
    assert code == 2
    assert "unknown agent CLI 'cursor'" in out
    assert list(tmp_path.iterdir()) == [tmp_path / ".git"]


def test_init_never_asks_when_stdin_is_not_a_terminal(repo: Path) -> None:
    done = subprocess.run(
        [LOCKYARD, "init", "--command", "lockyard"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=repo, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (repo / ".mcp.json").exists()


def test_the_default_command_is_this_installation(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert run("init")[0] == 0
    command = json.loads((repo / ".mcp.json").read_text())["mcpServers"]["lockyard"]["command"]
    assert command == LOCKYARD
    monkeypatch.setenv("PATH", f"{Path(LOCKYARD).parent}:/usr/bin:/bin")
    assert run("init")[0] == 0
    assert (
        json.loads((repo / ".mcp.json").read_text())["mcpServers"]["lockyard"]["command"]
        == "lockyard"
    )
