"""How long `lockyard hook pre-tool-use` takes, the cost an agent CLI pays on every tool call.

Each figure is the median wall time of N runs of a fresh process, against baselines from the
same run: a bare `python -c pass` (the interpreter's own start-up) and a process that imports
what the full `lockyard` command loads (typer, rich, the store's pydantic records, mcp)
and so shows what the hook's own entry path avoids.

    python3 -m uv run python benchmarks/bench_hook.py [--runs 40]

Then `python -X importtime` of the hook says what its start-up time is made of.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lockyard.infra.lockstore import LockStore

PYTHON = sys.executable
LOCKYARD = str(Path(PYTHON).parent / "lockyard")


def median_ms(command: list[str], stdin: bytes, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, input=stdin, capture_output=True, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        (repo / ".git").mkdir()
        lock_dir = str(Path(tmp) / "locks")
        LockStore(repo, lock_dir).try_lock("held.py", "alice")
        hook = [LOCKYARD, "hook", "pre-tool-use", "--agent-id", "alice", "--repo", str(repo),
                "--lock-dir", lock_dir]  # fmt: skip

        def write(path: str) -> bytes:
            return json.dumps(
                {"tool_name": "Write", "tool_input": {"file_path": path}, "cwd": str(repo)}
            ).encode()

        rows = [
            ("python -c pass (interpreter start-up)", [PYTHON, "-c", "pass"], b""),
            ("lockyard hook: write to a held file (allowed)", hook, write("held.py")),
            ("lockyard hook: write to an unlocked file (denied)", hook, write("free.py")),
            ("lockyard hook: a tool it does not judge (Read)", hook,
             json.dumps({"tool_name": "Read", "tool_input": {}}).encode()),
            ("importing what `lockyard status` loads (typer, rich, pydantic store)",
             [PYTHON, "-c", "import lockyard.cli.app"], b""),
            ("importing mcp (what `lockyard serve` loads)", [PYTHON, "-c", "import mcp"], b""),
        ]  # fmt: skip
        results = [(label, median_ms(cmd, stdin, runs)) for label, cmd, stdin in rows]
        base = results[0][1]
        print(f"median of {runs} runs each (ms), ratio to python -c pass:")
        for label, ms in results:
            print(f"  {ms:7.1f} ms  {ms / base:5.1f}x  {label}")
        print("\nlargest cumulative imports of the hook (python -X importtime):")
        done = subprocess.run(
            [PYTHON, "-X", "importtime", "-c", "import lockyard.cli.entry, lockyard.cli.hook, "
             "lockyard.infra.agentcli.hook_runner"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        lines = [line.split("|") for line in done.stderr.splitlines()[1:]]
        top = sorted(lines, key=lambda cols: int(cols[1]), reverse=True)[:8]
        for _self, cumulative, name in top:
            print(f"  {int(cumulative) / 1000:7.1f} ms  {name.rstrip()}")


if __name__ == "__main__":
    main()
