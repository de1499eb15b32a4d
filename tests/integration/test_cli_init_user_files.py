"""`lockyard init` / `uninstall` never lose a byte of the user's files: the cases found by
attacking them (issue 33, points 5-7), each through the real command on a real repository."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lockyard.cli.app import app

LOCKYARD = str(Path(sys.executable).parent / "lockyard")
ALL = ("claude-code", "codex", "opencode", "gemini")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.chdir(root)
    return root


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout + result.stderr


def tree(root: Path) -> dict[str, bytes | str]:
    """Every entry under `root` but .git: a file's bytes, a symlink's target, a directory."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            key = str(path.relative_to(root))
            if path.is_symlink():
                found[key] = "-> " + os.readlink(path)
            elif path.is_dir():
                found[key] = "dir"
            else:
                found[key] = path.read_bytes()
    return found


# --- 5: never outside the repository ------------------------------------------------------


@pytest.mark.parametrize("link", [".claude", ".codex", ".gemini", ".opencode"])
def test_a_config_directory_symlinked_out_of_the_repository_is_refused(
    repo: Path, tmp_path: Path, link: str
) -> None:
    home_config = tmp_path / "home-config"
    home_config.mkdir()
    (home_config / "settings.json").write_text('{"theme": "dark"}\n')
    (repo / link).symlink_to(home_config)
    before = tree(home_config)
    code, out = run("init", *ALL, "--command", "lockyard")
    assert code == 2
    assert f"{link} is a symlink to {home_config}" in out
    assert "--write-outside-repo" in out
    assert tree(home_config) == before
    assert not (repo / ".mcp.json").exists()  # nothing at all was written


def test_write_outside_repo_writes_through_the_symlink_and_uninstall_takes_it_back(
    repo: Path, tmp_path: Path
) -> None:
    home_claude = tmp_path / "home-claude"
    home_claude.mkdir()
    (home_claude / "settings.json").write_text('{\n  "theme": "dark"\n}\n')
    (repo / ".claude").symlink_to(home_claude)
    before = tree(home_claude)
    code, out = run("init", "claude-code", "--command", "lockyard", "--write-outside-repo")
    assert code == 0, out
    assert "/v1/pre-tool-use?cli=claude-code" in (home_claude / "settings.json").read_text()
    assert (repo / ".claude").is_symlink()
    code, out = run("uninstall", "claude-code")
    assert code == 2  # uninstall must be asked too
    assert "--write-outside-repo" in out
    assert run("uninstall", "claude-code", "--write-outside-repo")[0] == 0
    assert tree(home_claude) == before
    assert (repo / ".claude").is_symlink()


def test_a_symlinked_file_inside_the_repository_stays_a_symlink(repo: Path) -> None:
    (repo / "config").mkdir()
    (repo / "config/mcp.json").write_text('{"mcpServers": {"db": {"command": "pg"}}}\n')
    (repo / ".mcp.json").symlink_to("config/mcp.json")
    before = tree(repo)
    code, out = run("init", "claude-code", "--command", "lockyard")
    assert code == 0, out
    assert "updated .mcp.json (-> " in out
    assert os.readlink(repo / ".mcp.json") == "config/mcp.json"
    servers = json.loads((repo / "config/mcp.json").read_text())["mcpServers"]
    assert set(servers) == {"db", "lockyard"}
    assert run("uninstall")[0] == 0
    assert tree(repo) == before


def test_a_symlinked_file_pointing_outside_is_refused(repo: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared-mcp.json"
    shared.write_text("{}\n")
    (repo / ".mcp.json").symlink_to(shared)
    code, out = run("init", "claude-code", "--command", "lockyard")
    assert code == 2
    assert ".mcp.json is a symlink to" in out
    assert shared.read_text() == "{}\n"


def test_a_file_with_other_hard_links_is_refused(repo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text("# Shared notes\n")
    os.link(elsewhere, repo / "CLAUDE.md")
    code, out = run("init", "claude-code", "--command", "lockyard")
    assert code == 2
    assert "CLAUDE.md has 2 hard links" in out
    assert elsewhere.read_text() == "# Shared notes\n"


# --- 7: only regular files, never blocking -----------------------------------------------


@pytest.mark.parametrize("command", ["init", "uninstall"])
def test_a_fifo_in_place_of_a_config_file_is_refused_without_blocking(
    repo: Path, command: str
) -> None:
    os.mkfifo(repo / ".mcp.json")
    extra = ["--command", "lockyard"] if command == "init" else []
    done = subprocess.run(
        [LOCKYARD, command, "claude-code", *extra],
        capture_output=True, text=True, cwd=repo, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert ".mcp.json is a named pipe (FIFO), not a regular file" in done.stderr
    assert "Traceback" not in done.stderr
    assert stat.S_ISFIFO(os.lstat(repo / ".mcp.json").st_mode)


def test_a_directory_in_place_of_a_config_file_is_refused(repo: Path) -> None:
    (repo / ".mcp.json").mkdir()
    code, out = run("init", "claude-code", "--command", "lockyard")
    assert code == 2
    assert ".mcp.json is a directory, not a regular file" in out


# --- 6: the user's text between marker lines is theirs ------------------------------------


@pytest.mark.parametrize(("cli", "name"), [("claude-code", "CLAUDE.md"), ("codex", "AGENTS.md"),
                                           ("gemini", "GEMINI.md")])  # fmt: skip
def test_markers_a_person_wrote_are_their_text(repo: Path, cli: str, name: str) -> None:
    text = "# Notes\n<!-- lockyard:begin -->\nmine, keep me\n<!-- lockyard:end -->\ntail\n"
    (repo / name).write_text(text)
    assert run("init", cli, "--command", "lockyard")[0] == 0
    assert (repo / name).read_text().startswith(text)
    assert run("uninstall", cli)[0] == 0
    assert (repo / name).read_text() == text


def test_markers_inside_a_toml_multiline_string_are_the_strings_text(repo: Path) -> None:
    (repo / ".codex").mkdir()
    text = (
        'notes = """\n# lockyard:begin\nkeep this\n# lockyard:end\n"""\n'
        "literal = '''\n# lockyard:end\n'''\n"
    )
    (repo / ".codex/config.toml").write_text(text)
    assert run("init", "codex", "--command", "lockyard")[0] == 0
    assert run("uninstall", "codex")[0] == 0
    assert (repo / ".codex/config.toml").read_text() == text


def test_a_block_edited_by_hand_is_left_alone_with_the_lines_named(repo: Path) -> None:
    assert run("init", "claude-code", "--command", "lockyard")[0] == 0
    claude_md = repo / "CLAUDE.md"
    claude_md.write_text(claude_md.read_text().replace("lock them all", "lock them ALL"))
    before = tree(repo)
    for command in (["init", "claude-code", "--command", "lockyard"], ["uninstall"]):
        code, out = run(*command)
        assert code == 2
        assert "CLAUDE.md, lines 1-" in out
        assert "not what lockyard wrote there" in out
        assert tree(repo) == before


def test_uninstall_after_text_was_added_below_the_block_joins_no_lines(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("# Notes")  # no final line break
    assert run("init", "codex", "--command", "lockyard")[0] == 0
    with (repo / "AGENTS.md").open("a") as agents:
        agents.write("tail\n")
    assert run("uninstall", "codex")[0] == 0
    assert (repo / "AGENTS.md").read_text() == "# Notes\ntail\n"


# --- 7: every other byte as it was --------------------------------------------------------


def test_numbers_duplicates_and_formatting_survive_init_and_uninstall(repo: Path) -> None:
    text = '{"a": 1e400, "b": 1, "b": 2,\n\t"n": -0.0E-0, "s": "\\u00e9\\/"}'
    (repo / ".mcp.json").write_text(text)
    assert run("init", "claude-code", "--command", "lockyard")[0] == 0
    after = (repo / ".mcp.json").read_text()
    assert '"a": 1e400, "b": 1, "b": 2' in after
    assert '"s": "\\u00e9\\/"' in after
    assert run("uninstall")[0] == 0
    assert (repo / ".mcp.json").read_text() == text


def test_a_deeply_nested_file_round_trips_without_a_traceback(repo: Path) -> None:
    depth = 100_000
    text = '{"deep": ' + "[" * depth + "]" * depth + "}\n"
    (repo / ".mcp.json").write_text(text)
    code, out = run("init", "claude-code", "--command", "lockyard")
    assert code == 0, out[-500:]
    assert run("uninstall")[0] == 0
    assert (repo / ".mcp.json").read_text() == text


def test_crlf_files_keep_their_line_breaks(repo: Path) -> None:
    files = {
        "CLAUDE.md": b"# Rules\r\n\r\nBe kind.\r\n",
        ".mcp.json": b'{\r\n  "mcpServers": {\r\n    "db": {"command": "pg"}\r\n  }\r\n}\r\n',
    }
    for name, data in files.items():
        (repo / name).write_bytes(data)
    assert run("init", "claude-code", "--command", "lockyard")[0] == 0
    assert b"\n" not in (repo / "CLAUDE.md").read_bytes().replace(b"\r\n", b"")
    assert b"\n" not in (repo / ".mcp.json").read_bytes().replace(b"\r\n", b"")
    assert run("uninstall")[0] == 0
    assert {name: (repo / name).read_bytes() for name in files} == files


@pytest.mark.parametrize("command", ['lock"yard', "/opt/my tools/lockyard", "lock'yard\\x", "😀"])
def test_uninstall_recognises_what_init_wrote_whatever_the_command(
    repo: Path, command: str
) -> None:
    assert run("init", *ALL, "--command", command, "--lock-dir", "/tmp/a b")[0] == 0
    assert run("uninstall")[0] == 0
    assert tree(repo) == {}


def test_a_files_permission_bits_are_kept(repo: Path) -> None:
    (repo / ".mcp.json").write_text("{}")
    (repo / ".mcp.json").chmod(0o600)
    assert run("init", "claude-code", "--command", "lockyard")[0] == 0
    assert stat.S_IMODE((repo / ".mcp.json").stat().st_mode) == 0o600


def test_an_existing_empty_file_is_kept_empty_and_an_absent_one_absent(repo: Path) -> None:
    (repo / ".mcp.json").write_text("")
    (repo / "CLAUDE.md").write_text("")
    assert run("init", "claude-code", "--command", "lockyard")[0] == 0
    assert run("uninstall")[0] == 0
    assert tree(repo) == {".mcp.json": b"", "CLAUDE.md": b""}


def test_an_empty_container_of_the_users_stays(repo: Path) -> None:
    text = '{\n  "permissions": {"allow": []},\n  "hooks": {\n  },\n  "x": {}\n}\n'
    (repo / ".claude").mkdir()
    (repo / ".claude/settings.json").write_text(text)
    assert run("init", "claude-code", "--command", "lockyard")[0] == 0
    settings = json.loads((repo / ".claude/settings.json").read_text())
    assert settings["permissions"]["allow"] == [
        "mcp__lockyard__lock_acquire",
        "mcp__lockyard__lock_release",
        "mcp__lockyard__lock_status",
        "Bash(lockyard git-turn:*)",  # the prefix git turns ask for, never a prompt
    ]
    assert run("uninstall")[0] == 0
    assert (repo / ".claude/settings.json").read_text() == text


def test_gemini_and_opencode_settings_may_hold_comments(repo: Path) -> None:
    (repo / ".gemini").mkdir()
    gemini = '// my settings\n{\n  /* theme */ "theme": "dark", // dark\n}\n'
    opencode = '{\n  // models\n  "model": "x",\n}\n'
    (repo / ".gemini/settings.json").write_text(gemini)
    (repo / "opencode.json").write_text(opencode)
    assert run("init", "gemini", "opencode", "--command", "lockyard")[0] == 0
    assert "// dark" in (repo / ".gemini/settings.json").read_text()
    assert run("uninstall")[0] == 0
    assert (repo / ".gemini/settings.json").read_text() == gemini
    assert (repo / "opencode.json").read_text() == opencode


def test_an_undecodable_command_is_a_one_line_error(repo: Path) -> None:
    done = subprocess.run(
        [LOCKYARD.encode(), b"init", b"--command", b"lock\xffyard"],
        capture_output=True, cwd=repo, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert b"holds bytes that are not UTF-8" in done.stderr
    assert b"Traceback" not in done.stderr
    assert tree(repo) == {}
