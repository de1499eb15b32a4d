"""Fixtures shared by the integration tests' modules. `repo` is a git repository with one
file, `a.py`; a module that needs other files defines its own `repo`, which overrides it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import Agents


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.py").write_text("a\n")
    return root.resolve()


@pytest.fixture
def agents(repo: Path, lock_dir: Path) -> Iterator[Agents]:
    """Lock-holding agent processes in `repo` on `lock_dir` (made private, as a store makes
    it, when the module's `lock_dir` left it to be made); all ended after the test."""
    lock_dir.mkdir(mode=0o700, exist_ok=True)
    running = Agents(lock_dir, repo)
    yield running
    running.close()
