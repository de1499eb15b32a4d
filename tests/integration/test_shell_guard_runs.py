"""Property: what the shell guard allows never changes a file the agent has not locked.

Hypothesis builds command lines from writers, readers, paths, `cd`, subshells and pipes (and,
in a git repository with some files modified, git commands that rewrite the tree); each
runs for real (bash) in a throwaway repository, and the files that changed (content, mode,
type, existence) are compared with the guard's decision on it:
- an allowed command changed only files the agent holds;
- whatever the decision, every file that changed was named: locked by the agent, or listed
  in the denial as not locked (the guard's list of targets is complete).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lockyard.infra.hooks.shell_guard.decide import Decision, decide_shell_command
from lockyard.infra.lockstore import LockStore

AGENT = "alice"
FILES = ["a.txt", "b.txt", "sub/c.txt", "sub/d.txt"]
NEW = ["new.txt", "sub/new.txt"]
WRITERS = [
    "echo x > {p}",
    "echo x >> {p}",
    "sed -i s/a/b/ {p}",
    "touch {p}",
    "rm -f {p}",
    "cp {q} {p}",
    "mv -f {q} {p}",
    "printf y | tee {p} > /dev/null",
    "truncate -s 0 {p}",
    "python3 -c \"open('{p}', 'w').write('z')\"",
    "perl -pi -e s/a/b/ {p}",
    "dd if=/dev/zero of={p} bs=1 count=1 status=none",
    "chmod +x {p}",
    "ln -sf {q} {p}",
    "bash -c 'echo y > {p}'",
    "cat <<EOF > {p}\nbody\nEOF",
    "for f in {p} {q}; do echo l >> $f; done",
    "F={p}; echo v > $F",
]
READERS = [
    "cat {p} > /dev/null 2>&1 || true",
    "wc -l {p} > /dev/null 2>&1 || true",
    "grep -c a {p} > /dev/null 2>&1 || true",
    "ls > /dev/null",
    "echo {p} > /tmp/lockyard-shell-guard-scratch",
]


def relative_to(directory: str, path: str) -> str:
    """`path` (repository-relative) as written from `directory`."""
    return os.path.relpath(path, directory)


@st.composite
def commands(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        directory = draw(st.sampled_from([".", "sub"]))
        template = draw(st.sampled_from(WRITERS + READERS))
        p = relative_to(directory, draw(st.sampled_from(FILES + NEW)))
        q = relative_to(directory, draw(st.sampled_from(FILES)))
        step = template.format(p=p, q=q)
        if directory != ".":
            shape = draw(st.sampled_from(["cd {d} && {s}", "(cd {d}; {s})"]))
            step = shape.format(d=directory, s=step)
            if shape.startswith("cd"):
                step = f"({step})"  # keep later parts in the repository root
        parts.append(step)
    joiner = draw(st.sampled_from(["; ", " && ", "\n"]))
    return joiner.join(parts)


def snapshot(root: Path) -> dict[str, tuple[str, bytes, int]]:
    found: dict[str, tuple[str, bytes, int]] = {}
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                found[os.path.relpath(path, root)] = ("link", os.readlink(path).encode(), 0)
            else:
                content = Path(path).read_bytes()
                found[os.path.relpath(path, root)] = ("file", content, info.st_mode & 0o777)
    return found


def changed(
    before: dict[str, tuple[str, bytes, int]], after: dict[str, tuple[str, bytes, int]]
) -> set[str]:
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


def relative(key: str, repo: Path) -> str:
    return os.path.relpath(key, repo) if os.path.isabs(key) else key


@settings(
    max_examples=int(os.environ.get("SHELL_GUARD_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(command=commands(), held=st.sets(st.sampled_from(FILES + NEW)))
@example(command="(cd sub && ln -sf ../a.txt c.txt)\necho x >> sub/c.txt", held={"sub/c.txt"})
def test_an_allowed_command_changes_only_locked_files(
    tmp_path: Path, command: str, held: set[str]
) -> None:
    run = Path(tempfile.mkdtemp(dir=tmp_path))
    try:
        check_one_run(run, command, held)
    finally:
        shutil.rmtree(run, ignore_errors=True)


def check_one_run(run: Path, command: str, held: set[str]) -> None:
    repo = run / "repo"
    for name in FILES:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(f"alpha {name}\n")
    repo = repo.resolve()
    store = LockStore(repo, run / "locks")
    for name in held:
        assert store.try_lock(name, AGENT)
    decision = decide_shell_command(command, repo, AGENT, store, home=str(run / "home"))
    before = snapshot(repo)
    subprocess.run(["bash", "-c", command], cwd=repo, capture_output=True, timeout=60, check=False)
    changes = changed(before, snapshot(repo))
    assert_decision_covers(changes, decision, held, repo, command)


def assert_decision_covers(
    changes: set[str], decision: Decision, held: set[str], repo: Path, command: str
) -> None:
    """What changed is what the guard said: only held files when it allowed the command, and
    every changed file named (held, or listed as unlocked) unless it said it cannot tell."""
    named = {relative(key, repo) for key, _holder in decision.unlocked}
    if decision.allowed:
        assert changes <= held, (command, decision)
    if not decision.undetermined:
        assert changes <= held | named, (command, decision)


GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
GIT_WRITERS = [
    "git checkout -- {p}",
    "git checkout -q .",
    "git checkout -q HEAD -- sub",
    "git restore {p}",
    "git restore --staged {p}",
    "git stash -q",
    "git stash -q && git stash pop -q",
    "git reset -q --hard",
    "git reset -q",
    "git rm -q {p}",
    "git rm -q --cached {p}",
    "git mv {q} sub/moved.txt",
    "git clean -fq",
    "git clean -fdq",
    "git checkout -q other",
    "git status --short > /dev/null",
]


@pytest.fixture(scope="module")
def git_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("git-template") / "repo"
    for name in FILES:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(f"alpha {name}\n")
    subprocess.run([*GIT, "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run([*GIT, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-qm", "start"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "checkout", "-qb", "other"], check=True)
    (repo / "a.txt").write_text("other branch\n")
    subprocess.run([*GIT, "-C", str(repo), "commit", "-qam", "other"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "checkout", "-q", "main"], check=True)
    return repo


@st.composite
def git_commands(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 2))):
        template = draw(st.sampled_from(GIT_WRITERS))
        p = draw(st.sampled_from(FILES))
        q = draw(st.sampled_from(FILES))
        step = template.format(p=p, q=q)
        if draw(st.booleans()):
            step = f"(cd sub && {step.replace(p, os.path.relpath(p, 'sub'))})"
        parts.append(step)
    return " ; ".join(parts)


@settings(
    max_examples=int(os.environ.get("SHELL_GUARD_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# An index change makes a later query stale: a.txt is untracked when `git clean` runs.
@example(command="git rm -q --cached a.txt ; git clean -fq", held={"new.txt"}, dirty={"new.txt"})
@given(
    command=git_commands(),
    held=st.sets(st.sampled_from(FILES + NEW)),
    dirty=st.sets(st.sampled_from(FILES + NEW), min_size=1),
)
def test_an_allowed_git_command_changes_only_locked_files(
    tmp_path: Path, git_template: Path, command: str, held: set[str], dirty: set[str]
) -> None:
    run = Path(tempfile.mkdtemp(dir=tmp_path))
    try:
        repo = run / "repo"
        shutil.copytree(git_template, repo, symlinks=True)
        repo = repo.resolve()
        for name in dirty:  # modified tracked files and new untracked ones
            with (repo / name).open("a") as file:
                file.write("changed\n")
        store = LockStore(repo, run / "locks")
        for name in held:
            assert store.try_lock(name, AGENT)
        decision = decide_shell_command(command, repo, AGENT, store, home=str(run / "home"))
        before = snapshot(repo)
        subprocess.run(
            ["bash", "-c", command], cwd=repo, capture_output=True, timeout=60, check=False
        )
        assert_decision_covers(changed(before, snapshot(repo)), decision, held, repo, command)
    finally:
        shutil.rmtree(run, ignore_errors=True)
