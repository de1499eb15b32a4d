"""Publishing a file whole and the lock directory's private sub-directories, on a real disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lockyard.infra.lockstore.atomic_files import ensure_private_dir, open_dir, write_atomic


class RefusedError(Exception):
    pass


def test_a_published_file_replaces_the_old_one_and_leaves_no_temp_file(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("old")
    with open_dir(tmp_path) as fd:
        write_atomic(fd, "a.json", b"new", mode=0o600, temp_prefix=".tmp-")
    assert (tmp_path / "a.json").read_text() == "new"
    assert os.listdir(tmp_path) == ["a.json"]
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o600


def test_a_planted_symlink_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.json").symlink_to(victim)
    with open_dir(folder) as fd:
        write_atomic(fd, "a.json", b"data", mode=0o644, temp_prefix=".")
    assert victim.read_text() == "keep"
    assert not (folder / "a.json").is_symlink()
    assert (folder / "a.json").read_text() == "data"


def test_a_name_that_cannot_be_replaced_raises_and_leaves_no_temp_file(tmp_path: Path) -> None:
    (tmp_path / "a.json").mkdir()
    (tmp_path / "a.json" / "inside").write_text("x")
    with open_dir(tmp_path) as fd, pytest.raises(IsADirectoryError):
        write_atomic(fd, "a.json", b"data", mode=0o600, temp_prefix=".tmp-")
    assert os.listdir(tmp_path) == ["a.json"]


def test_a_directory_is_opened_only_when_it_is_no_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(NotADirectoryError), open_dir(tmp_path / "link"):
        pass


def test_a_private_dir_is_made_0700_and_kept(tmp_path: Path) -> None:
    made = ensure_private_dir(tmp_path / "victims", RefusedError)
    assert made.stat().st_mode & 0o777 == 0o700
    assert ensure_private_dir(tmp_path / "victims", RefusedError) == made


def test_a_private_dir_refuses_a_symlink_a_file_and_a_missing_parent(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "file").write_text("")
    for name in ("link", "file"):
        with pytest.raises(RefusedError, match="is not a directory"):
            ensure_private_dir(tmp_path / name, RefusedError)
    with pytest.raises(RefusedError, match="does not exist"):
        ensure_private_dir(tmp_path / "missing" / "victims", RefusedError)
