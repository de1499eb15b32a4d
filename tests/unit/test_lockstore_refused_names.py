"""Names the lock store cannot record are refused up front, with a clear error, and leave the
lock directory untouched: text that is not UTF-8, repositories that are not directories, paths
the kernel refuses to walk."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from lockyard.infra.lockstore import InvalidAgentIdError, InvalidPathError, LockStore

NOT_UTF8_NAME = os.fsdecode(b"caf\xe9.py")  # Latin-1 bytes, decoded as Python decodes names


def _entries(store: LockStore) -> list[str]:
    return sorted(os.listdir(store.lock_dir))


@pytest.mark.parametrize("path", [NOT_UTF8_NAME, "a\ud800.py", f"src/{NOT_UTF8_NAME}/b.py"])
def test_a_path_that_is_not_utf8_is_refused_before_anything_is_written(
    store: LockStore, path: str
) -> None:
    with pytest.raises(InvalidPathError, match="not valid UTF-8"):
        store.try_lock(path, "alice")
    with pytest.raises(InvalidPathError, match="not valid UTF-8"):
        store.acquire(path, "bob", timeout_seconds=0.5)
    assert _entries(store) == []


def test_a_file_that_exists_under_a_non_utf8_name_is_refused(store: LockStore, repo: Path) -> None:
    with open(os.path.join(os.fsencode(repo), b"caf\xe9.py"), "w") as file:
        file.write("x")
    with pytest.raises(InvalidPathError, match="rename the file"):
        store.try_lock(NOT_UTF8_NAME, "alice")
    assert _entries(store) == []


def test_a_symlink_to_a_non_utf8_name_is_refused(store: LockStore, repo: Path) -> None:
    os.symlink(os.fsencode(repo) + b"/caf\xe9.py", os.fsencode(repo) + b"/link.py")
    with pytest.raises(InvalidPathError, match=r"'link\.py' resolves to"):
        store.try_lock("link.py", "alice")
    assert _entries(store) == []


@pytest.mark.parametrize("agent", [os.fsdecode(b"al\xffce"), "bob\udc80"])
def test_an_agent_id_that_is_not_utf8_is_refused(store: LockStore, agent: str) -> None:
    with pytest.raises(InvalidAgentIdError, match="not valid UTF-8"):
        store.try_lock("a.py", agent)
    with pytest.raises(InvalidAgentIdError, match="not valid UTF-8"):
        store.acquire("a.py", agent, timeout_seconds=0.5)
    assert _entries(store) == []


def test_a_second_agent_is_not_stuck_behind_a_refused_name(store: LockStore) -> None:
    """Once, a non-UTF-8 holder wrote a record nobody could read: every later acquire spun."""
    with pytest.raises(InvalidAgentIdError):
        store.try_lock("a.py", os.fsdecode(b"\xff"))
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(store.acquire("a.py", "bob", 0.5)))
    waiter.start()
    waiter.join(30)
    assert results == [True]
    assert store.holder("a.py") == "bob"


def test_a_repository_whose_path_is_not_utf8_is_refused(tmp_path: Path, lock_dir: Path) -> None:
    odd = os.fsencode(tmp_path) + b"/r\xe9po"
    os.mkdir(odd)
    with pytest.raises(InvalidPathError, match="not valid UTF-8"):
        LockStore(os.fsdecode(odd), lock_dir)


def test_a_repository_that_is_not_a_path_is_a_clear_error(lock_dir: Path) -> None:
    with pytest.raises(InvalidPathError, match="got int; pass the path"):
        LockStore(5, lock_dir)  # type: ignore[arg-type]


def test_a_repository_that_does_not_exist_is_refused(tmp_path: Path, lock_dir: Path) -> None:
    with pytest.raises(InvalidPathError, match="not an existing directory"):
        LockStore(tmp_path / "no-such-repo", lock_dir)
    (tmp_path / "file").write_text("")
    with pytest.raises(InvalidPathError, match="it is a file"):
        LockStore(tmp_path / "file", lock_dir)
    assert not lock_dir.exists()


def test_a_path_through_a_symlink_loop_is_refused(store: LockStore, repo: Path) -> None:
    os.symlink("loop", repo / "loop")
    with pytest.raises(InvalidPathError, match="symlink loop"):
        store.try_lock("loop", "alice")
    with pytest.raises(InvalidPathError, match="symlink loop"):
        store.try_lock("loop/a.py", "alice")
    assert _entries(store) == []


def test_a_path_through_a_file_is_refused(store: LockStore, repo: Path) -> None:
    (repo / "notes.txt").write_text("")
    with pytest.raises(InvalidPathError, match="goes through a file"):
        store.try_lock("notes.txt/a.py", "alice")
    with pytest.raises(InvalidPathError, match="goes through a file"):
        store.try_lock("notes.txt/deeper/a.py", "alice")
    assert _entries(store) == []


def test_a_dangling_symlink_and_a_new_file_are_still_fine_keys(
    store: LockStore, repo: Path
) -> None:
    os.symlink("not-yet.py", repo / "later.py")
    assert store.try_lock("later.py", "alice")
    assert store.try_lock("new/dir/file.py", "alice")
