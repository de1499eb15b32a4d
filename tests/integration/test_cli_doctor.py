"""`lockyard doctor` checks a real repository set up by `lockyard init`, with real lock-holding
processes, fake agent CLIs on PATH and the CLIs' own trust files in a throwaway home."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_support import LOCKYARD, Agents

from polling_support import wait_until


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path.resolve()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    (path / "bin").mkdir(parents=True)
    return path


@pytest.fixture
def lock_dir(tmp_path: Path) -> Path:
    path = tmp_path / "locks"
    path.mkdir(mode=0o700)
    return path


def run(repo: Path, home: Path, lock_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`lockyard *args` in `repo`, with `home` as HOME (and its bin/ first on PATH)."""
    env = {k: v for k, v in os.environ.items() if k not in {"CLAUDE_CONFIG_DIR", "CODEX_HOME"}}
    env |= {
        "HOME": str(home),
        "PATH": f"{home / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        "LOCKYARD_LOCK_DIR": str(lock_dir),
    }
    return subprocess.run(
        [LOCKYARD, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=300
    )


def doctor(repo: Path, home: Path, lock_dir: Path) -> tuple[int, dict[str, dict[str, Any]]]:
    """Exit code and each finding by its check's name."""
    done = run(repo, home, lock_dir, "doctor", "--json")
    payload = json.loads(done.stdout)
    assert payload["ok"] is (done.returncode == 0), done.stderr
    return done.returncode, {finding["check"]: finding for finding in payload["checks"]}


def fake_cli(home: Path, name: str, version_line: str) -> None:
    script = home / "bin" / name
    script.write_text(f"#!/bin/sh\necho '{version_line}'\n")
    script.chmod(0o755)


def trust_claude_code(home: Path, repo: Path) -> None:
    state = {"projects": {str(repo): {"hasTrustDialogAccepted": True}}}
    (home / ".claude.json").write_text(json.dumps(state))


def init(repo: Path, home: Path, lock_dir: Path, *args: str) -> None:
    done = run(repo, home, lock_dir, "init", *args)
    assert done.returncode == 0, done.stderr


def test_a_repository_set_up_as_init_wrote_it_has_nothing_to_fix(
    repo: Path, home: Path, lock_dir: Path
) -> None:
    init(repo, home, lock_dir, "claude-code", "--command", LOCKYARD)
    fake_cli(home, "claude", "2.1.330 (Claude Code)")
    trust_claude_code(home, repo)
    code, found = doctor(repo, home, lock_dir)
    assert code == 0
    statuses = {check: finding["status"] for check, finding in found.items()}
    assert statuses == {
        "lockyard": "ok",
        "lock store": "ok",
        "deadlock detection": "ok",
        "stale locks": "ok",
        "idle limit": "ok",
        "Claude Code: configuration": "ok",
        "Claude Code: lockyard command": "ok",
        "Claude Code: version": "ok",
        "Claude Code: hooks run": "ok",
    }
    assert LOCKYARD in found["Claude Code: lockyard command"]["detail"]


def test_a_hook_another_tool_removed_is_a_problem_until_init_puts_it_back(
    repo: Path, home: Path, lock_dir: Path
) -> None:
    init(repo, home, lock_dir, "claude-code", "--command", LOCKYARD)
    settings = repo / ".claude" / "settings.json"
    document = json.loads(settings.read_text())
    document["hooks"] = {"PreToolUse": [{"matcher": "Bash", "hooks": []}]}  # someone's rewrite
    settings.write_text(json.dumps(document))

    code, found = doctor(repo, home, lock_dir)
    assert code == 10
    broken = found["Claude Code: configuration"]
    assert broken["status"] == "problem"
    assert ".claude/settings.json" in broken["detail"]
    assert broken["fix"].startswith("lockyard init claude-code")

    init(repo, home, lock_dir, "claude-code", "--command", LOCKYARD)
    code, found = doctor(repo, home, lock_dir)
    assert found["Claude Code: configuration"]["status"] == "ok"


def test_a_configuration_that_starts_a_missing_lockyard_is_a_problem(
    repo: Path, home: Path, lock_dir: Path
) -> None:
    init(repo, home, lock_dir, "gemini", "--command", "/opt/gone/bin/lockyard")
    code, found = doctor(repo, home, lock_dir)
    assert code == 10
    command = found["Gemini CLI: lockyard command"]
    assert command["status"] == "problem"
    assert "/opt/gone/bin/lockyard" in command["detail"]
    assert "--command" in command["fix"]


def test_a_cli_older_than_the_verified_one_is_a_warning_and_a_missing_one_too(
    repo: Path, home: Path, lock_dir: Path
) -> None:
    init(repo, home, lock_dir, "gemini", "--command", LOCKYARD)
    code, found = doctor(repo, home, lock_dir)
    assert found["Gemini CLI: version"]["status"] == "warning"
    assert "not on PATH" in found["Gemini CLI: version"]["detail"]

    fake_cli(home, "gemini", "0.40.2")
    code, found = doctor(repo, home, lock_dir)
    assert code == 0  # warnings only
    old = found["Gemini CLI: version"]
    assert old["status"] == "warning"
    assert "0.40.2" in old["detail"]
    assert "0.61.0" in old["fix"]

    fake_cli(home, "gemini", "0.62.1")
    code, found = doctor(repo, home, lock_dir)
    assert found["Gemini CLI: version"]["status"] == "ok"


def test_claude_code_that_will_not_run_the_hook_is_named(
    repo: Path, home: Path, lock_dir: Path
) -> None:
    init(repo, home, lock_dir, "claude-code", "--command", LOCKYARD)
    code, found = doctor(repo, home, lock_dir)
    untrusted = found["Claude Code: hooks run"]
    assert untrusted["status"] == "warning"
    assert "trust dialog" in untrusted["fix"]

    trust_claude_code(home, repo)
    (repo / ".claude" / "settings.local.json").write_text('{"disableAllHooks": true}')
    code, found = doctor(repo, home, lock_dir)
    assert code == 10
    off = found["Claude Code: hooks run"]
    assert off["status"] == "problem"
    assert "settings.local.json" in off["detail"]


def test_codex_in_an_untrusted_project_loads_nothing_of_lockyard(
    repo: Path, home: Path, lock_dir: Path
) -> None:
    init(repo, home, lock_dir, "codex", "--command", LOCKYARD)
    code, found = doctor(repo, home, lock_dir)
    assert code == 10
    assert found["Codex CLI: hooks run"]["status"] == "problem"

    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(f'[projects."{repo}"]\ntrust_level = "trusted"\n')
    code, found = doctor(repo, home, lock_dir)
    assert code == 0
    assert found["Codex CLI: hooks run"]["status"] == "warning"  # hook trust: not readable
    assert found["Codex CLI: lockyard command"]["status"] == "ok"


def test_locks_of_a_killed_agent_are_stale_and_clean_is_the_fix(
    repo: Path, home: Path, lock_dir: Path, agents: Agents
) -> None:
    agents.start("alive", holds="a.py")
    agents.kill(agents.start("killed", holds="b.py"))
    _code, found = doctor(repo, home, lock_dir)
    stale = found["stale locks"]
    assert stale["status"] == "warning"
    assert "b.py (killed)" in stale["detail"]
    assert "a.py" not in stale["detail"]
    assert stale["fix"].startswith("lockyard clean")


def test_a_lock_directory_others_may_write_is_a_warning(
    repo: Path, home: Path, lock_dir: Path
) -> None:
    lock_dir.chmod(0o777)
    _code, found = doctor(repo, home, lock_dir)
    assert found["lock store"]["status"] == "warning"
    assert "chmod go-w" in found["lock store"]["fix"]


def test_the_report_reads_at_80_columns_and_says_what_to_fix(
    repo: Path, home: Path, lock_dir: Path
) -> None:
    init(repo, home, lock_dir, "codex", "--command", LOCKYARD)
    done = run(repo, home, lock_dir, "doctor")
    assert done.returncode == 10
    lines = done.stdout.splitlines()
    assert max(map(len, lines)) <= 80, done.stdout
    assert any(line.startswith("PROBLEM  Codex CLI: hooks run") for line in lines)
    assert any(line.strip().startswith("fix: run codex in") for line in lines)
    assert lines[-1].startswith("1 problem(s) to fix")


def test_doctor_outside_a_repository_says_where_to_run_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [LOCKYARD, "doctor"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert "not inside a git repository" in done.stderr


def test_held_locks_with_nobody_leading_deadlock_detection_are_a_warning_until_one_leads(
    repo: Path, home: Path, lock_dir: Path, agents: Agents
) -> None:
    _code, found = doctor(repo, home, lock_dir)
    assert found["deadlock detection"]["status"] == "ok"  # nothing held: nothing to watch

    agents.start("script", holds="a.py")  # a plain LockStore user: it does not stand
    _code, found = doctor(repo, home, lock_dir)
    unled = found["deadlock detection"]
    assert unled["status"] == "warning"
    assert "script" in unled["detail"]
    assert unled["fix"].startswith("run lockyard monitor")

    monitor = subprocess.Popen(
        [LOCKYARD, "monitor", "--lock-dir", str(lock_dir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(
            lambda: doctor(repo, home, lock_dir)[1]["deadlock detection"]["status"] == "ok",
            "the monitor leads",
            within=240,
        )
        _code, found = doctor(repo, home, lock_dir)
        assert f"pid {monitor.pid}" in found["deadlock detection"]["detail"]
    finally:
        monitor.terminate()
        monitor.wait(timeout=60)
