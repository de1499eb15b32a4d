"""The function API (`try_lock`, `wait_for_lock_async`, `release_lock`, ...), on the cached
default store of each namespace."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from lockyard.infra.lockstore import LockBackend
from lockyard.infra.tools import locking


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LOCKYARD_LOCK_DIR", str(tmp_path / "locks"))
    path = tmp_path / "repo"
    path.mkdir()
    return path


def test_the_contract_functions_work_together(repo: Path, tmp_path: Path) -> None:
    ns = str(repo)
    assert locking.try_lock("a.py", "alice", ns)
    assert not locking.try_lock("a.py", "bob", ns)
    assert locking.get_lock_holder("a.py", ns) == "alice"
    assert locking.is_locked("a.py", ns)
    assert [info.holder.agent_id for info in locking.list_locks(ns) if info.holder] == ["alice"]
    assert not locking.release_lock("a.py", "bob", ns)
    assert locking.release_lock("a.py", "alice", ns)
    assert locking.wait_for_lock("a.py", "bob", ns, timeout_seconds=1)
    assert not locking.wait_for_lock("a.py", "carol", ns, timeout_seconds=0)
    assert anyio.run(locking.wait_for_lock_async, "b.py", "bob", ns, 1.0, 100)
    assert locking.cleanup_agent_locks("bob") == ["a.py", "b.py"]
    assert locking.get_lock_holder("a.py", ns) is None
    assert (tmp_path / "locks").is_dir()


def test_cleanup_in_one_namespace_leaves_the_others(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    assert locking.try_lock("a.py", "alice", str(repo))
    assert locking.try_lock("a.py", "alice", str(other))
    assert locking.cleanup_agent_locks("alice", str(repo)) == ["a.py"]
    assert locking.get_lock_holder("a.py", str(other)) == "alice"


def test_stores_are_cached_per_namespace_and_lock_dir(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = locking.get_store(str(repo))
    assert locking.get_store(f"{repo}/.") is first
    monkeypatch.setenv("LOCKYARD_LOCK_DIR", str(tmp_path / "elsewhere"))
    assert locking.get_store(str(repo)) is not first
    assert "elsewhere" in repr(locking.get_store(str(repo)))


def test_a_lock_directory_named_by_the_backend_setting_is_used(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    named, other = tmp_path / "named", tmp_path / "other"
    monkeypatch.setenv("LOCKYARD_LOCK_DIR", str(other))
    monkeypatch.setenv("LOCKYARD_BACKEND", str(named))
    assert locking.try_lock("a.py", "alice", str(repo))
    assert any(entry.name.endswith(".lock") for entry in named.iterdir())
    monkeypatch.setenv("LOCKYARD_BACKEND", "file")  # the word: LOCKYARD_LOCK_DIR again
    assert locking.get_lock_holder("a.py", str(repo)) is None
    assert "other" in repr(locking.get_store(str(repo)))
    monkeypatch.setenv("LOCKYARD_BACKEND", str(named))
    assert locking.get_lock_holder("a.py", str(repo)) == "alice"


def test_the_store_implements_the_backend_protocol(repo: Path) -> None:
    assert isinstance(locking.get_store(str(repo)), LockBackend)
