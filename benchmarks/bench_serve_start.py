"""How soon `lockyard serve` answers an agent CLI's first request, and the CPU its start costs.

    python3 scripts/uv run python benchmarks/bench_serve_start.py [--runs 5]
        [--against /work/main/.venv/bin/lockyard]

Each run starts the console script as a real process on an empty lock directory, sends
`initialize`, times the wall clock until the answer arrives, sends `tools/list`, closes stdin
and waits for the exit; CPU is the child's user + system time. The table shows medians and
their ratios to a bare `python -c pass` measured in the same run; `--against` adds another
installation's `lockyard` (e.g. main's, before this change) as a second row to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOCKYARD = str(Path(sys.executable).parent / "lockyard")
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_session(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(seconds until the initialize answer, CPU seconds of the whole session)."""
    cpu_before = children_cpu()
    started = time.perf_counter()
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    first_answer = started
    if command[-1] != "pass":
        proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        first_answer = time.perf_counter()
        assert answer["result"]["serverInfo"]["name"] == "lockyard", answer
        for message in (INITIALIZED, LIST_TOOLS):
            proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 2
    proc.stdin.close()
    proc.wait()
    if command[-1] == "pass":
        first_answer = time.perf_counter()
    return first_answer - started, children_cpu() - cpu_before


def serve_command(lockyard: str, repo: str) -> list[str]:
    return [lockyard, "serve", "--agent-id", "bench", "--repo", repo]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--against", help="another installation's lockyard executable")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        repo = os.path.join(scratch, "repo")
        os.mkdir(repo)
        rows = {"python -c pass": [sys.executable, "-c", "pass"]}
        rows["lockyard serve (this checkout)"] = serve_command(LOCKYARD, repo)
        if args.against:
            rows[f"lockyard serve ({args.against})"] = serve_command(args.against, repo)
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
        for run in range(args.runs):
            for name, command in rows.items():  # interleaved: load changes hit every row alike
                env = {**os.environ, "LOCKYARD_LOCK_DIR": os.path.join(scratch, f"locks{run}")}
                results[name].append(one_session(command, env))
    baseline_wall = statistics.median(wall for wall, _ in results["python -c pass"])
    baseline_cpu = statistics.median(cpu for _, cpu in results["python -c pass"])
    print(f"{'command':<48} {'1st answer s':>12} {'x py':>6} {'CPU s':>7} {'x py':>6}")
    for name, samples in results.items():
        wall = statistics.median(w for w, _ in samples)
        cpu = statistics.median(c for _, c in samples)
        print(
            f"{name[:48]:<48} {wall:12.3f} {wall / baseline_wall:6.1f} "
            f"{cpu:7.3f} {cpu / baseline_cpu:6.1f}"
        )


if __name__ == "__main__":
    main()
