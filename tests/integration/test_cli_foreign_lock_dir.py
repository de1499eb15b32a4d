"""Every command leaves a lock directory it did not create as it found it (issue 33, point 8):
no chmod of a directory the user made, whatever its mode; one that every user may write is
refused by the commands that would lock or release in it, and read by `status`."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cli_support import Agents, lockyard
from test_cli_status_clean import deadlock_two_agents

from lockyard.infra.lockstore import LockDirError, LockStore

WRITING = [("clean",), ("clean", "--json"), ("clean", "--agent", "nobody"), ("monitor", "--once")]
READING = [("status",), ("status", "--json"), ("monitor", "--once", "--no-resolve")]


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def users_dir(tmp_path: Path) -> Path:
    """A directory the user made (mode 0755) with a file of theirs in it."""
    path = tmp_path / "shared"
    path.mkdir()
    path.chmod(0o755)
    (path / "notes.txt").write_text("mine\n")
    return path


@pytest.mark.parametrize("command", WRITING + READING, ids=" ".join)
def test_a_0755_directory_of_the_users_keeps_its_mode_and_files(
    users_dir: Path, command: tuple[str, ...]
) -> None:
    done = lockyard(*command, "--lock-dir", str(users_dir))
    assert done.returncode == 0, done.stderr
    assert mode(users_dir) == 0o755
    assert (users_dir / "notes.txt").read_text() == "mine\n"


def test_a_resolving_monitor_leaves_the_mode_of_a_0755_lock_directory(
    tmp_path: Path, repo: Path
) -> None:
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir()
    lock_dir.chmod(0o755)
    agents = Agents(lock_dir, repo)
    try:
        deadlock_two_agents(agents, repo, lock_dir)
        done = lockyard("monitor", "--once", "--lock-dir", str(lock_dir))
        assert done.returncode == 6, done.stderr
        assert "victim" in done.stdout
    finally:
        agents.close()
    assert mode(lock_dir) == 0o755


@pytest.mark.parametrize("command", WRITING, ids=" ".join)
def test_a_directory_every_user_may_write_is_refused_and_left_alone(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    done = lockyard(*command, "--lock-dir", str(sticky))
    assert done.returncode == 3, done.stderr
    assert "is writable by every user (mode 1777)" in done.stderr
    assert "Traceback" not in done.stderr
    assert mode(sticky) == 0o1777
    assert list(sticky.iterdir()) == []


@pytest.mark.parametrize("command", READING, ids=" ".join)
def test_reading_commands_read_a_directory_every_user_may_write(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    done = lockyard(*command, "--lock-dir", str(sticky))
    assert done.returncode == 0, done.stderr
    assert mode(sticky) == 0o1777


def test_a_lock_directory_lockyard_creates_is_private(tmp_path: Path, repo: Path) -> None:
    old = os.umask(0o022)
    try:
        store = LockStore(repo, tmp_path / "made" / "locks")
    finally:
        os.umask(old)
    store.close()
    assert mode(tmp_path / "made" / "locks") == 0o700
    assert mode(tmp_path / "made") == 0o700


def test_the_store_refuses_a_world_writable_directory_without_touching_it(
    tmp_path: Path, repo: Path
) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(LockDirError, match="writable by every user"):
        LockStore(repo, open_dir)
    assert mode(open_dir) == 0o777
