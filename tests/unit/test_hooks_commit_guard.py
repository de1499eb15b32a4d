"""The `git commit` guard: command parsing (pure) and decisions on a real git repository."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from lockyard.infra.hooks.commit_guard.decide import CommitPlan, plan_commit
from lockyard.infra.hooks.commit_guard.hook import make_commit_guard_hook
from lockyard.infra.lockstore import LockStore


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ('git commit -m "fix a"', CommitPlan(commits=True)),
        ('git commit -am "x y"', CommitPlan(commits=True, all_tracked=True)),
        ("git commit -ma", CommitPlan(commits=True)),  # "a" is the message
        ("git commit --all --message=m", CommitPlan(commits=True, all_tracked=True)),
        ("git commit --message -a", CommitPlan(commits=True)),  # "-a" is the message
        ("git commit -F msg.txt", CommitPlan(commits=True)),
        ("git commit -i a.py -m x", CommitPlan(commits=True, include=True, commit_paths=["a.py"])),
        ("git commit -- -odd.py", CommitPlan(commits=True, commit_paths=["-odd.py"])),
        ("git commit a.py -m x", CommitPlan(commits=True, commit_paths=["a.py"])),
        (
            "git add a.py b.py && git commit -m msg",
            CommitPlan(commits=True, add_paths=["a.py", "b.py"]),
        ),
        ("git add -A; git commit -qm x", CommitPlan(commits=True, add_everything=True)),
        ("git add . && git commit -m x", CommitPlan(commits=True, add_everything=True)),
        (
            "cd sub && git -C .. commit -a",
            CommitPlan(commits=True, all_tracked=True, directory="."),
        ),
        ("cd sub && git add x.py", CommitPlan(add_paths=["sub/x.py"])),
        ("GIT_AUTHOR_NAME=x git commit -m y", CommitPlan(commits=True)),
        ("sudo env A=1 git -c user.name=x commit -m y", CommitPlan(commits=True)),
        ("/usr/bin/git commit -m y", CommitPlan(commits=True)),
        ("echo commit", CommitPlan()),
        ("git log --grep commit", CommitPlan()),
        ("git status", CommitPlan()),
        ("git", CommitPlan()),
        ("git -C", CommitPlan()),
    ],
)
def test_commands_are_read_for_what_they_commit(command: str, expected: CommitPlan) -> None:
    assert plan_commit(command) == expected


def test_an_unparseable_command_gives_no_plan() -> None:
    assert plan_commit('git commit -m "unbalanced') is None


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "sub").mkdir(parents=True)
    for name in ("a.py", "b.py", "sub/c.py"):
        (root / name).write_text("v1\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "init")
    return root


def bash(command: str, cwd: Path | None) -> dict[str, Any]:
    return {
        "session_id": "s1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": str(cwd) if cwd is not None else "",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "commit"},
        "tool_use_id": "toolu_1",
    }


async def decide(store: LockStore, command: str, cwd: Path | None) -> str | None:
    """The deny reason, or None when the command may run."""
    guard = make_commit_guard_hook(store, "a1")
    output = await guard(bash(command, cwd), "toolu_1", {"signal": None})
    if output == {}:
        return None
    specific = output["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny"
    return specific["permissionDecisionReason"]  # type: ignore[no-any-return]


def modify(repo: Path, *names: str) -> None:
    for name in names:
        (repo / name).write_text("v2\n")


@pytest.mark.anyio
async def test_staged_files_must_be_locked(store: LockStore, repo: Path) -> None:
    modify(repo, "a.py")
    git(repo, "add", "a.py")
    text = await decide(store, 'git commit -m "change a"', repo)
    assert text is not None
    key = store.canonicalize("a.py")
    assert f"{key} (not locked)" in text
    assert f'{{"filepaths": ["{key}"]}}' in text
    assert "git restore --staged" in text
    assert store.try_lock("a.py", "a1")
    assert await decide(store, 'git commit -m "change a"', repo) is None


@pytest.mark.anyio
async def test_the_deny_names_other_holders(store: LockStore, repo: Path) -> None:
    modify(repo, "a.py", "b.py")
    git(repo, "add", "a.py", "b.py")
    assert store.try_lock("a.py", "a1")
    assert store.try_lock("b.py", "a2")
    text = await decide(store, "git commit -m x", repo)
    assert text is not None
    assert f"{store.canonicalize('b.py')} (locked by a2)" in text
    assert store.canonicalize("a.py") not in text


@pytest.mark.anyio
async def test_commit_all_includes_modified_tracked_files(store: LockStore, repo: Path) -> None:
    modify(repo, "b.py")
    assert await decide(store, "git commit -m x", repo) is None  # nothing staged
    assert await decide(store, "git commit -am x", repo) is not None


@pytest.mark.anyio
async def test_commit_with_paths_takes_only_those_paths(store: LockStore, repo: Path) -> None:
    modify(repo, "a.py", "b.py")
    git(repo, "add", "b.py")  # staged by another agent in the shared index
    assert store.try_lock("a.py", "a1")
    assert await decide(store, "git commit a.py -m mine", repo) is None
    assert await decide(store, "git commit -i a.py -m mine", repo) is not None


@pytest.mark.anyio
async def test_add_in_the_same_command_counts(store: LockStore, repo: Path) -> None:
    modify(repo, "b.py")
    assert await decide(store, "git add b.py && git commit -m x", repo) is not None
    (repo / "new.py").write_text("new\n")
    assert store.try_lock("b.py", "a1")
    text = await decide(store, "git add -A && git commit -m x", repo)
    assert text is not None
    assert store.canonicalize("new.py") in text


@pytest.mark.anyio
async def test_cd_and_dash_c_are_followed(store: LockStore, repo: Path, tmp_path: Path) -> None:
    modify(repo, "sub/c.py")
    assert await decide(store, "cd sub && git commit c.py -m x", repo) is not None
    assert await decide(store, f"git -C {repo} commit -am x", tmp_path) is not None


@pytest.mark.anyio
async def test_an_unparseable_commit_is_judged_on_staged_and_modified(
    store: LockStore, repo: Path
) -> None:
    modify(repo, "b.py")
    assert await decide(store, 'git commit -m "oops', repo) is not None


@pytest.mark.anyio
@pytest.mark.parametrize("command", ["git status", "echo commit", "git log --grep=commit", "ls"])
async def test_commands_that_do_not_commit_pass(store: LockStore, repo: Path, command: str) -> None:
    modify(repo, "a.py")
    git(repo, "add", "a.py")
    assert await decide(store, command, repo) is None


@pytest.mark.anyio
async def test_outside_a_git_repository_the_command_is_left_alone(
    store: LockStore, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "not-git"
    elsewhere.mkdir()
    assert await decide(store, "git commit -am x", elsewhere) is None


@pytest.mark.anyio
async def test_without_a_cwd_the_repository_is_used(store: LockStore, repo: Path) -> None:
    modify(repo, "a.py")
    assert await decide(store, "git commit -am x", None) is not None


@pytest.mark.anyio
async def test_files_of_another_checkout_are_not_judged(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    store = LockStore(tmp_path / "elsewhere", tmp_path / "locks")
    modify(repo, "a.py")
    assert await decide(store, "git commit -am x", repo) is None


@pytest.mark.anyio
async def test_a_store_opened_on_a_subdirectory_guards_the_whole_checkout(
    repo: Path, tmp_path: Path
) -> None:
    store = LockStore(repo / "sub", tmp_path / "locks")
    assert store.root == str(repo)
    modify(repo, "a.py")
    reason = await decide(store, "git commit -am x", repo / "sub")
    assert reason is not None
    assert "a.py (not locked)" in reason
    assert store.try_lock("a.py", "a1")
    assert await decide(store, "git commit -am x", repo / "sub") is None


@pytest.mark.anyio
@pytest.mark.parametrize(
    "input_data",
    [
        {"tool_name": "Write", "tool_input": {"command": "git commit"}},
        {"tool_name": "Bash", "tool_input": "git commit"},
        {"tool_name": "Bash", "tool_input": {"command": 5}},
        "garbage",
    ],
)
async def test_other_tools_and_malformed_inputs_pass(store: LockStore, input_data: Any) -> None:
    guard = make_commit_guard_hook(store, "a1")
    assert await guard(input_data, None, {"signal": None}) == {}


@pytest.mark.anyio
async def test_an_unreadable_lock_blocks_the_commit_and_does_not_crash_the_guard(
    store: LockStore, repo: Path
) -> None:
    from lockyard.infra.lockstore.paths import lock_name
    from lockyard.infra.tools.lock_tools import UNREADABLE_HOLDER

    modify(repo, "a.py")
    git(repo, "add", "a.py")
    key = store.canonicalize("a.py")
    entry = store.lock_dir / f"{lock_name(store.namespace, key)}.lock"
    entry.mkdir()
    (entry / "one").write_text("{}")
    (entry / "two").write_text("{}")
    text = await decide(store, "git commit -m x", repo)
    assert text is not None
    assert f"{key} (locked by {UNREADABLE_HOLDER})" in text
