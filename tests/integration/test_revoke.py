"""An operator takes a stalled holder's locks: a real `lockyard serve` agent holds a file and
does nothing while another agent waits; `lockyard clean --agent ID --reason TEXT` (a real
process) releases them, the waiter gets the file, the guard refuses the stalled agent's
write, its next lock call tells it why, and the journal names the operator."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from cli_support import (
    LOCKYARD,
    git_repo_with_a_py,
    guard_says,
    stuck_holding_a_py,
    waiting_in_a_thread,
)
from mcp import Client
from test_journal_lockdir import journalled
from test_serve_stdio import serve_params

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.lockdir.agents import activity_path
from pg_support import PgServer

pytestmark = pytest.mark.anyio

REASON = "idle for 50 min while carol waits; finish or re-lock"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo_with_a_py(tmp_path)


def clean(*args: str) -> subprocess.CompletedProcess[str]:
    """`lockyard clean ARGS`, given as long as a loaded machine needs to start it."""
    env = {k: v for k, v in os.environ.items() if k != "LOCKYARD_LOCK_DIR"}
    return subprocess.run(
        [LOCKYARD, "clean", *args], capture_output=True, text=True, timeout=240, env=env,
        check=False,
    )  # fmt: skip


async def test_a_revoked_stalled_holder_is_denied_its_write_and_told_why_and_the_waiter_gets_it(
    repo: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LockStore(repo, lock_dir)
    async with Client(serve_params("stuck", repo, lock_dir)) as client:
        taken = await client.call_tool("lock_acquire", {"filepaths": ["a.py"]})
        assert json.loads(taken.content[0].text)["all_acquired"] is True  # type: ignore[union-attr]
        assert guard_says(repo, lock_dir, "stuck", monkeypatch) == ""
        then = time.time() - 3000  # stuck has done nothing for 50 minutes
        os.utime(activity_path(lock_dir, "stuck"), (then, then))
        with waiting_in_a_thread(store, "a.py"):
            done = clean("--lock-dir", str(lock_dir), "--agent", "stuck", "--reason", REASON,
                         "--json")  # fmt: skip
            assert done.returncode == 0, done.stderr
            report = json.loads(done.stdout)
            assert [r["lock_path"] for r in report["released"]] == ["a.py"]
            assert report["told"] is True
        assert store.holder("a.py") == "carol"  # the waiter got it, in its turn

        denied = guard_says(repo, lock_dir, "stuck", monkeypatch)
        assert "revoked: an operator released it (lockyard clean --agent stuck)" in denied
        assert REASON in denied  # its write is refused, and it is told why

        told = await client.call_tool("lock_release", {"all": True})
        payload = json.loads(told.content[0].text)  # type: ignore[union-attr]
        assert payload["released"] == []
        [lost] = payload["lost_locks"]
        assert lost["filepath"] == "a.py"
        assert REASON in lost["reason"]
        assert "lost_locks_instruction" in payload
        again = await client.call_tool("lock_release", {"all": True})  # told once
        assert "lost_locks" not in json.loads(again.content[0].text)  # type: ignore[union-attr]

    [record] = journalled(lock_dir, kinds=["operator-release"])
    assert (record.file, record.agent) == ("a.py", "stuck")
    assert record.other is not None
    assert "clean --agent stuck" in record.other
    assert store.release("a.py", "carol")


async def test_on_postgresql_a_revoked_holder_is_told_it_lost_the_file_and_the_waiter_gets_it(
    repo: Path, pg_server: PgServer, pg_schema: str
) -> None:
    spec = pg_server.spec(pg_schema)
    async with stuck_holding_a_py(repo, spec) as (stuck, _, theirs):
        with waiting_in_a_thread(theirs, "a.py"):
            done = clean("--backend", spec, "--agent", "stuck", "--reason", REASON, "--json")
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["told"] is True
        assert theirs.holder("a.py") == "carol"
        told = await stuck.call("lock_release", {"all": True})
        assert told.data is not None
        assert [lost["filepath"] for lost in told.data["lost_locks"]] == ["a.py"]
        assert theirs.release("a.py", "carol")
