"""Agent CLI sessions as their users run them: the CLI's own executable, started in a
repository that `lockyard init` set up, talking to a scripted fake of its model API.

`CliSession` is one such process. It starts in a process group of its own, so a test can
kill the whole session (the CLI, its lockyard server, its hooks) at once, as a crash would.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


class CliSession:
    """One agent CLI process with its output kept in files (no pipe can fill up)."""

    def __init__(self, name: str, argv: list[str], cwd: Path, env: dict[str, str], logs: Path):
        logs.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.stdout_path = logs / f"{name}.out"
        self.stderr_path = logs / f"{name}.err"
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.process = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True,
            )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.process.pid

    def agent_id(self, cli: str) -> str:
        """The lockyard agent id this session gets: the CLI process anchors it."""
        return f"{cli}-{self.pid}"

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            message = f"{self.name} did not finish in {timeout} s:\n{self.logs()}"
            raise AssertionError(message) from None

    def kill(self) -> None:
        """SIGKILL the session's whole process group: no cleanup runs anywhere in it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.process.wait()

    def logs(self) -> str:
        out = self.stdout_path.read_text(errors="replace")[-3000:]
        err = self.stderr_path.read_text(errors="replace")[-3000:]
        return f"--- {self.name} stdout\n{out}\n--- {self.name} stderr\n{err}"


def free_port() -> int:
    """A loopback port nothing listens on now. From the ephemeral range, so never the port
    another test's lock directory derives for its guard (those lie below it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def init_repo(
    repo: Path,
    *clis: str,
    lock_dir: Path | None = None,
    guard_port: int | None = None,
    git_turns: bool = False,
) -> int:
    """A git repository set up by the real `lockyard init` command; the guard's port.

    The guard gets a port of its own (`guard_port`, else a free one): with the port derived
    from the lock directory, a test's guard could share a port with another test's running
    at the same time, and an HTTP hook reaching the other one is refused."""
    repo.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    port = free_port() if guard_port is None else guard_port
    extra = ["--guard-port", str(port)]
    extra += [] if lock_dir is None else ["--lock-dir", str(lock_dir)]
    extra += ["--git-turns"] if git_turns else []
    subprocess.run(
        [LOCKYARD, "init", *clis, "--command", LOCKYARD, *extra],
        cwd=repo, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return port
