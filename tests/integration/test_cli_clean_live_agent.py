"""`lockyard clean --agent` of an agent whose process still runs says so, and what that agent
will see; of a dead one, it says nothing more."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_support import LOCKYARD, Agents


def lockyard(*args: str) -> subprocess.CompletedProcess[str]:
    """`lockyard *args`, given minutes: a command's start-up on a loaded machine is slow."""
    env = {key: value for key, value in os.environ.items() if key != "LOCKYARD_LOCK_DIR"}
    env["COLUMNS"] = "300"
    return subprocess.run(
        [LOCKYARD, *args], capture_output=True, text=True, timeout=300, env=env, check=False
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def lock_dir(tmp_path: Path) -> Path:
    path = tmp_path / "locks"
    path.mkdir(mode=0o700)
    return path


def test_cleaning_a_live_agent_says_it_is_alive_and_what_it_will_see(
    agents: Agents, lock_dir: Path
) -> None:
    busy = agents.start("busy", holds="a.py,b.py")
    done = lockyard("clean", "--lock-dir", str(lock_dir), "--agent", "busy")
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert f"busy is still running (pid {busy.pid} on " in said
    assert "its next edit or commit of these files is refused until it locks them again" in said
    assert busy.poll() is None  # not interrupted

    agents.start("busy", holds="a.py")
    payload = json.loads(
        lockyard("clean", "--lock-dir", str(lock_dir), "--agent", "busy", "--json").stdout
    )
    assert payload["agent_alive"].startswith("pid ")


def test_cleaning_a_dead_agent_does_not_call_it_alive(agents: Agents, lock_dir: Path) -> None:
    agents.kill(agents.start("gone", holds="a.py"))
    done = lockyard("clean", "--lock-dir", str(lock_dir), "--agent", "gone", "--json")
    payload = json.loads(done.stdout)
    assert payload["count"] == 1
    assert payload["agent_alive"] is None
    text = lockyard("clean", "--lock-dir", str(lock_dir), "--agent", "gone")
    assert "still running" not in text.stdout
