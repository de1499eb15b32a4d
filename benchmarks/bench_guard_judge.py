"""The guard server's judging of one write, in process: holders kept (`HolderWatch`) vs read
afresh, in the same run.

    python3 scripts/uv run python benchmarks/bench_guard_judge.py [--calls 3000] [--rounds 5]

The judging a `lockyard serve` runs per HTTP hook call (`judge_read_call`, the session
already found), without the HTTP around it, for an allowed write (the agent holds the
file) and a denied one (another agent does). CPU time per call; the rounds alternate
between the two readers so load falls on both alike. The holder is another live process,
as in real use.
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

from lockyard.infra.agentcli.formats import FORMATS, HookAnswer
from lockyard.infra.agentcli.hook_runner import JudgedAgent, judge_read_call, read_tool_call
from lockyard.infra.agentcli.lockdir_reader import ReaderCache

HOLDER = """
import sys
from lockyard.infra.lockstore import LockStore
store = LockStore(sys.argv[1], sys.argv[2])
assert store.try_lock("mine.py", "me") and store.try_lock("theirs.py", "them")
print("held", flush=True)
sys.stdin.read()
"""


def _body(repo: str, name: str) -> bytes:
    call = {
        "session_id": "s",
        "cwd": repo,
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": f"{repo}/{name}", "content": "x = 1\n"},
    }
    return json.dumps(call).encode()


def _per_call(readers: ReaderCache, repo: str, lock_dir: str, body: bytes, calls: int) -> float:
    fmt = FORMATS["claude-code"]
    agent = JudgedAgent("me", repo)
    start = time.process_time()
    for _ in range(calls):
        call = read_tool_call(fmt, body)
        assert not isinstance(call, HookAnswer)
        judge_read_call(fmt, call, lock_dir, lambda: agent, readers)
    return (time.process_time() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo, lock_dir = os.path.join(tmp, "repo"), os.path.join(tmp, "locks")
        os.makedirs(os.path.join(repo, ".git"))
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, repo, lock_dir],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        readers = {
            "read afresh": ReaderCache(lock_dir, watch_holders=False),
            "kept": ReaderCache(lock_dir),
        }
        assert readers["kept"].watch is not None, "inotify is off: nothing is kept"
        bodies = {"allowed": _body(repo, "mine.py"), "denied": _body(repo, "theirs.py")}
        times: dict[tuple[str, str], list[float]] = {}
        for _round in range(options.rounds):
            for kind, body in bodies.items():
                for way, cache in readers.items():
                    spent = _per_call(cache, repo, lock_dir, body, options.calls)
                    times.setdefault((kind, way), []).append(spent)
        holder.communicate("")
    print(f"judging one write in process, CPU µs per call (median of {options.rounds} rounds "
          f"of {options.calls} calls)")  # fmt: skip
    for kind in bodies:
        fresh = statistics.median(times[(kind, "read afresh")])
        kept = statistics.median(times[(kind, "kept")])
        print(f"  {kind:8} read afresh {fresh:7.1f}   kept {kept:7.1f}   {kept / fresh:.2f}x")


if __name__ == "__main__":
    main()
