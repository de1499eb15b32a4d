"""Helpers for the lock store's integration tests: real child processes that hold or wait."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.backend import LockBackend
from lockyard.infra.lockstore.liveness import current_process, new_token
from lockyard.infra.lockstore.paths import lock_name
from polling_support import wait_until_async

CHILD = r"""
import sys, time, anyio
from lockyard.infra.lockstore import LockStore, open_backend
repo, lock_dir, path, agent, mode = sys.argv[1:6]
if lock_dir.startswith("postgresql:"):  # a PostgreSQL backend's spec (mode "share" only)
    store = open_backend(repo, lock_dir)
else:
    store = LockStore(repo, lock_dir, liveness_interval=0.05)
if mode in ("hold", "share"):  # until told "release", or killed
    assert store.try_lock(path, agent, mode="shared" if mode == "share" else "exclusive")
    print("locked", flush=True)
    if sys.stdin.readline() == "release\n":
        assert store.release(path, agent)
        print("released", flush=True)
    time.sleep(600)
elif mode == "wait":
    print("waiting", flush=True)
    ok = store.acquire(path, agent, timeout_seconds=60, poll_interval_ms=float(sys.argv[6]))
    print("acquired" if ok else "timeout", flush=True)
    with open(sys.argv[7], "a") as log:
        log.write(agent + "\n")
    store.release(path, agent)
elif mode == "wait-hold":  # a line releases; then "again" waits for the lock once more
    while True:
        print("waiting", flush=True)
        assert store.acquire(path, agent, timeout_seconds=60)
        print("acquired", flush=True)
        sys.stdin.readline()
        assert store.release(path, agent)
        print("released", flush=True)
        if sys.stdin.readline() != "again\n":
            time.sleep(600)  # stays alive, holding nothing, until killed
elif mode == "release":
    print("released" if store.release(path, agent) else "not held", flush=True)
elif mode == "grab":
    print("ready", flush=True)
    sys.stdin.readline()
    reclaimed = []
    store = LockStore(repo, lock_dir, on_reclaim=reclaimed.append)
    print("won" if store.try_lock(path, agent) else "lost", len(reclaimed), flush=True)
    if len(sys.argv) > 6 and sys.argv[6] == "stay":
        sys.stdin.readline()  # a winner that exited would be a dead holder, fairly reclaimed
"""


def spawn(
    repo: Path, lock_dir: Path | str, path: str, agent: str, mode: str, *extra: str
) -> subprocess.Popen[str]:
    """A child holding or waiting for `path`; `lock_dir` may be a PostgreSQL backend's spec
    for mode "share"."""
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


def tell(child: subprocess.Popen[str], line: str) -> None:
    assert child.stdin is not None
    child.stdin.write(line + "\n")
    child.stdin.flush()


def kill(child: subprocess.Popen[str]) -> None:
    child.kill()
    child.wait()


def queued_agents(store: LockBackend, name: str) -> list[str]:
    """The agents waiting for the lock `name`, in arrival order."""
    return [waiter.agent_id for waiter in store.waiters(name)]


async def until_queued(store: LockBackend, name: str, agents: list[str]) -> None:
    """Wait until exactly `agents` wait for `name`, in this order (the queue is on disk: there
    is no event to await)."""
    await wait_until_async(
        lambda: queued_agents(store, name) == agents, f"exactly {agents} queued for {name}"
    )


async def until_waiting(store: LockBackend, name: str, agent: str) -> None:
    """Wait until `agent` is among the waiters for `name`."""
    await wait_until_async(
        lambda: agent in queued_agents(store, name), f"{agent} queued for {name}"
    )


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
    assert store.directory.publish(lock_name(store.namespace, key), token, json.dumps(record))
    return token


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not os.path.exists(f"/proc/{child.pid}")
    return child.pid


WORKER = r"""
import os, random, sys
from lockyard.infra.lockstore.liveness import read_proc_stat
from lockyard.infra.lockstore import LockStore

import time

repo, lock_dir, data, agent, iterations, files, hold = sys.argv[1:8]


def report(reclamation):
    with open(os.path.join(data, "reclaimed"), "a") as log:
        log.write(reclamation.holder.agent_id + "\n")


store = LockStore(repo, lock_dir, liveness_interval=0.05, on_reclaim=report)
names = [f"shared-{n}.txt" for n in range(int(files))]
rng = random.Random(agent)


def alive(pid):
    stat = read_proc_stat(pid)
    return stat is not None and stat[0] not in "ZX"


def enter(marker):
    # A second live holder inside the critical section is an overlap; a dead one's marker
    # is what a SIGKILLed holder leaves behind.
    while True:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                with open(marker) as existing:
                    owner = int(existing.read() or 0)
            except FileNotFoundError:
                owner = 0
            if owner and alive(owner):
                with open(os.path.join(data, "overlaps"), "a") as log:
                    log.write(f"{agent} found {owner}\n")
                return
            try:
                os.unlink(marker)
            except FileNotFoundError:
                pass
            continue
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return


print("started", flush=True)
for seq in range(int(iterations)):
    name = rng.choice(names)
    assert store.acquire(name, agent, timeout_seconds=120), "lock not granted in 120 s"
    marker = os.path.join(data, name + ".owner")
    enter(marker)
    path = os.path.join(data, name)
    with open(path) as current:
        lines = current.read()
    temporary = f"{path}.{agent}.tmp"
    with open(temporary, "w") as updated:
        updated.write(lines + f"{agent} {seq}\n")
    os.replace(temporary, path)
    time.sleep(float(hold))
    os.unlink(marker)
    assert store.release(name, agent), "lost a lock I held"
print("done", flush=True)
"""


def spawn_worker(
    repo: Path,
    lock_dir: Path,
    data: Path,
    agent: str,
    iterations: int,
    files: int,
    hold_seconds: float = 0.0,
) -> subprocess.Popen[str]:
    arguments = [str(repo), str(lock_dir), str(data), agent, str(iterations), str(files)]
    arguments.append(str(hold_seconds))
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, *arguments],
        stdout=subprocess.PIPE,
        text=True,
    )


def read_edits(data: Path, files: int) -> dict[str, list[int]]:
    """agent -> the sequence numbers of its edits found in the shared files (sorted)."""
    edits: dict[str, list[int]] = {}
    for n in range(files):
        for line in (data / f"shared-{n}.txt").read_text().splitlines():
            agent, seq = line.split()
            edits.setdefault(agent, []).append(int(seq))
    return {agent: sorted(seqs) for agent, seqs in edits.items()}
