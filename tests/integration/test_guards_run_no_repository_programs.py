"""The guards never run a program the repository's configuration names.

Each program below is planted in a real repository (its configuration, an included file,
`.gitattributes`) as a command that leaves a marker file. Plain git is shown to run each
plant (so the plant works), then the shell guard and the commit guard judge commands that make
them ask git (checkout, restore, reset, stash, apply, rm, clean, an alias, a commit of
modified files): no marker may appear, whatever the decision.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lockyard.infra.hooks import git_query
from lockyard.infra.hooks.commit_guard.decide import commit_denial
from lockyard.infra.hooks.shell_guard.decide import decide_shell_command
from lockyard.infra.lockstore import LockStore

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]


def _marker(repo: Path, name: str) -> str:
    return f"touch {repo.parent / 'ran' / name}"


# name -> (config key, value template: {mark} is the command leaving the marker)
PLANTS = {
    "fsmonitor": ("core.fsmonitor", "{mark}; echo"),
    "filter-clean": ("filter.planted.clean", "{mark}; cat"),
    "filter-smudge": ("filter.planted.smudge", "{mark}; cat"),
    "filter-process": ("filter.planted.process", "{mark}"),
    "textconv": ("diff.planted.textconv", "{mark}; cat"),
    "diff-command": ("diff.planted.command", "{mark}"),
    "external-diff": ("diff.external", "{mark}"),
    "pager": ("core.pager", "{mark}; cat"),
    "pager-diff": ("pager.diff", "{mark}; cat"),
    "editor": ("core.editor", "{mark}"),
    "ssh": ("core.sshCommand", "{mark}"),
    "askpass": ("core.askPass", "{mark}"),
    "credential": ("credential.helper", "!{mark}"),
    "gpg": ("gpg.program", "{mark}"),
    "alias-status": ("alias.status", "!{mark}"),
    "alias-diff": ("alias.diff", "!{mark}"),
    "hook-command": ("hook.planted.command", "{mark}"),
}
COMMANDS = [
    "git checkout -- .",
    "git checkout -- a.txt",
    "git checkout HEAD -- .",
    "git restore --source=HEAD a.txt",
    "git reset --hard",
    "git stash",
    "git stash -u",
    "git stash pop",
    "git rm -q a.txt",
    "git clean -fd",
    "git apply change.patch",
    "git checkout other",
    "git mv a.txt c.txt",
    "git co -- a.txt",
    "git add -A && git commit -qm x",
    "git commit -am x",
]


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A repository with every program of PLANTS configured (most through an included
    file, the fsmonitor directly), `.gitattributes` selecting the filter and diff driver,
    modified, staged and untracked files, a stash and another branch."""
    repo = tmp_path / "repo"
    (tmp_path / "ran").mkdir()
    repo.mkdir()
    subprocess.run([*GIT, "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "a.txt").write_text("one\n")
    (repo / "b.txt").write_text("two\n")
    (repo / ".gitattributes").write_text("*.txt filter=planted diff=planted\n")
    git = [*GIT, "-C", str(repo)]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    subprocess.run([*git, "branch", "other"], check=True)
    (repo / "a.txt").write_text("one changed\n")
    subprocess.run([*git, "stash", "-q"], check=True)
    (repo / "a.txt").write_text("one changed again\n")
    (repo / "b.txt").write_text("two changed\n")
    subprocess.run([*git, "add", "b.txt"], check=True)
    (repo / "new.txt").write_text("new\n")
    (repo / "change.patch").write_text(
        "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-two changed\n+three\n"
    )
    included = tmp_path / "included.cfg"
    lines = [
        f"[{section}]\n\t{name} = {value.format(mark=_marker(repo, plant))}\n"
        for plant, (key, value) in PLANTS.items()
        if plant != "fsmonitor"
        for section, name in [_section(key)]
    ]
    included.write_text("".join(lines))
    subprocess.run([*git, "config", "include.path", str(included)], check=True)
    key, value = PLANTS["fsmonitor"]
    subprocess.run([*git, "config", key, value.format(mark=_marker(repo, "fsmonitor"))], check=True)
    subprocess.run([*git, "config", "alias.co", "checkout"], check=True)
    subprocess.run([*git, "config", "log.showSignature", "true"], check=True)
    hooks = repo / ".git" / "hooks"
    for hook in ("pre-commit", "post-checkout", "post-index-change", "reference-transaction"):
        (hooks / hook).write_text(f"#!/bin/sh\n{_marker(repo, 'hook-' + hook)}\n")
        (hooks / hook).chmod(0o755)
    _clear(tmp_path / "ran")
    return repo


def _section(key: str) -> tuple[str, str]:
    head, _, name = key.rpartition(".")
    section, _, sub = head.partition(".")
    return (f'{section} "{sub}"' if sub else section), name


def _clear(directory: Path) -> None:
    for entry in directory.iterdir():
        entry.unlink()


def ran(repo: Path) -> list[str]:
    return sorted(entry.name for entry in (repo.parent / "ran").iterdir())


def test_plain_git_runs_the_planted_programs(planted: Path) -> None:
    """The plants work: git left alone runs them (so the guards' silence means something)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    for args in (["status"], ["diff"], ["log", "-1", "-p"], ["diff", "HEAD"], ["branch", "b"]):
        subprocess.run(["git", "-C", str(planted), *args], capture_output=True, env=env)
    # (The process filter, which git prefers to the clean one, fails its protocol, so git
    # stops before it would reach the diff programs.)
    # (`git status` writes the index, running post-index-change, only when it finds stale
    # stat data: not always. A new branch always runs reference-transaction.)
    assert {"fsmonitor", "filter-process", "hook-reference-transaction"} <= set(ran(planted))


@pytest.mark.parametrize("command", COMMANDS)
def test_judging_runs_none_of_the_repository_programs(
    planted: Path, tmp_path: Path, command: str
) -> None:
    store = LockStore(planted, tmp_path / "locks")
    decision = decide_shell_command(command, planted, "alice", store, home=str(tmp_path))
    denial = commit_denial(store, "alice", command, str(planted), "lock_acquire")
    assert ran(planted) == [], (command, decision, denial)


def test_the_guards_still_see_what_the_commands_change(planted: Path, tmp_path: Path) -> None:
    """Disabling the programs does not blind the guards: a.txt is modified, b.txt staged."""
    store = LockStore(planted, tmp_path / "locks")
    decision = decide_shell_command("git checkout -- .", planted, "alice", store)
    assert [key for key, _ in decision.unlocked] == ["a.txt"]
    denial = commit_denial(store, "alice", "git commit -am x", str(planted), "lock_acquire")
    assert denial is not None
    assert "a.txt" in denial
    assert "b.txt" in denial
    assert ran(planted) == []


def test_a_required_filter_makes_the_query_fail_closed(planted: Path, tmp_path: Path) -> None:
    """A `required` filter cannot be emptied away: git then fails, and the guard, unable to
    ask, says it cannot tell."""
    subprocess.run(["git", "-C", str(planted), "config", "filter.planted.required", "true"])
    store = LockStore(planted, tmp_path / "locks")
    decision = decide_shell_command("git checkout -- .", planted, "alice", store)
    assert not decision.allowed
    assert decision.undetermined
    assert ran(planted) == []


def test_every_guard_git_call_goes_through_the_disabled_programs() -> None:
    """The settings every query overrides name the programs a read-only query could reach."""
    settings = " ".join(git_query.FIXED)
    for key in ("core.fsmonitor", "core.hooksPath", "core.pager", "core.sshCommand",
                "credential.helper", "diff.external", "protocol.allow"):  # fmt: skip
        assert key in settings
