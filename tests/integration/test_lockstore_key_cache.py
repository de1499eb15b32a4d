"""A store remembers the key of a plain path only for as long as the path stays plain.

`LockStore` keeps the key of a path that named an existing file reached without symlinks and
checks, in one call per use, that the kernel still walks it without meeting a symlink to a
file that is not a directory. Each change of the file system that changes the key (or makes
the path a directory) must be seen at the next call of the same store.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lockyard.infra.lockstore import InvalidPathError, LockStore, PathOutsideRepoError
from lockyard.infra.lockstore.lockdir.keys import resolve_plain

if resolve_plain("/") is None:  # pragma: no cover - a kernel or sandbox without openat2
    pytest.skip("openat2 is not available here", allow_module_level=True)


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> LockStore:
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("")
    store = LockStore(repo, lock_dir)
    assert store.canonicalize("src/app.py") == "src/app.py"  # now remembered
    return store


def test_a_directory_moved_and_replaced_by_a_symlink_gives_the_new_key(
    store: LockStore, repo: Path
) -> None:
    (repo / "src").rename(repo / "lib")
    (repo / "src").symlink_to(repo / "lib")
    assert store.canonicalize("src/app.py") == "lib/app.py"
    assert store.try_lock("src/app.py", "alice")
    other = LockStore(repo, store.lock_dir)
    assert not other.try_lock("lib/app.py", "bob")  # one file, one lock


def test_a_file_replaced_by_a_symlink_gives_its_target_key(store: LockStore, repo: Path) -> None:
    (repo / "src" / "real.py").write_text("")
    (repo / "src" / "app.py").unlink()
    (repo / "src" / "app.py").symlink_to(repo / "src" / "real.py")
    assert store.canonicalize("src/app.py") == "src/real.py"


def test_a_file_replaced_by_a_directory_is_refused(store: LockStore, repo: Path) -> None:
    (repo / "src" / "app.py").unlink()
    (repo / "src" / "app.py").mkdir()
    with pytest.raises(InvalidPathError, match="directory"):
        store.try_lock("src/app.py", "alice")
    assert store.list_locks() == []


def test_a_removed_file_keeps_its_key_as_a_file_to_be_created(store: LockStore, repo: Path) -> None:
    (repo / "src" / "app.py").unlink()
    assert store.canonicalize("src/app.py") == "src/app.py"
    shutil.rmtree(repo / "src")
    os.symlink(repo / "elsewhere", repo / "src")
    (repo / "elsewhere").mkdir()
    assert store.canonicalize("src/app.py") == "elsewhere/app.py"


def test_a_directory_leading_out_of_the_checkout_is_refused(store: LockStore, repo: Path) -> None:
    outside = repo.parent / "outside"
    (repo / "src").rename(outside)
    (repo / "src").symlink_to(outside)
    with pytest.raises(PathOutsideRepoError):
        store.try_lock("src/app.py", "alice")


def test_the_remembered_key_releases_and_relocks(store: LockStore) -> None:
    for _round in range(3):
        assert store.try_lock("src/app.py", "alice")
        assert store.holder("src/app.py") == "alice"
        assert store.release("src/app.py", "alice")
        assert store.holder("src/app.py") is None
