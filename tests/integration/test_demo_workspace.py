"""Where the demo puts its throwaway repository and lock directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockyard.cli.demo.runner import open_workspace


def test_the_workspace_sits_beside_the_default_lock_dir_and_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = tmp_path / "fast"
    fast.mkdir()
    monkeypatch.setenv("LOCKYARD_LOCK_DIR", str(fast / "locks"))
    with open_workspace(None) as workspace:
        assert workspace.root.parent == fast
        assert workspace.repo.is_dir()
        assert workspace.lock_dir.stat().st_mode & 0o777 == 0o700
    assert list(fast.iterdir()) == []


def test_without_a_usable_place_there_the_system_temp_dir_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKYARD_LOCK_DIR", str(tmp_path / "missing" / "locks"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    with open_workspace(None) as workspace:
        assert workspace.root.parent == tmp_path
