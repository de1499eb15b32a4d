"""The lock directory: private, refused when unsafe, never followed through planted links."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from lock_dir_listing import lock_dir_entries
from lockyard.infra.lockstore import (
    CorruptRecordError,
    LockDirError,
    LockStore,
    default_lock_dir,
)
from lockyard.infra.lockstore.lockdir import location
from lockyard.infra.lockstore.lockdir.disk import LockDir
from lockyard.infra.lockstore.paths import lock_name


def _name(store: LockStore, filepath: str) -> str:
    return lock_name(store.namespace, store.canonicalize(filepath))


def test_lock_dir_is_created_private(repo: Path, tmp_path: Path) -> None:
    store = LockStore(repo, tmp_path / "deep" / "locks")
    assert stat.S_IMODE(os.stat(store.lock_dir).st_mode) == 0o700


def test_an_existing_lock_dir_keeps_its_mode(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "locks").mkdir()
    os.chmod(tmp_path / "locks", 0o750)
    LockStore(repo, tmp_path / "locks")
    assert stat.S_IMODE(os.stat(tmp_path / "locks").st_mode) == 0o750


def test_a_symlinked_lock_dir_is_refused(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "locks").symlink_to(tmp_path / "real")
    with pytest.raises(LockDirError, match="symlink"):
        LockStore(repo, tmp_path / "locks")


def test_a_lock_dir_that_is_a_file_is_refused(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "locks").write_text("not a directory")
    with pytest.raises(LockDirError, match="not a directory"):
        LockStore(repo, tmp_path / "locks")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another uid")
def test_a_lock_dir_owned_by_someone_else_is_refused(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "locks").mkdir(mode=0o700)
    os.chown(tmp_path / "locks", 4242, 4242)
    with pytest.raises(LockDirError, match="belongs to uid 4242"):
        LockStore(repo, tmp_path / "locks")


def test_an_unusable_lock_dir_location_is_a_lock_dir_error(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(LockDirError, match="cannot use lock directory"):
        LockStore(repo, tmp_path / "file" / "locks")


def test_a_planted_symlink_in_place_of_a_lock_is_never_followed(repo: Path, tmp_path: Path) -> None:
    store = LockStore(repo, tmp_path / "locks")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep me")
    os.symlink(victim, store.lock_dir / f"{_name(store, 'a.py')}.lock")
    with pytest.raises(LockDirError, match="not a directory the store wrote"):
        store.try_lock("a.py", "alice")
    with pytest.raises(LockDirError):
        store.holder("a.py")
    with pytest.raises(LockDirError):
        store.release("a.py", "alice")
    assert store.cleanup_agent_locks("alice") == []
    [info] = store.list_locks()
    assert info.problem is not None
    assert info.holder is None
    assert sorted(os.listdir(victim)) == ["precious"]
    assert (victim / "precious").read_text() == "keep me"


def test_a_planted_symlink_in_place_of_a_queue_is_never_followed(
    repo: Path, tmp_path: Path
) -> None:
    store = LockStore(repo, tmp_path / "locks")
    victim = tmp_path / "victim"
    victim.mkdir()
    os.symlink(victim, store.lock_dir / f"{_name(store, 'a.py')}.q")
    with pytest.raises(LockDirError):
        store.waiters("a.py")
    assert os.listdir(victim) == []


def test_a_corrupt_record_is_reported_never_removed(repo: Path, tmp_path: Path) -> None:
    store = LockStore(repo, tmp_path / "locks")
    lock = store.lock_dir / f"{_name(store, 'a.py')}.lock"
    lock.mkdir()
    os.symlink("{not json", lock / "tok")
    assert store.is_locked("a.py")
    with pytest.raises(CorruptRecordError):
        store.holder("a.py")
    assert not store.try_lock("a.py", "alice")
    assert not store.release("a.py", "alice")
    assert store.reclaim_stale() == []
    [info] = store.list_locks()
    assert info.problem is not None
    assert "unreadable" in info.problem
    assert os.listdir(lock) == ["tok"]


def test_a_lock_with_two_grants_is_corrupt(repo: Path, tmp_path: Path) -> None:
    store = LockStore(repo, tmp_path / "locks")
    assert store.try_lock("a.py", "alice")
    lock = store.lock_dir / f"{_name(store, 'a.py')}.lock"
    os.symlink("{}", lock / "planted")
    with pytest.raises(CorruptRecordError, match="expected one grant"):
        store.holder_record("a.py")


def test_long_records_are_written_as_files_and_read_whole(repo: Path, tmp_path: Path) -> None:
    store = LockStore(repo, tmp_path / "locks")
    deep = "/".join(["d" * 200] * 18) + "/file.py"  # a key longer than a symlink target holds
    assert store.try_lock(deep, "alice")
    record = store.holder_record(deep)
    assert record is not None
    assert record.lock_path == deep
    assert not store.try_lock(deep, "bob")
    assert store.release(deep, "alice")
    cards = lock_dir_entries(store.lock_dir)  # alice's and bob's holder cards, for later grants
    assert len(cards) == 2
    assert all(card.endswith(".card") for card in cards)


def test_reading_never_writes(repo: Path, tmp_path: Path) -> None:
    store = LockStore(repo, tmp_path / "locks")
    store.try_lock("a.py", "alice")

    def tree() -> list[tuple[str, float]]:
        return sorted(
            (os.path.join(root, name), os.lstat(os.path.join(root, name)).st_mtime)
            for root, dirs, files in os.walk(store.lock_dir)
            for name in dirs + files
        )

    before = tree()
    store.holder("a.py")
    store.holder_record("b.py")
    store.is_locked("a.py")
    store.waiters("a.py")
    store.list_locks()
    store.snapshot()
    assert tree() == before


def test_default_lock_dir_is_the_environment_variable_else_the_same_for_every_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("LOCKYARD_LOCK_DIR", raising=False)
    fallback = default_lock_dir()  # shared memory where there is one, else /tmp
    monkeypatch.setenv("LOCKYARD_LOCK_DIR", str(tmp_path / "env"))
    assert default_lock_dir() == tmp_path / "env"
    monkeypatch.delenv("LOCKYARD_LOCK_DIR")
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    # A desktop shell has XDG_RUNTIME_DIR, an MCP stdio server usually not: same directory.
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert default_lock_dir() == fallback
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert default_lock_dir() == fallback


def test_the_default_is_on_shared_memory_else_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOCKYARD_LOCK_DIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    sticky = tmp_path / "shm"
    sticky.mkdir()
    sticky.chmod(0o1777)
    monkeypatch.setattr(location, "SHARED_MEMORY", str(sticky))
    assert default_lock_dir() == sticky / f"lockyard-{os.geteuid()}"
    sticky.chmod(0o777)  # not sticky: anyone could rename our entries away, so not used
    assert default_lock_dir() == Path(f"/tmp/lockyard-{os.geteuid()}")
    monkeypatch.setattr(location, "SHARED_MEMORY", str(tmp_path / "missing"))
    assert default_lock_dir() == Path(f"/tmp/lockyard-{os.geteuid()}")


def test_close_releases_the_directory_handle(tmp_path: Path) -> None:
    directory = LockDir(tmp_path / "locks")
    directory.close()
    directory.close()
    assert directory.fd == -1


def test_a_lock_dir_removed_while_in_use_is_a_clear_error(repo: Path, tmp_path: Path) -> None:
    store = LockStore(repo, tmp_path / "locks")
    os.rmdir(tmp_path / "locks")
    with pytest.raises(LockDirError, match="was removed while in use"):
        store.try_lock("a.py", "alice")
    with pytest.raises(LockDirError, match="was removed while in use"):
        store.directory.queues.enqueue("name", "token", lambda ticket: "{}")
    assert store.list_locks() == []


def test_a_dropped_store_does_not_leak_its_directory_handle(repo: Path, tmp_path: Path) -> None:
    import gc

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    LockStore(repo, tmp_path / "locks")  # warm up imports and caches
    gc.collect()
    before = open_fds()
    for _ in range(50):
        LockStore(repo, tmp_path / "locks").try_lock("a.py", "alice")
    gc.collect()
    assert open_fds() <= before + 2
    with LockStore(repo, tmp_path / "locks") as store:
        assert store.holder("a.py") == "alice"
    assert store.directory.fd == -1


def _queue_two(tmp_path: Path, record: str = "") -> tuple[LockDir, list[str]]:
    """A lock directory whose queue `n` holds the waits t1 and t2 (records naming their
    tokens, padded with `record`)."""
    directory = LockDir(tmp_path / "locks")
    queues = directory.queues
    entries = [
        queues.enqueue("n", token, lambda ticket, t=token: f'{{"token":"{t}","pad":"{record}"}}')
        for token in ("t1", "t2")
    ]
    return directory, entries


def test_a_waiters_token_is_read_by_ticket_without_listing_its_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, (first, second) = _queue_two(tmp_path)
    listed: list[object] = []
    real_listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda *a: listed.append(a) or real_listdir(*a))
    assert directory.queues.entry_token("n", first) == "t1"
    assert directory.queues.entry_token("n", second) == "t2"
    assert directory.queues.entry_token("n", "00000000000000000009") is None
    assert listed == []


def test_a_removal_by_another_waits_token_leaves_that_wait_in_line_and_readable(
    tmp_path: Path,
) -> None:
    # A remover that read a wait since gone (its ticket taken again) unlinks the entry's copy
    # of its record before it finds the record is not its wait's: the wait stays, read by
    # listing its entry; its own removal later leaves nothing behind.
    directory, (first, _second) = _queue_two(tmp_path)
    queues = directory.queues
    assert not queues.dequeue("n", first, "gone")
    assert queues.entry_token("n", first) == "t1"
    assert queues.bears("n", first, "t1")
    assert queues.dequeue("n", first, "t1")
    assert not (tmp_path / "locks" / "n.q" / first).exists()


def test_an_entry_with_a_record_file_has_no_copy_and_reads_whole(tmp_path: Path) -> None:
    directory, (first, _second) = _queue_two(tmp_path, "x" * 5000)  # too long for a symlink
    assert sorted(os.listdir(tmp_path / "locks" / "n.q" / first)) == ["t1"]
    assert directory.queues.entry_token("n", first) == "t1"
    assert directory.queues.dequeue("n", first, "t1")
    assert not (tmp_path / "locks" / "n.q" / first).exists()
