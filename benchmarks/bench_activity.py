"""What a heartbeat costs: the stamp every tool call and every judged hook call now makes.

An agent's activity is the mtime of one file per agent in the lock directory
(`lockdir/agents.py`), set by one `utimensat`. Measured in one run, turn by turn so the
machine's load hits every case alike, on a lock directory on tmpfs (/dev/shm, the default):

- floor: `os.stat` of a file in the lock directory (one bare system call on a path);
- stamp: `stamp_activity(lock_dir, agent)` (what each call adds);
- guard: the long-lived guard's judgement of an allowed Edit of a held file
  (`judge_read_call` with its reader cache, as `lockyard serve`'s HTTP guard runs it),
  which includes one stamp;
- tools: `LockTools.call` lock_acquire + lock_release of one free file (two stamps).

Prints medians in microseconds and the stamp's share of the calls it rides on.

    python3 scripts/uv run python benchmarks/bench_activity.py [--runs 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from lockyard.infra.agentcli.formats import FORMATS, ToolCall
from lockyard.infra.agentcli.hook_runner import JudgedAgent, judge_read_call, read_tool_call
from lockyard.infra.agentcli.lockdir_reader import ReaderCache
from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.lockdir.agents import activity_path, stamp_activity
from lockyard.infra.tools.lock_tools import LockTools


def one(step: Callable[[], object]) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    runs = parser.parse_args().runs
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=base) as scratch:
        lock_dir, repo = Path(scratch) / "locks", Path(scratch) / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        (repo / "a.py").write_text("a\n")
        store = LockStore(repo, lock_dir)
        assert store.try_lock("held.py", "alice")
        stamp_activity(lock_dir, "alice")
        stamp_file = activity_path(lock_dir, "alice")
        fmt = FORMATS["claude-code"]
        edit = {"tool_name": "Edit", "tool_input": {"file_path": str(repo / "held.py")}}
        call = read_tool_call(fmt, json.dumps(edit | {"cwd": str(repo)}).encode())
        assert isinstance(call, ToolCall), call
        readers = ReaderCache(lock_dir)
        agent = JudgedAgent("alice", str(repo))
        tools = LockTools(store, "bob")

        def guard() -> None:
            answer = judge_read_call(fmt, call, str(lock_dir), lambda: agent, readers)
            assert not answer.stdout, answer  # allowed

        def cycle() -> None:
            async def both() -> None:
                await tools.call("lock_acquire", {"filepaths": ["a.py"], "timeout_seconds": 0})
                await tools.call("lock_release", {"all": True})

            anyio.run(both)

        cases: dict[str, Callable[[], object]] = {
            "floor (os.stat)": lambda: os.stat(stamp_file),
            "stamp": lambda: stamp_activity(lock_dir, "alice"),
            "guard (allowed Edit)": guard,
            "tools (acquire+release)": cycle,
        }
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(runs):
            for name, step in cases.items():
                samples[name].append(one(step))
        store.release("held.py", "alice")
    med = {name: statistics.median(values) * 1e6 for name, values in samples.items()}
    for name, value in med.items():
        print(f"{name:26s} {value:9.2f} us (median of {runs})")
    print(f"stamp / floor                {med['stamp'] / med['floor (os.stat)']:.2f}x")
    print(f"stamp / guard call           {med['stamp'] / med['guard (allowed Edit)']:.1%}")
    print(f"2 stamps / tools cycle       {2 * med['stamp'] / med['tools (acquire+release)']:.1%}")


if __name__ == "__main__":
    main()
