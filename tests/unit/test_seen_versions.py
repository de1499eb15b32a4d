"""What a version of a file is, and when one `stat` is enough to say a file still has it."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lockyard.infra.seen import version
from lockyard.infra.seen.book import book_for
from lockyard.infra.seen.stale import forget, note_read, seen_state
from lockyard.infra.seen.version import ABSENT, FileVersion, still, version_of


def test_a_freshly_changed_file_s_signature_is_not_trusted_so_the_digest_decides(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f.py"
    path.write_text("aaaa")
    seen = version_of(str(path))
    assert not seen.trusted
    # Same size, and mtime set back to what it was: only the content tells them apart.
    before = os.stat(path)
    path.write_text("bbbb")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert still(seen, str(path))[0] is False
    path.write_text("aaaa")
    assert still(seen, str(path))[0] is True


def test_a_settled_file_is_proved_unchanged_by_one_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(version, "RACY_SECONDS", 0.0)
    path = tmp_path / "f.py"
    path.write_text("aaaa")
    seen = version_of(str(path))
    assert seen.trusted
    assert still(seen, str(path)) == (True, None)  # no digest read
    path.write_text("aaab")
    same, now = still(seen, str(path))
    assert not same
    assert now is not None
    assert now.digest != seen.digest


def test_a_save_by_rename_with_the_same_content_is_the_same_version(tmp_path: Path) -> None:
    path = tmp_path / "f.py"
    path.write_text("same")
    seen = version_of(str(path))
    (tmp_path / "tmp").write_text("same")
    os.replace(tmp_path / "tmp", path)
    assert still(seen, str(path))[0] is True


def test_a_missing_file_is_a_version_of_its_own(tmp_path: Path) -> None:
    gone = version_of(str(tmp_path / "nothing"))
    assert gone.digest == ABSENT
    assert still(gone, str(tmp_path / "nothing"))[0] is True
    (tmp_path / "nothing").write_text("")
    assert still(gone, str(tmp_path / "nothing"))[0] is False


@pytest.mark.parametrize(
    "data", [None, [], {"digest": 1}, {"digest": "d", "sig": [1, 2], "trusted": True}]
)
def test_a_damaged_version_reads_as_none(data: object) -> None:
    assert FileVersion.from_json(data) is None


def test_a_damaged_book_entry_counts_as_never_seen(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("a")
    root = str(tmp_path)
    note_read(root, "alice", "a.py")
    assert seen_state(root, "alice", "a.py") == (False, None)
    assert seen_state(root, "bob", "a.py") == (None, None)
    (entry,) = Path(book_for(root).directory, "files").glob("[!.]*")
    entry.write_text("{not json")
    assert seen_state(root, "alice", "a.py") == (None, None)
    note_read(root, "alice", "a.py")
    forget(root, "alice")
    assert seen_state(root, "alice", "a.py") == (None, None)


def test_two_agents_noting_one_file_at_once_both_count(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("a")
    root = str(tmp_path)
    agents = [f"agent-{n}" for n in range(16)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda agent: note_read(root, agent, "a.py"), agents))
    assert all(seen_state(root, agent, "a.py") == (False, None) for agent in agents)
