"""Pending victim-notice waits share the process's one inotify instance."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from lockyard.core.deadlock_info import CycleStep, DeadlockInfo
from lockyard.infra.crossproc.notices import FileVictimNotices, VictimNotice, VictimNoticeBoard
from polling_support import wait_until_async

pytestmark = pytest.mark.anyio


def inotify_instances() -> int:
    """inotify instances this process has open, from /proc (what the per-user limit counts)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify":
                count += 1
        except OSError:
            continue
    return count


def notice_for(agent: str) -> VictimNotice:
    info = DeadlockInfo(
        cycle=(
            CycleStep(agent_id=agent, lock_path="f1", held_by="other"),
            CycleStep(agent_id="other", lock_path="f2", held_by=agent),
        ),
        victim=agent,
        victim_waits_on="f1",
        victim_waits_on_holder="other",
    )
    return VictimNotice(agent_id=agent, waits_on="f1", deadlock=info)


async def test_many_pending_waits_use_one_inotify_instance(tmp_path: Path) -> None:
    waits = 200  # more than the default 128 inotify instances a user may open
    notices = FileVictimNotices(tmp_path, lambda notice: True, poll_interval=60)
    before = inotify_instances()
    heard: list[str] = []

    async def wait(agent: str) -> None:
        heard.append((await notices.wait_for_victim(agent)).victim)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            for index in range(waits):
                group.start_soon(wait, f"agent-{index}")
            await anyio.wait_all_tasks_blocked()
            assert inotify_instances() - before <= 1  # at most the hub's own, if new
            # Pushed, not polled (poll_interval is a minute): a posted notice ends its wait.
            VictimNoticeBoard(tmp_path).post(notice_for("agent-7"))
            await wait_until_async(lambda: heard, "agent-7 hearing its notice")
            assert heard == ["agent-7"]
            group.cancel_scope.cancel()
