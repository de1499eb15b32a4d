"""Fixtures shared by the integration tests' modules (each module keeps its own `repo` when
it needs files in it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import Agents


@pytest.fixture
def agents(repo: Path, lock_dir: Path) -> Iterator[Agents]:
    """Lock-holding agent processes in `repo` on `lock_dir` (made private, as a store makes
    it, when the module's `lock_dir` left it to be made); all ended after the test."""
    lock_dir.mkdir(mode=0o700, exist_ok=True)
    running = Agents(lock_dir, repo)
    yield running
    running.close()
