"""One live `lockyard serve` per agent id: a second live server under an id in use is refused
before it speaks MCP, and the id is free again once its server ends or dies."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from test_serve_stdio import LOCKYARD, acquire_raw, start_raw_server

from lockyard.infra.crossproc.agent_claims import AgentClaim, AgentIdInUseError
from lockyard.infra.lockstore.lockdir.store import LockStore


def serve_once(repo: Path, lock_dir: Path, agent: str) -> subprocess.CompletedProcess[str]:
    """A server whose stdin is already at its end: it starts, serves nothing, and exits."""
    return subprocess.run(
        [LOCKYARD, "serve", "--agent-id", agent, "--repo", str(repo)],
        input="",
        capture_output=True,
        text=True,
        timeout=180,  # a serve's start imports mcp: 20-60 s on a loaded 2-core machine
        env={**os.environ, "LOCKYARD_LOCK_DIR": str(lock_dir)},
    )


def stop(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()  # the session ends as the agent CLI ends it
    assert proc.wait(timeout=120) == 0


def test_a_second_live_server_under_one_agent_id_is_refused(repo: Path, lock_dir: Path) -> None:
    (repo / "src").mkdir()
    first = start_raw_server(repo, lock_dir, agent="alice")
    try:
        assert acquire_raw(first, "src/a.py")["all_acquired"] is True
        second = serve_once(repo, lock_dir, "alice")
        assert second.returncode == 2
        assert second.stdout == ""  # refused before any MCP traffic
        [line] = second.stderr.strip().splitlines()[:1]
        assert f"agent id 'alice' is already served by process {first.pid}" in line
        assert "--agent-id" in second.stderr
        assert "Traceback" not in second.stderr
        # The refused server touched nothing: alice's lock is still the first server's.
        store = LockStore(str(repo), lock_dir)
        record = store.holder_record("src/a.py")
        assert record is not None
        assert (record.agent_id, record.pid) == ("alice", first.pid)
        assert serve_once(repo, lock_dir, "bob").returncode == 0  # other ids are unaffected
    finally:
        stop(first)
    assert serve_once(repo, lock_dir, "alice").returncode == 0  # ended: the id is free again


def test_the_id_of_a_killed_server_can_be_served_again(repo: Path, lock_dir: Path) -> None:
    first = start_raw_server(repo, lock_dir, agent="alice")
    first.kill()
    first.communicate(timeout=30)
    again = serve_once(repo, lock_dir, "alice")
    assert again.returncode == 0, again.stderr


def test_claims_exclude_each_other_and_a_released_claim_is_free(lock_dir: Path) -> None:
    claim = AgentClaim(lock_dir, "alice").acquire()
    with pytest.raises(AgentIdInUseError) as refused:
        AgentClaim(lock_dir, "alice").acquire()
    assert refused.value.holder is not None
    assert refused.value.holder.pid == os.getpid()
    with AgentClaim(lock_dir, "bob"):
        pass
    claim.release()
    claim.release()  # twice is harmless
    with AgentClaim(lock_dir, "alice"):
        pass
