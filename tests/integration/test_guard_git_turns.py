"""The shell guard and git's turns: with turns on, a line that runs a repository-locking git
command is refused until it takes its turn, and the refusal gives the exact prefix; the line
so prefixed runs and commits. A line that holds a turn may never wait for file locks."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lockyard.cli import hook
from lockyard.infra.gitturn.switch import switch_turns
from lockyard.infra.hooks.shell_guard.decide import (
    Decision,
    ShellGuardPolicy,
    decide_shell_command,
)
from lockyard.infra.hooks.shell_guard.git_turn import TURNS_VARIABLE
from lockyard.infra.hooks.shell_guard.hook import make_shell_guard_hook
from lockyard.infra.lockstore import LockStore

TURNS_ON = ShellGuardPolicy(git_turns=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.email", "t@example.com"],
        ["config", "user.name", "t"],
    ):
        subprocess.run(["git", *args], cwd=root, check=True)
    (root / "a.py").write_text("a\n")
    return root


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> LockStore:
    return LockStore(repo, lock_dir)


def decide(store: LockStore, command: str, policy: ShellGuardPolicy = TURNS_ON) -> Decision:
    return decide_shell_command(command, store.root, "alice", store, policy=policy)


def test_a_line_that_commits_without_a_turn_is_refused_with_the_prefix_to_put_in_front(
    store: LockStore,
) -> None:
    decision = decide(store, "git add a.py && git commit -m one")
    assert not decision.allowed
    assert decision.git_turn is not None
    assert decision.git_turn.endswith(" git-turn --agent alice && ")
    assert "`git add a.py` takes git's repository locks" in str(decision.reason)
    assert f"That is: {decision.git_turn}git add a.py && git commit -m one" in str(decision.reason)


def test_the_line_the_refusal_gives_is_allowed_and_commits_in_its_turn(
    store: LockStore, repo: Path
) -> None:
    assert store.try_lock("a.py", "alice")
    command = "git add a.py && git commit -q -m one"
    prefix = decide(store, command).git_turn
    assert prefix is not None
    decision = decide(store, prefix + command)
    assert (decision.allowed, decision.reason) == (True, None)
    subprocess.run(["bash", "-c", prefix + command], cwd=repo, check=True, timeout=120)
    log = subprocess.run(
        ["git", "log", "--format=%s", "--name-only"], cwd=repo, capture_output=True, text=True
    )
    assert log.stdout.split() == ["one", "a.py"]


def test_read_only_git_queries_take_no_turn(store: LockStore) -> None:
    decision = decide(store, "git status && git log --oneline && git diff a.py")
    assert (decision.allowed, decision.git_turn) == (True, None)


def test_with_git_turns_off_git_lines_are_judged_as_before(store: LockStore) -> None:
    assert store.try_lock("a.py", "alice")
    decision = decide(store, "git add a.py", ShellGuardPolicy())
    assert (decision.allowed, decision.git_turn) == (True, None)


def test_a_line_refused_for_unlocked_files_also_says_to_take_the_turn(store: LockStore) -> None:
    decision = decide(store, "echo b > a.py && git add a.py")
    assert not decision.allowed
    assert "files you have not locked" in str(decision.reason)
    assert "git-turn --agent alice" in str(decision.reason)


@pytest.mark.parametrize("policy", [TURNS_ON, ShellGuardPolicy()], ids=["turns on", "turns off"])
def test_a_line_that_holds_a_turn_and_waits_for_file_locks_is_refused(
    store: LockStore, policy: ShellGuardPolicy
) -> None:
    decision = decide(
        store, "lockyard git-turn --agent alice && lockyard lock a.py -- make", policy
    )
    assert not decision.allowed
    assert "Run them as two commands" in str(decision.reason)


def test_a_lock_waiter_without_git_holds_no_turn_and_is_allowed(store: LockStore) -> None:
    assert decide(store, "lockyard lock a.py -- make").allowed


@pytest.mark.anyio
async def test_the_sdk_hook_refuses_a_commit_without_a_turn_when_turns_are_on(
    store: LockStore,
) -> None:
    hook_fn = make_shell_guard_hook(store, "alice", policy=TURNS_ON)
    call = {"tool_name": "Bash", "tool_input": {"command": "git commit -m x"}, "cwd": store.root}
    output = await hook_fn(call, None, {})
    specific = output["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny"
    assert "git-turn --agent alice" in specific["permissionDecisionReason"]


@pytest.mark.parametrize(
    "setting", ["1", "init --git-turns", ""],
    ids=["LOCKYARD_GIT_TURNS=1", "the clone's switch", "neither"],
)  # fmt: skip
def test_an_agent_cli_hook_asks_for_the_turn_when_its_environment_or_the_clone_turns_them_on(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    store: LockStore,
    repo: Path,
    lock_dir: Path,
    setting: str,
) -> None:
    """The clone's switch reaches a hook whose CLI passes it no environment (Codex)."""
    monkeypatch.setenv(TURNS_VARIABLE, "1" if setting == "1" else "")
    if setting == "init --git-turns":
        assert switch_turns(str(repo), True)
    assert store.try_lock("a.py", "alice")
    call = {"tool_name": "Bash", "tool_input": {"command": "git add a.py"}, "cwd": str(repo)}
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(call).encode())))
    code = hook.main(
        ["pre-tool-use", "--cli", "claude-code", "--agent-id", "alice", "--repo", str(repo),
         f"--lock-dir={lock_dir}"]
    )  # fmt: skip
    out, _err = capsys.readouterr()
    assert code == 0
    if setting:
        reason = json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"]
        assert "git-turn --agent alice && git add a.py" in reason
    else:
        assert out == ""
