"""Fixtures shared by the integration tests' modules (each module keeps its own `repo` when
it needs files in it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import Agents

from lockyard.infra.lockstore import LockBackend, open_backend


@pytest.fixture(params=["file", "postgres"])
def backend_spec(request: pytest.FixtureRequest, lock_dir: Path) -> str:
    """Each backend in turn, as `open_backend` takes it: the lock directory's path, then a
    fresh schema's URI on the PostgreSQL test server."""
    if request.param == "file":
        return str(lock_dir)
    return str(request.getfixturevalue("pg_backend"))


@pytest.fixture
def backend_store(repo: Path, backend_spec: str) -> Iterator[LockBackend]:
    """A store of each backend in turn on `repo` (`backend_spec`), closed afterwards."""
    opened = open_backend(repo, backend_spec)
    yield opened
    opened.close()


@pytest.fixture
def agents(repo: Path, lock_dir: Path) -> Iterator[Agents]:
    """Lock-holding agent processes in `repo` on `lock_dir` (made private, as a store makes
    it, when the module's `lock_dir` left it to be made); all ended after the test."""
    lock_dir.mkdir(mode=0o700, exist_ok=True)
    running = Agents(lock_dir, repo)
    yield running
    running.close()
