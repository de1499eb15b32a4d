"""The election of the one process that resolves deadlocks: the leader file on a lock
directory, and `DeadlockDuty` (what every serve and cross-process coordinator runs)."""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lockyard.infra.crossproc.election import DeadlockDuty
from lockyard.infra.crossproc.leader_file import LEADER_FILE, LeaderFile, current_leader
from lockyard.infra.crossproc.sources.lockdir import LockDirSource
from lockyard.infra.lockstore import LockStore
from polling_support import wait_until


@pytest.fixture
def locks(tmp_path: Path) -> Path:
    path = tmp_path / "locks"
    path.mkdir(mode=0o700)
    return path


def test_one_candidate_leads_and_the_next_takes_over_when_it_resigns(locks: Path) -> None:
    first, second = LeaderFile(locks, "first"), LeaderFile(locks, "second")
    assert first.try_lead()
    assert first.try_lead()  # leading stays leading
    assert not second.try_lead()
    leader = current_leader(locks)
    assert leader is not None
    assert (leader.role, leader.pid) == ("first", os.getpid())
    assert leader.describe() == f"first, pid {os.getpid()} on {leader.host}"

    first.resign()
    assert current_leader(locks) is None
    assert second.try_lead()
    assert not first.try_lead()
    leader = current_leader(locks)
    assert leader is not None
    assert leader.role == "second"


def test_a_forgotten_candidate_drops_its_lead(locks: Path) -> None:
    assert LeaderFile(locks, "forgotten").try_lead()
    gc.collect()
    assert LeaderFile(locks, "next").try_lead()


def test_a_killed_leader_is_nobody_and_its_lock_is_free(locks: Path) -> None:
    script = (
        "import sys, time\n"
        "from lockyard.infra.crossproc.leader_file import LeaderFile\n"
        "leader = LeaderFile(sys.argv[1], 'child')\n"
        "assert leader.try_lead()\n"
        "print('leading', flush=True)\n"
        "time.sleep(600)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(locks)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "leading\n"
        leader = current_leader(locks)
        assert leader is not None
        assert leader.pid == child.pid
        assert not LeaderFile(locks, "me").try_lead()
    finally:
        child.kill()
        child.wait()
    # The record still names the child, but nobody holds the file: nobody leads.
    assert json.loads((locks / LEADER_FILE).read_text())["pid"] == child.pid
    assert current_leader(locks) is None
    assert LeaderFile(locks, "me").try_lead()


@pytest.mark.parametrize("content", ["", "not json", '{"pid": "x"}', "[1, 2]"])
def test_an_unreadable_record_of_a_held_file_is_nobody_known(locks: Path, content: str) -> None:
    holder = LeaderFile(locks, "holder")
    assert holder.try_lead()
    (locks / LEADER_FILE).write_text(content)
    assert current_leader(locks) is None
    assert not LeaderFile(locks, "other").try_lead()  # the lock decides, not the text


def test_a_planted_symlink_is_not_followed(locks: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    (locks / LEADER_FILE).symlink_to(target)
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        LeaderFile(locks, "me").try_lead()
    assert not target.exists()
    source = LockDirSource(locks, role="me")
    assert not source.lead()  # a candidate that cannot try does not lead
    assert current_leader(locks) is None


def test_a_source_says_who_leads(locks: Path) -> None:
    mine, theirs = LockDirSource(locks, role="mine"), LockDirSource(locks, role="theirs")
    assert mine.who_leads() is None
    assert mine.lead()
    assert mine.who_leads() == "this process (mine)"
    assert theirs.who_leads() == f"mine, pid {os.getpid()} on {os.uname().nodename}"
    mine.resign()
    assert theirs.who_leads() is None


def test_of_two_duties_one_leads_and_the_other_takes_over_when_it_stops(locks: Path) -> None:
    store = LockStore(lock_dir=locks)
    first = DeadlockDuty(store, role="first", takeover_seconds=0.01).start()
    second = DeadlockDuty(store, role="second", takeover_seconds=0.01)
    try:
        wait_until(lambda: first.leading, "the first duty leading", within=120)
        second.start()
        leader = current_leader(locks)
        assert leader is not None
        assert leader.role == "first"
        assert not second.leading
        first.stop()
        assert not first.leading
        wait_until(lambda: second.leading, "the second duty taking over", within=120)
        leader = wait_until(lambda: current_leader(locks), "the second duty's record")
        assert leader.role == "second"
    finally:
        first.stop()
        second.stop()
    assert current_leader(locks) is None


def test_a_duty_whose_lock_directory_is_removed_leads_again_on_a_fresh_one(
    locks: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = LockStore(lock_dir=locks)
    with DeadlockDuty(store, role="duty", takeover_seconds=0.01) as duty:
        wait_until(lambda: duty.leading, "the duty leading", within=120)
        shutil.rmtree(locks)
        wait_until(
            lambda: not duty.leading, "the duty noticing its lock directory is gone", within=120
        )
        wait_until(lambda: duty.leading, "the duty leading again", within=120)
        leader = wait_until(lambda: current_leader(locks), "the duty's record")
        assert leader.role == "duty"
    assert "deadlock detection on" in caplog.text
    assert "failed" in caplog.text
