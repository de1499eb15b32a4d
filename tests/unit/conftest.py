"""Fixtures the unit tests share (those of every suite are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lockyard.infra.lockstore import LockStore


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> Iterator[LockStore]:
    """A lock directory store on the test's repository, closed when the test ends (a module
    that needs another store defines its own `store`)."""
    with LockStore(repo, lock_dir) as store:
        yield store
