"""Victim notices on a real lock dir: atomic posting, claiming, staleness, push, polling."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import anyio
import pytest

from lockyard.core.deadlock_info import CycleStep, DeadlockInfo
from lockyard.infra.crossproc.notices import (
    FileVictimNotices,
    NoticeBoardError,
    VictimNotice,
    VictimNoticeBoard,
    notice_file_name,
)
from lockyard.infra.lockstore import Inotify, inotify_available

pytestmark = pytest.mark.anyio


def deadlock(victim: str = "a") -> DeadlockInfo:
    other = "b" if victim == "a" else "a"
    return DeadlockInfo(
        cycle=(
            CycleStep(agent_id=victim, lock_path="/r/f2", held_by=other),
            CycleStep(agent_id=other, lock_path="/r/f1", held_by=victim),
        ),
        victim=victim,
        victim_waits_on="/r/f2",
        victim_waits_on_holder=other,
    )


def notice(agent: str = "a", wait_id: str | None = "w1") -> VictimNotice:
    return VictimNotice(agent_id=agent, waits_on="/r/f2", wait_id=wait_id, deadlock=deadlock(agent))


def always(_notice: VictimNotice) -> bool:
    return True


def never(_notice: VictimNotice) -> bool:
    return False


def test_file_names_are_readable_safe_and_bounded() -> None:
    assert notice_file_name("agent-1") == "agent-1.json"
    assert "/" not in notice_file_name("../../etc/passwd")
    assert notice_file_name("../x") != notice_file_name("..%2Fx")
    long_name = notice_file_name("x" * 1000)
    assert long_name.startswith("sha256-")
    assert len(long_name) < 100


def test_post_read_claim_round_trip(tmp_path: Path) -> None:
    board = VictimNoticeBoard(tmp_path)
    posted = notice()
    path = board.post(posted)
    assert path == tmp_path / "victims" / "a.json"
    assert os.stat(tmp_path / "victims").st_mode & 0o777 == 0o700
    assert board.read("a") == posted
    assert board.notices() == [posted]
    assert board.claim("a") == posted
    assert board.read("a") is None
    assert board.claim("a") is None
    assert os.listdir(tmp_path / "victims") == []  # no temp or claimed leftovers


def test_post_replaces_atomically(tmp_path: Path) -> None:
    board = VictimNoticeBoard(tmp_path)
    board.post(notice(wait_id="w1"))
    newer = notice(wait_id="w2")
    board.post(newer)
    assert board.read("a") == newer
    assert os.listdir(tmp_path / "victims") == ["a.json"]


def test_remove_only_deletes_the_notice_it_names(tmp_path: Path) -> None:
    board = VictimNoticeBoard(tmp_path)
    old = notice(wait_id="w1")
    board.post(old)
    newer = notice(wait_id="w2")
    board.post(newer)
    assert board.remove(old) is False
    assert board.read("a") == newer
    assert board.remove(newer) is True
    assert board.read("a") is None
    assert board.remove(newer) is False


def test_corrupt_notice_is_ignored_by_readers(tmp_path: Path) -> None:
    board = VictimNoticeBoard(tmp_path)
    board.ensure()
    (tmp_path / "victims" / "a.json").write_text("{not json")
    (tmp_path / "victims" / "notes.txt").write_text("ignored")
    assert board.read("a") is None
    assert board.notices() == []


def test_prune_removes_stale_notices_and_old_leftovers(tmp_path: Path) -> None:
    board = VictimNoticeBoard(tmp_path)
    board.post(notice("a"))
    board.post(notice("b"))
    leftover = tmp_path / "victims" / ".lockyard-tmp-dead"
    leftover.write_text("half")
    os.utime(leftover, (time.time() - 3600, time.time() - 3600))
    fresh = tmp_path / "victims" / ".lockyard-tmp-live"
    fresh.write_text("being written")

    removed = board.prune(lambda n: n.agent_id == "b")

    assert removed == ["a"]
    assert [n.agent_id for n in board.notices()] == ["b"]
    assert not leftover.exists()
    assert fresh.exists()


def test_prune_without_a_directory_is_a_no_op(tmp_path: Path) -> None:
    assert VictimNoticeBoard(tmp_path).prune(never) == []
    assert VictimNoticeBoard(tmp_path).notices() == []


def test_board_refuses_a_symlinked_victims_dir(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir()
    (lock_dir / "victims").symlink_to(elsewhere)
    with pytest.raises(NoticeBoardError, match="symlink"):
        VictimNoticeBoard(lock_dir).post(notice())
    assert os.listdir(elsewhere) == []


def test_board_needs_an_existing_lock_dir(tmp_path: Path) -> None:
    with pytest.raises(NoticeBoardError, match="does not exist"):
        VictimNoticeBoard(tmp_path / "missing").ensure()


async def test_a_notice_already_posted_ends_the_wait_at_once(tmp_path: Path) -> None:
    posted = notice("a")
    VictimNoticeBoard(tmp_path).post(posted)
    with anyio.fail_after(5):
        info = await FileVictimNotices(tmp_path, always).wait_for_victim("a")
    assert info == posted.deadlock
    assert VictimNoticeBoard(tmp_path).read("a") is None  # consumed


@pytest.mark.parametrize("polling", [False, True])
async def test_a_pending_wait_sees_a_notice_posted_by_another_thread(
    tmp_path: Path, polling: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if polling:
        monkeypatch.setenv("LOCKYARD_NO_INOTIFY", "1")
    notices = FileVictimNotices(tmp_path, always, poll_interval=0.05)
    VictimNoticeBoard(tmp_path).post(notice("b"))  # someone else's notice: not ours
    timer = threading.Timer(0.2, lambda: VictimNoticeBoard(tmp_path).post(notice("a")))
    timer.start()
    try:
        with anyio.fail_after(5):
            info = await notices.wait_for_victim("a")
    finally:
        timer.cancel()
    assert info.victim == "a"
    assert VictimNoticeBoard(tmp_path).read("b") is not None


async def test_a_stale_notice_is_dropped_and_the_wait_goes_on(tmp_path: Path) -> None:
    board = VictimNoticeBoard(tmp_path)
    board.post(notice("a", wait_id="old"))
    notices = FileVictimNotices(tmp_path, lambda n: n.wait_id == "current", poll_interval=0.05)
    with anyio.move_on_after(0.3) as scope:
        await notices.wait_for_victim("a")
    assert scope.cancelled_caught
    assert board.read("a") is None  # the stale notice is gone

    board.post(notice("a", wait_id="current"))
    with anyio.fail_after(5):
        assert (await notices.wait_for_victim("a")).victim == "a"


async def test_waiting_survives_an_unusable_victims_dir(tmp_path: Path) -> None:
    (tmp_path / "victims").write_text("a file, not a directory")
    notices = FileVictimNotices(tmp_path, always, poll_interval=0.02)
    with anyio.move_on_after(0.2) as scope:
        await notices.wait_for_victim("a")
    assert scope.cancelled_caught


@pytest.mark.skipif(not inotify_available(), reason="needs inotify")
async def test_inotify_reports_changes_and_times_out_quietly(tmp_path: Path) -> None:
    watcher = Inotify.open()
    assert watcher is not None
    with watcher:
        assert watcher.watch(tmp_path)
        assert not watcher.watch(tmp_path / "missing")
        assert await watcher.wait(0.05) == []
        (tmp_path / "x").mkdir()
        events = await watcher.wait(5)
        assert [event.name for event in events] == ["x"]
        assert watcher.path_of(events[0].wd) == tmp_path
    assert watcher.closed


def test_force_polling_disables_inotify(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKYARD_NO_INOTIFY", "1")
    assert not inotify_available()
    assert Inotify.open() is None


def test_board_refuses_a_victims_dir_owned_by_someone_else(tmp_path: Path) -> None:
    board = VictimNoticeBoard(tmp_path)
    board.ensure()
    if os.getuid() != 0:
        pytest.skip("needs root to hand the directory to another user")
    os.chown(tmp_path / "victims", 4242, 4242)
    with pytest.raises(NoticeBoardError, match="belongs to uid 4242"):
        board.post(notice())
    assert os.listdir(tmp_path / "victims") == []


async def test_any_victim_notices_returns_the_first_source_that_names_the_agent(
    tmp_path: Path,
) -> None:
    from lockyard.domain.monitor import DeadlockMonitor
    from lockyard.infra.crossproc.notices import AnyVictimNotices

    in_process = DeadlockMonitor()
    either = AnyVictimNotices(in_process, FileVictimNotices(tmp_path, always, poll_interval=0.05))
    posted = notice("a")
    timer = threading.Timer(0.1, lambda: VictimNoticeBoard(tmp_path).post(posted))
    timer.start()
    try:
        with anyio.fail_after(5):
            assert await either.wait_for_victim("a") == posted.deadlock
    finally:
        timer.cancel()
    with pytest.raises(ValueError, match="at least one"):
        AnyVictimNotices()
