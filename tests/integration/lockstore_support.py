"""Helpers for the lock store's integration tests: real child processes that hold or wait."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from lockyard.infra.lockstore.liveness import current_process, new_token
from lockyard.infra.lockstore.paths import lock_name
from lockyard.infra.tools.locking import LockStore

CHILD = r"""
import sys, time, anyio
from lockyard.infra.tools.locking import LockStore
repo, lock_dir, path, agent, mode = sys.argv[1:6]
store = LockStore(repo, lock_dir, liveness_interval=0.05)
if mode == "hold":
    assert store.try_lock(path, agent)
    print("locked", flush=True)
    time.sleep(600)
elif mode == "wait":
    print("waiting", flush=True)
    ok = store.acquire(path, agent, timeout_seconds=60, poll_interval_ms=float(sys.argv[6]))
    print("acquired" if ok else "timeout", flush=True)
    with open(sys.argv[7], "a") as log:
        log.write(agent + "\n")
    store.release(path, agent)
elif mode == "grab":
    print("ready", flush=True)
    sys.stdin.readline()
    reclaimed = []
    store = LockStore(repo, lock_dir, on_reclaim=reclaimed.append)
    print("won" if store.try_lock(path, agent) else "lost", len(reclaimed), flush=True)
"""


def spawn(
    repo: Path, lock_dir: Path, path: str, agent: str, mode: str, *extra: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(repo), str(lock_dir), path, agent, mode, *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def expect_line(child: subprocess.Popen[str], expected: str) -> str:
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    assert line.startswith(expected), f"child said {line!r}, expected {expected!r}"
    return line


def kill(child: subprocess.Popen[str]) -> None:
    child.kill()
    child.wait()


def wait_until(condition: object, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def plant_holder(store: LockStore, filepath: str, agent: str, **process: object) -> str:
    """Publish a lock whose record claims another process (pid, host, boot... overridden)."""
    key = store.canonicalize(filepath)
    me = current_process()
    token = new_token()
    record = {
        "agent_id": agent,
        "token": token,
        "pid": me.pid,
        "start_time": me.start_time,
        "host": me.host,
        "boot_id": me.boot_id,
        "pid_ns": me.pid_ns,
        "lock_path": key,
        "namespace": store.namespace,
        "acquired_at": time.time(),
    }
    record.update(process)
    assert store._dir.publish(lock_name(store.namespace, key), token, json.dumps(record))
    return token


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not os.path.exists(f"/proc/{child.pid}")
    return child.pid
