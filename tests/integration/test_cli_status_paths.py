"""`lockyard status PATH...`: per file, who holds it and who waits, since when, and whether
taking it now would be granted, through the real entry point, on a real lock directory (a
holder in a real process, SIGKILLed) and on a real PostgreSQL server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cli_support import LOCKYARD, Agents, lockyard

from lockyard.infra.lockstore import LockBackend, LockStore, open_backend
from lockyard.infra.lockstore.lockdir.agents import activity_path
from pg_support import PgServer
from polling_support import wait_until


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    (path / "src").mkdir(parents=True)
    for name in ("a.py", "b.py", "c.py"):
        (path / "src" / name).write_text("x\n")
    subprocess.run(["git", "init", "-q", str(path)], check=True)  # keys are from its root
    return path.resolve()


@pytest.fixture
def lock_dir(tmp_path: Path) -> Path:
    path = tmp_path / "locks"
    path.mkdir(mode=0o700)
    return path


def waiting_thread(store: LockBackend, key: str, agent: str, before: list[str]) -> threading.Thread:
    """`agent` waits for `key` in a thread (behind `before`) until the test releases it."""
    thread = threading.Thread(
        target=store.acquire, args=(key, agent), kwargs={"timeout_seconds": 900}
    )
    thread.start()
    line = [*before, agent]
    wait_until(lambda: [w.agent_id for w in store.waiters(key)] == line, f"{agent} to queue")
    return thread


def by_file(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["filepath"]: entry for entry in payload["paths"]}


def status_in(repo: Path, *args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    """`lockyard status ARGS` run from inside `repo`, on a terminal `columns` wide."""
    env = {k: v for k, v in os.environ.items() if k != "LOCKYARD_LOCK_DIR"}
    return subprocess.run(
        [LOCKYARD, "status", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env | {"COLUMNS": str(columns)},
        cwd=repo / "src",
        check=False,
    )


def test_status_of_paths_names_holders_waiters_in_order_and_whether_taking_now_is_granted(
    repo: Path, lock_dir: Path, agents: Agents
) -> None:
    store = LockStore(str(repo), lock_dir)
    assert store.try_lock("src/a.py", "alice")
    store.stamp_activity("alice")  # alice's last heartbeat, long ago
    idle_since = time.time() - 3000
    os.utime(activity_path(lock_dir, "alice"), (idle_since, idle_since))
    bob = waiting_thread(store, "src/a.py", "bob", [])
    carol = waiting_thread(store, "src/a.py", "carol-with-a-rather-long-agent-name", ["bob"])
    dave = agents.start("dave", holds="src/c.py")
    agents.kill(dave)  # its lock stays behind, held by a provably dead process
    try:
        before = sorted(os.listdir(lock_dir))
        done = status_in(repo, "--lock-dir", str(lock_dir), "--json", "a.py", "b.py", "c.py")
        assert done.returncode == 0, done.stderr
        looks = by_file(json.loads(done.stdout))
        held = looks["src/a.py"]
        assert [h["agent"] for h in held["held_by"]] == ["alice"]
        assert held["held_by"][0]["pid"] == os.getpid()
        assert held["held_by"][0]["liveness"] == "alive"
        assert held["held_by"][0]["idle_seconds"] >= 3000
        assert [w["agent"] for w in held["waiting"]] == [
            "bob",
            "carol-with-a-rather-long-agent-name",
        ]
        assert held["waiting"][0]["since"] <= held["waiting"][1]["since"]
        assert held["would_be_granted"] is False
        assert looks["src/b.py"] == {
            "filepath": "src/b.py",
            "held_by": [],
            "shared_by": [],
            "waiting": [],
            "would_be_granted": True,
            "overlapping": [],
        }
        dead = looks["src/c.py"]
        assert [(h["agent"], h["liveness"]) for h in dead["held_by"]] == [("dave", "dead")]
        assert dead["would_be_granted"] is True  # the next acquire takes a dead holder's place

        text = status_in(repo, "--lock-dir", str(lock_dir), "a.py", "c.py")
        assert text.returncode == 0, text.stderr
        lines = text.stdout.splitlines()
        # Folded at 80 columns; only a word longer than that (the test's long lock directory
        # path) may stand alone on a longer line.
        assert all(len(line) <= 80 or " " not in line.strip() for line in lines), text.stdout
        shown = " ".join(line.strip() for line in lines)
        assert "held by alice for" in shown
        assert re.search(r"alice last did anything \d+m\d\ds ago", shown), shown
        assert "waiting, first come first served: 1. bob for" in shown
        assert "2. carol-with-a-rather-long-agent-name for" in shown
        assert "taking it now: waits (2 already waiting)" in shown
        assert "held by dave for" in shown
        assert ", dead)" in shown
        assert "granted at once (taking over from dead processes)" in shown
        whole = status_in(repo, "--lock-dir", str(lock_dir), "--json")
        assert whole.returncode == 0, whole.stderr
        holders = {lock["lock_path"]: lock["holder"] for lock in json.loads(whole.stdout)["locks"]}
        assert holders["src/a.py"]["last_active"] == pytest.approx(idle_since)
        assert holders["src/c.py"]["last_active"] is None  # dave never made a tool call
        # A look changes nothing: the same entries, the same queue, the dead lock kept.
        assert sorted(os.listdir(lock_dir)) == before
        assert store.holder("src/c.py") == "dave"
    finally:
        store.release("src/a.py", "alice")
        bob.join(timeout=120)
        store.release("src/a.py", "bob")
        carol.join(timeout=120)
        store.cleanup_agent_locks("carol-with-a-rather-long-agent-name")
        store.close()


def test_status_of_paths_in_a_lock_directory_not_created_yet_finds_them_free(
    repo: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "no-locks-yet"
    done = status_in(repo, "--lock-dir", str(missing), "--json", "a.py", "__db__")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["lock_dir_exists"] is False
    assert {k: v["would_be_granted"] for k, v in by_file(payload).items()} == {
        "__db__": True,
        "src/a.py": True,
    }
    assert not missing.exists()


def test_status_of_bad_paths_names_each_in_one_line_and_looks_at_nothing(
    repo: Path, lock_dir: Path
) -> None:
    done = lockyard("status", "--lock-dir", str(lock_dir), "--repo", str(repo), str(repo / "src"),
                    "/etc/passwd", str(repo / "src/a.py"))  # fmt: skip
    assert done.returncode == 2
    assert done.stdout == ""
    first = done.stderr.splitlines()[0]
    assert first.startswith("lockyard: error: nothing was looked at: ")
    assert "write it with a trailing slash" in first  # a directory is looked at as src/
    assert "/etc/passwd" in first


def test_status_of_paths_on_postgresql_names_the_holder_with_its_fence_and_the_waiter(
    repo: Path, pg_server: PgServer, pg_schema: str
) -> None:
    spec = pg_server.spec(pg_schema)
    store = open_backend(str(repo), spec)
    try:
        assert store.try_lock("src/a.py", "alice")
        carol = waiting_thread(store, "src/a.py", "carol", [])
        try:
            done = status_in(repo, "--backend", spec, "--json", "a.py", "b.py")
            assert done.returncode == 0, done.stderr
            payload = json.loads(done.stdout)
            assert "password" not in done.stdout
            looks = by_file(payload)
            holder = looks["src/a.py"]["held_by"][0]
            assert holder["agent"] == "alice"
            assert holder["fence"] >= 1
            assert [w["agent"] for w in looks["src/a.py"]["waiting"]] == ["carol"]
            assert looks["src/a.py"]["would_be_granted"] is False
            assert looks["src/b.py"]["would_be_granted"] is True
            assert [w.agent_id for w in store.waiters("src/a.py")] == ["carol"]
        finally:
            store.release("src/a.py", "alice")
            carol.join(timeout=120)
            store.release("src/a.py", "carol")
    finally:
        store.close()
