"""Processes the benchmarks start and talk to: `lockyard web` on a lock directory, and a
child Python (another checkout's, say) that answers one figure per line asked on stdin, so two
trees can be measured turn by turn under the same load."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

LOCKYARD = str(Path(sys.executable).parent / "lockyard")
WEB_ADDRESS = re.compile(r"lockyard web: (http://\S+)")


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a running process (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class WebProcess:
    """`lockyard web` on `lock_dir` in a process of its own, from the moment it says its
    address (`started_in`: how long that took)."""

    def __init__(self, lock_dir: Path, lockyard: str = LOCKYARD) -> None:
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [lockyard, "web", "--port", "0", "--lock-dir", str(lock_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={k: v for k, v in os.environ.items() if k != "LOCKYARD_LOCK_DIR"},
        )
        assert self.process.stdout is not None
        found = WEB_ADDRESS.search(self.process.stdout.readline())
        if found is None:
            self.close()
            raise SystemExit("lockyard web did not say its address")
        self.address = found.group(1)
        self.started_in = time.perf_counter() - started

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.address + path, timeout=600) as answer:
            body: bytes = answer.read()
            return body

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


class FigureServer:
    """`python script --serve ARGS...` in a child process: each line written to it is a
    question, each line it prints back one figure (a float)."""

    def __init__(self, python: str, script: str, *args: str) -> None:
        self.process = subprocess.Popen(
            [python, script, "--serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, line: str) -> float:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()
