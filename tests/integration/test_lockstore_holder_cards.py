"""Grants name a holder card: a short record, read back in full by every reader.

A grant's record is `@<card>:<acquired at>`, short enough for the file system to keep inside
the symlink's inode; the card (agent, process, key, checkout) is written once per agent and
key and read by every reader as part of the record. These tests check that each reader sees
the full record, that a card is written once and removed only when nobody alive can use it,
and the interleavings a card adds: a writer SIGKILLed between the card and the publish, a
dead holder reclaimed, a card removed by hand, a card of a live writer for a dead holder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lockstore_support import dead_pid

from lockyard.infra.agentcli.lockdir_reader import LockDirReader
from lockyard.infra.lockstore import (
    CorruptRecordError,
    LockDirError,
    LockStore,
    ProcessIdentity,
    current_process,
    lock_name,
)

EXT4_FAST_SYMLINK_BYTES = 60
"""ext4 keeps a symlink target shorter than this in the inode (tmpfs: 128)."""
CARD_SUFFIX = ".card"
LOCK_SUFFIX = ".lock"
STAGING_MARK = ".tmp-"


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> LockStore:
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("")
    return LockStore(repo, lock_dir)


def _cards(lock_dir: Path) -> list[str]:
    return sorted(entry for entry in os.listdir(lock_dir) if entry.endswith(CARD_SUFFIX))


def _grant_text(store: LockStore, filepath: str) -> str:
    name = lock_name(store.namespace, store.canonicalize(filepath))
    [token] = os.listdir(store.lock_dir / (name + LOCK_SUFFIX))
    return os.readlink(store.lock_dir / (name + LOCK_SUFFIX) / token)


def test_a_grant_record_is_short_and_read_back_in_full(store: LockStore) -> None:
    assert store.try_lock("src/app.py", "alice")
    text = _grant_text(store, "src/app.py")
    assert text.startswith("@")
    assert len(text) < EXT4_FAST_SYMLINK_BYTES
    record = store.holder_record("src/app.py")
    assert record is not None
    assert (record.agent_id, record.lock_path, record.pid) == ("alice", "src/app.py", os.getpid())
    assert record.checkout == store.root
    assert record.namespace == store.namespace
    assert record.acquired_at == pytest.approx(time.time(), abs=60)
    [info] = store.list_locks()
    assert info.holder == record
    assert info.liveness == "alive"
    assert store.snapshot().holds == {"src/app.py": "alice"}
    reader = LockDirReader(store.root, store.lock_dir)  # the hooks' own reader
    try:
        assert reader.holder("src/app.py") == "alice"
    finally:
        reader.close()


def test_a_card_is_written_once_per_agent_and_file(store: LockStore, repo: Path) -> None:
    (repo / "src" / "other.py").write_text("")
    for _round in range(3):
        assert store.try_lock("src/app.py", "alice")
        assert store.release("src/app.py", "alice")
    assert len(_cards(store.lock_dir)) == 1
    assert store.try_lock("src/app.py", "bob")
    assert store.try_lock("src/other.py", "bob")
    assert len(_cards(store.lock_dir)) == 3
    other_store = LockStore(repo, store.lock_dir)  # same process, agent and file: same card
    assert store.release("src/other.py", "bob")
    assert other_store.try_lock("src/other.py", "bob")
    assert len(_cards(store.lock_dir)) == 3


def test_cards_of_live_processes_stay_and_reclaim_keeps_a_held_lock(store: LockStore) -> None:
    assert store.try_lock("src/app.py", "alice")
    assert store.reclaim_stale() == []
    assert store.holder("src/app.py") == "alice"
    assert store.release("src/app.py", "alice")
    store.reclaim_stale()
    assert len(_cards(store.lock_dir)) == 1  # its writer lives: a grant may come any time


def test_a_lock_whose_card_was_removed_by_hand_is_unreadable_never_free(
    store: LockStore,
) -> None:
    assert store.try_lock("src/app.py", "alice")
    for card in _cards(store.lock_dir):
        os.unlink(store.lock_dir / card)
    fresh = LockStore(store.root, store.lock_dir)  # nothing remembered
    with pytest.raises(CorruptRecordError, match="holder card"):
        fresh.holder_record("src/app.py")
    assert fresh.is_locked("src/app.py")
    assert not fresh.try_lock("src/app.py", "bob")
    assert fresh.reclaim_stale() == []
    name = lock_name(store.namespace, "src/app.py")
    assert fresh.remove_unreadable() == [name + LOCK_SUFFIX]
    assert fresh.try_lock("src/app.py", "bob")


def test_a_card_that_is_not_the_stores_is_refused(store: LockStore) -> None:
    assert store.try_lock("src/app.py", "alice")
    assert store.release("src/app.py", "alice")
    [card] = _cards(store.lock_dir)
    os.unlink(store.lock_dir / card)
    os.symlink('{"agent_id":"mallory"}', store.lock_dir / card)
    fresh = LockStore(store.root, store.lock_dir)
    with pytest.raises(LockDirError, match="not the card the store wrote"):
        fresh.try_lock("src/app.py", "alice")
    assert fresh.list_locks() == []


HOLD_AND_DIE = r"""
import os, signal, sys
from lockyard.infra.lockstore import LockStore
repo, lock_dir, mode = sys.argv[1:4]
store = LockStore(repo, lock_dir)
if mode == "hold":
    assert store.try_lock("src/app.py", "alice")
else:  # die between publish steps: card and staging record written, not yet renamed
    card = store.grant_records.card("alice", "src/app.py")
    os.mkdir(f"{lock_dir}/{sys.argv[4]}.tmp-dead0", dir_fd=None)
    os.symlink(f"@{card}:1.5", f"{lock_dir}/{sys.argv[4]}.tmp-dead0/dead0")
os.kill(os.getpid(), signal.SIGKILL)
"""


def _die(store: LockStore, mode: str) -> None:
    name = lock_name(store.namespace, "src/app.py")
    child = subprocess.run(
        [sys.executable, "-c", HOLD_AND_DIE, store.root, str(store.lock_dir), mode, name],
        check=False,
    )
    assert child.returncode == -signal.SIGKILL


def test_a_writer_killed_between_card_and_publish_leaves_debris_reclaimed(
    store: LockStore,
) -> None:
    _die(store, "stage")
    assert any(STAGING_MARK in entry for entry in os.listdir(store.lock_dir))
    assert store.holder("src/app.py") is None  # a staging is no lock
    assert store.reclaim_stale() == []
    assert os.listdir(store.lock_dir) == []  # staging and its card both gone
    assert store.try_lock("src/app.py", "bob")


def test_a_dead_holders_lock_and_card_are_reclaimed(store: LockStore) -> None:
    _die(store, "hold")
    record = store.holder_record("src/app.py")
    assert record is not None
    assert record.liveness()[0].name == "DEAD"
    assert store.try_lock("src/app.py", "bob")  # reclaimed on the way
    assert store.holder("src/app.py") == "bob"
    store.reclaim_stale()
    [card] = _cards(store.lock_dir)  # bob's; the dead writer's card went
    assert "bob" in os.readlink(store.lock_dir / card)


def test_a_card_whose_holder_died_stays_while_its_writer_lives(repo: Path, lock_dir: Path) -> None:
    me = current_process()
    ghost = ProcessIdentity(dead_pid(), None, me.host, me.boot_id, me.pid_ns)
    store = LockStore(repo, lock_dir, owner=ghost)  # a session server whose CLI died
    assert store.try_lock("a.py", "alice")
    observer = LockStore(repo, lock_dir)
    assert observer.try_lock("a.py", "bob")  # the holder is dead: reclaimed
    observer.reclaim_stale()
    assert len(_cards(lock_dir)) == 2  # the live writer may still publish with its card
    assert observer.release("a.py", "bob")
    assert store.try_lock("a.py", "alice")
    assert observer.holder_record("a.py") is not None


def test_a_forked_child_writes_its_own_card(store: LockStore) -> None:
    assert store.try_lock("src/app.py", "alice")
    assert store.release("src/app.py", "alice")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by its exit status
        ok = store.try_lock("src/app.py", "alice")
        record = store.holder_record("src/app.py")
        os._exit(0 if ok and record is not None and record.pid == os.getpid() else 1)
    _pid, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(_cards(store.lock_dir)) == 2


GHOST_WRITER = r"""
import sys
from lockyard.infra.lockstore import ProcessIdentity, current_process
from lockyard.infra.lockstore import LockStore
repo, lock_dir, ghost_pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
me = current_process()
ghost = ProcessIdentity(ghost_pid, None, me.host, me.boot_id, me.pid_ns)
store = LockStore(repo, lock_dir, owner=ghost)
assert store.try_lock("a.py", "alice")
assert store.release("a.py", "alice")
"""


def test_a_card_goes_once_its_holder_and_its_writer_are_both_dead(
    repo: Path, lock_dir: Path
) -> None:
    subprocess.run(
        [sys.executable, "-c", GHOST_WRITER, str(repo), str(lock_dir), str(dead_pid())],
        check=True,
    )
    assert len(_cards(lock_dir)) == 1
    LockStore(repo, lock_dir).reclaim_stale()
    assert _cards(lock_dir) == []
