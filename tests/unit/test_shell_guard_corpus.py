"""The shell guard's corpus: every case in tests/shell_corpus/*.json, one test each."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lockyard.infra.hooks.shell_guard.decide import ShellGuardPolicy, decide_shell_command
from lockyard.infra.lockstore import LockStore

CORPUS = Path(__file__).parent.parent / "shell_corpus"
AGENT = "alice"
FILES = {
    "README.md": "# demo\n",
    "notes.txt": "notes\n",
    "Makefile": "all:\n\ttrue\n",
    "src/app.py": "value = 1\n",
    "src/utils.py": "def helper():\n    return 1\n",
    "src/models.py": "class Model:\n    pass\n",
    "src/pkg/__init__.py": "",
    "src/pkg/core.py": "core = True\n",
    "tests/test_app.py": "def test_app():\n    assert True\n",
    "docs/guide.md": "guide\n",
    "build/.keep": "",
}
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]


def load_cases() -> list[Any]:
    params = []
    for path in sorted(CORPUS.glob("*.json")):
        for index, case in enumerate(json.loads(path.read_text())):
            params.append(pytest.param(case, id=f"{path.stem}-{index}: {case['command'][:60]}"))
    return params


CASES = load_cases()


def make_template(root: Path) -> Path:
    """The corpus repository, committed (made once and copied for each case)."""
    repo = root / "template"
    for name, text in FILES.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run([*GIT, "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run([*GIT, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-q", "-m", "start"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "branch", "feature"], check=True)
    return repo


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_template(tmp_path_factory.mktemp("corpus"))


def relative(key: str, repo: Path) -> str:
    """A lock key as a repository-relative path (keys may be absolute or relative)."""
    return os.path.relpath(key, repo) if os.path.isabs(key) else key


def test_the_corpus_has_at_least_150_cases() -> None:
    assert len(CASES) >= 150


@pytest.mark.parametrize("case", CASES)
def test_shell_guard_decides_as_the_corpus_says(
    case: dict[str, Any], template: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(template, repo, symlinks=True)
    repo = repo.resolve()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}  # fmt: skip
    for line in case.get("setup", []):
        subprocess.run(["bash", "-c", line], cwd=repo, check=True, env=env, capture_output=True)
    store = LockStore(repo, tmp_path / "locks")
    for name in case.get("locks", []):
        assert store.try_lock(name, AGENT)
    for name, holder in case.get("others", {}).items():
        assert store.try_lock(name, holder)
    home = tmp_path / "home"
    decision = decide_shell_command(
        case["command"],
        repo / case.get("cwd", "."),
        AGENT,
        store,
        policy=ShellGuardPolicy(undetermined=case.get("policy", "deny")),
        home=str(home),
    )
    expected = case["decision"]
    assert ("allow" if decision.allowed else "deny") == expected, decision
    named = sorted(relative(key, repo) for key, _holder in decision.unlocked)
    if "unlocked" in case:
        assert named == sorted(case["unlocked"]), decision
        for name in case["unlocked"]:
            assert name in (decision.reason or "")
    assert bool(decision.undetermined) == case.get("undetermined", False), decision
