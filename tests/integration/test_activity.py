"""Heartbeats: every lock tool call and every call a guard judges stamps the agent as active,
and a look at a lock tells how long its holder has done nothing. On a real lock directory;
an old stamp is made by setting the stamp file's mtime back (no sleeping, no timed checks)."""

from __future__ import annotations

import io
import json
import os
import sys
import time
from pathlib import Path

import pytest
from cli_support import git_repo_with_a_py

from lockyard.cli import hook
from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.lockdir.agents import ACTIVE_DIR, activity_path
from lockyard.infra.tools.lock_tools import LockTools

pytestmark = pytest.mark.anyio

LONG_AGO = 3000.0
"""How far back a test sets a stamp: far more than any test takes."""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo_with_a_py(tmp_path)


def set_back(lock_dir: Path, agent: str) -> float:
    """Make `agent`'s last stamp LONG_AGO old; return that moment."""
    then = time.time() - LONG_AGO
    os.utime(activity_path(lock_dir, agent), (then, then))
    return then


async def test_each_lock_tool_call_is_a_heartbeat_and_lock_status_tells_the_holders_idle_time(
    repo: Path, lock_dir: Path
) -> None:
    store = LockStore(repo, lock_dir)
    bob, alice = LockTools(store, "bob"), LockTools(store, "alice")
    assert store.last_active("bob") is None
    taken = await bob.call("lock_acquire", {"filepaths": ["a.py"], "timeout_seconds": 0})
    assert taken.data is not None
    assert taken.data["all_acquired"] is True
    then = set_back(lock_dir, "bob")

    looked = await alice.call("lock_status", {"filepaths": ["a.py"]})
    assert looked.data is not None
    holder = looked.data["locks"][0]["held_by"][0]
    assert holder["agent"] == "bob"
    assert holder["idle_seconds"] >= LONG_AGO
    assert "last active" in looked.data["locks"][0]["summary"]

    await bob.call("lock_status", {"filepaths": ["a.py"]})  # bob does something: any call
    last = store.last_active("bob")
    assert last is not None
    assert last > then + LONG_AGO / 2
    await bob.call("lock_release", {"all": True})


def test_each_call_a_guard_judges_is_a_heartbeat(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    repo: Path,
    lock_dir: Path,
) -> None:
    store = LockStore(repo, lock_dir)
    assert store.try_lock("a.py", "alice")
    store.stamp_activity("alice")
    then = set_back(lock_dir, "alice")
    edit = {"tool_name": "Edit", "tool_input": {"file_path": str(repo / "a.py")}, "cwd": str(repo)}
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(edit).encode())))
    code = hook.main(
        ["pre-tool-use", "--cli", "claude-code", "--agent-id", "alice", "--repo", str(repo),
         f"--lock-dir={lock_dir}"]
    )  # fmt: skip
    assert code == 0
    assert capsys.readouterr().out.strip() == ""  # allowed: alice holds it
    last = store.last_active("alice")
    assert last is not None
    assert last > then + LONG_AGO / 2
    store.release("a.py", "alice")


def test_a_look_at_a_lock_stamps_nobody_and_creates_nothing(repo: Path, lock_dir: Path) -> None:
    LockStore(repo, lock_dir).try_lock("a.py", "alice")  # no tool call: no stamp
    reader = LockStore(repo, lock_dir, read_only=True)
    reader.stamp_activity("carol")  # a store that only reads writes no heartbeat either
    assert reader.last_active("alice") is None
    assert not (lock_dir / ACTIVE_DIR).exists()
