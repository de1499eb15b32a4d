"""`lockyard init` ends with what to do next: restart the sessions, nothing else to start, what
each CLI asks the first time, and where to check the set-up."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_support import LOCKYARD


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def init(repo: Path, *args: str) -> str:
    done = subprocess.run(
        [LOCKYARD, *args, "--repo", str(repo)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_init_ends_with_the_next_steps_at_80_columns(repo: Path) -> None:
    out = init(repo, "init", "claude-code", "codex")
    steps = out[out.index("Next:") :]
    assert "Restart the Claude Code, Codex CLI sessions" in steps
    assert "Nothing else to start" in steps
    assert "accept the trust dialog" in steps  # Claude Code's
    assert "reviewed and trusted" in steps  # Codex's hooks
    assert "lockyard doctor" in steps
    assert max(map(len, steps.splitlines())) <= 80


def test_a_dry_run_and_an_uninstall_end_without_next_steps(repo: Path) -> None:
    assert "Next:" not in init(repo, "init", "gemini", "--dry-run")
    assert "Next:" in init(repo, "init", "gemini")
    assert "trust" not in init(repo, "init", "gemini")  # nothing Gemini asks first
    assert "Next:" not in init(repo, "uninstall", "gemini")
