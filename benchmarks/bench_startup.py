"""Start-up cost of each `lockyard` command, and which heavy libraries it loads.

    python3 scripts/uv run python benchmarks/bench_startup.py [--runs 7]

Each command runs as a real process through the console script, on an empty lock directory
and a throwaway repository (so the time is start-up, not work), `--runs` times; the table
shows the median wall time, its ratio to a bare `python -c pass` measured in the same run,
and which of mcp, claude_agent_sdk, rich, psycopg, pydantic and typer the command imported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("mcp", "claude_agent_sdk", "rich", "psycopg", "pydantic", "typer")
LOCKYARD = str(Path(sys.executable).parent / "lockyard")

# Runs the console script's entry point in this interpreter and reports the heavy modules it
# loaded into the file named by the first argument (at exit, whatever the exit code).
PROBE = r"""
import atexit, json, sys
out, heavy = sys.argv[1], sys.argv[2].split(",")
def report():
    with open(out, "w") as f:
        json.dump([m for m in heavy if m in sys.modules], f)
atexit.register(report)
sys.argv = ["lockyard", *sys.argv[3:]]
from lockyard.cli.entry import main
main()
"""


def commands(lock_dir: str, repo: str) -> list[tuple[str, list[str], str]]:
    """(label, arguments, stdin) per command."""
    read_call = json.dumps(
        {"hook_event_name": "PreToolUse", "tool_name": "Read", "session_id": "bench",
         "tool_input": {"file_path": f"{repo}/a.py"}, "cwd": repo}
    )  # fmt: skip
    return [
        ("lockyard --version", ["--version"], ""),
        ("lockyard --help", ["--help"], ""),
        ("lockyard status --json", ["status", "--json", "--lock-dir", lock_dir], ""),
        ("lockyard status", ["status", "--lock-dir", lock_dir], ""),
        ("lockyard clean --json", ["clean", "--json", "--lock-dir", lock_dir], ""),
        ("lockyard monitor --once", ["monitor", "--once", "--lock-dir", lock_dir], ""),
        (
            "lockyard hook pre-tool-use (Read)",
            [
                "hook",
                "pre-tool-use",
                "--cli",
                "claude-code",
                "--lock-dir",
                lock_dir,
                "--agent-id",
                "bench",
                "--repo",
                repo,
            ],
            read_call,
        ),
        (
            "lockyard serve (stdin at its end)",
            ["serve", "--agent-id", "bench", "--repo", repo, "--lock-dir", lock_dir],
            "",
        ),
        ("lockyard demo --help", ["demo", "--help"], ""),
    ]


def timed(argv: list[str], stdin: str, runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def loaded(args: list[str], stdin: str) -> list[str]:
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        subprocess.run(
            [sys.executable, "-c", PROBE, out.name, ",".join(HEAVY), *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        text = Path(out.name).read_text()
    return list(json.loads(text)) if text else ["?"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        lock_dir, repo = os.path.join(scratch, "locks"), os.path.join(scratch, "repo")
        os.mkdir(repo)
        baseline = timed([sys.executable, "-c", "pass"], "", options.runs)
        print(f"baseline: python -c pass  {baseline * 1000:.0f} ms (median of {options.runs})")
        print()
        print("| command | median | vs python -c pass | heavy imports |")
        print("| --- | --- | --- | --- |")
        for label, args, stdin in commands(lock_dir, repo):
            median = timed([LOCKYARD, *args], stdin, options.runs)
            heavy = ", ".join(loaded(args, stdin)) or "none"
            print(f"| `{label}` | {median * 1000:.0f} ms | {median / baseline:.1f}x | {heavy} |")


if __name__ == "__main__":
    main()
