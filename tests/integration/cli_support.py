"""Helpers for the CLI's integration tests: the real `lockyard` entry point, agent processes
that hold and wait for locks on a real lock directory, the guard's answer to one call, and
the stalled holder and its waiter that the revocation tests share."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from lockyard.cli import hook
from lockyard.infra.lockstore import LockBackend, open_backend
from lockyard.infra.tools.lock_tools import LockTools
from polling_support import wait_until

LOCKYARD = str(Path(sys.executable).parent / "lockyard")

# An agent process: takes `holds`, says so, waits for a line on stdin, then blocks on `waits`
# one by one (reporting each grant), then stays alive until stdin closes. A lock is `name`
# (in the default repository) or `repo=name`.
AGENT = """
import sys
from lockyard.infra.lockstore import LockStore
lock_dir, default_repo, agent, holds, waits, patience = sys.argv[1:7]
def each(spec):
    for item in filter(None, spec.split(",")):
        repo, _, name = item.rpartition("=")
        yield LockStore(repo or default_repo or None, lock_dir), name
for store, name in each(holds):
    name, _, mode = name.partition("@")  # "a.py@shared": a read
    assert store.try_lock(name, agent, mode=mode or "exclusive"), name
print("holding", flush=True)
sys.stdin.readline()
for store, name in each(waits):
    granted = store.acquire(name, agent, timeout_seconds=float(patience))
    print(("acquired " if granted else "timeout ") + name, flush=True)
sys.stdin.read()
"""


class Agents:
    """Starts lock-holding agent processes and ends them whatever the test does."""

    def __init__(self, lock_dir: Path, repo: Path | None = None, patience: float = 600) -> None:
        """`patience`: how long an agent's wait lasts before it times out (seconds); longer
        than any test, so that a slow machine never ends a wait the test meant to keep."""
        self.lock_dir = lock_dir
        self.repo = repo
        self.patience = patience
        self.processes: list[subprocess.Popen[str]] = []

    def start(self, agent: str, holds: str = "", waits: str = "") -> subprocess.Popen[str]:
        """An agent holding `holds` (comma-separated; `a.py@shared` reads a.py); it waits for
        `waits` after `go`."""
        repo = "" if self.repo is None else str(self.repo)
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                AGENT,
                str(self.lock_dir),
                repo,
                agent,
                holds,
                waits,
                str(self.patience),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.processes.append(process)
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "holding"
        return process

    def go(self, *processes: subprocess.Popen[str]) -> None:
        """Let these processes (default: all) start their blocking waits."""
        for process in processes or self.processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()

    def kill(self, process: subprocess.Popen[str]) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    stream.close()


def lockyard(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`lockyard *args`, without the caller's LOCKYARD_LOCK_DIR (`env` adds variables), in
    this tests directory: a directory with files, which a command that scanned "." by mistake
    would show."""
    clean_env = {key: value for key, value in os.environ.items() if key != "LOCKYARD_LOCK_DIR"}
    return subprocess.run(
        [LOCKYARD, *args],
        capture_output=True,
        text=True,
        timeout=180,  # a loaded 2-core machine starts a command in 20-60 s at worst
        input=stdin,
        env=clean_env | {"COLUMNS": "300"} | (env or {}),  # no wrapped lines
        cwd=Path(__file__).parent,
        check=False,
    )


def guard_says(
    repo: Path,
    lock_dir: Path,
    agent: str,
    monkeypatch: pytest.MonkeyPatch,
    *,
    command: str | None = None,
) -> str:
    """The guard's answer (empty: allowed) to `agent`'s Edit of a.py, or Bash `command`."""
    edit: dict[str, object] = {
        "tool_name": "Edit", "tool_input": {"file_path": str(repo / "a.py")}, "cwd": str(repo)
    }  # fmt: skip
    if command is not None:
        edit = {"tool_name": "Bash", "tool_input": {"command": command}, "cwd": str(repo)}
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(edit).encode())))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    hook.main(
        ["pre-tool-use", "--cli", "claude-code", "--agent-id", agent, "--repo", str(repo),
         f"--lock-dir={lock_dir}"]
    )  # fmt: skip
    return out.getvalue().strip()


def git_repo_with_a_py(tmp_path: Path) -> Path:
    """A git repository holding one file, `a.py` (resolved: the form the guards compare)."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.py").write_text("a\n")
    return root.resolve()


@contextlib.contextmanager
def waiting_in_a_thread(store: LockBackend, path: str, agent: str = "carol") -> Iterator[None]:
    """`agent` waits for `path` (up to 240 s) in a thread: the block runs once it is queued,
    and ends when its wait does (granted, or given up)."""
    waiter = threading.Thread(
        target=store.acquire, args=(path, agent), kwargs={"timeout_seconds": 240}
    )
    waiter.start()
    try:
        wait_until(lambda: agent in [w.agent_id for w in store.waiters(path)])
        yield
    finally:
        waiter.join(timeout=300)


@contextlib.asynccontextmanager
async def stuck_holding_a_py(
    repo: Path, spec: str
) -> AsyncIterator[tuple[LockTools, LockBackend, LockBackend]]:
    """Agent `stuck` holding `a.py` through its lock tools on backend `spec`, in a store of its
    own ("mine"), beside another process's store of the same backend ("theirs")."""
    mine, theirs = open_backend(str(repo), spec), open_backend(str(repo), spec)
    try:
        stuck = LockTools(mine, "stuck")
        taken = await stuck.call("lock_acquire", {"filepaths": ["a.py"]})
        assert taken.data is not None
        assert taken.data["all_acquired"] is True
        yield stuck, mine, theirs
    finally:
        mine.close()
        theirs.close()
