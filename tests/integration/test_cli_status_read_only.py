"""`lockyard status` only looks: the lock directory is exactly as it was afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockyard.infra.lockstore import LockStore

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every entry under `root` (root included) with its mode and modification time."""
    entries = {}
    for path in [root, *sorted(root.rglob("*"))]:
        info = os.lstat(path)
        entries[str(path.relative_to(root))] = (info.st_mode, info.st_mtime_ns)
    return entries


@pytest.mark.parametrize("as_json", [False, True])
def test_status_changes_nothing_in_a_lock_directory_of_mode_755(
    repo: Path, lock_dir: Path, as_json: bool
) -> None:
    store = LockStore(repo, lock_dir)
    assert store.try_lock("a.py", "alice")
    store.close()
    lock_dir.chmod(0o755)
    before = tree(lock_dir)
    done = subprocess.run(
        [LOCKYARD, "status", "--lock-dir", str(lock_dir), *(["--json"] if as_json else [])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "alice" in done.stdout
    assert tree(lock_dir) == before
    assert lock_dir.stat().st_mode & 0o777 == 0o755


def test_a_read_only_store_never_creates_its_directory(tmp_path: Path, repo: Path) -> None:
    from lockyard.infra.lockstore import LockDirError

    missing = tmp_path / "missing" / "locks"
    with pytest.raises(LockDirError, match="cannot use lock directory"):
        LockStore(repo, missing, read_only=True)
    assert not missing.parent.exists()
