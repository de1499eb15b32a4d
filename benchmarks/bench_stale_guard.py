"""What the stale-read check adds to a guarded write, against the guard without it.

Per guarded write (a write the guard allows, to a file the agent holds and has read), two
ways in, each measured on this tree and on a baseline tree in the same run (`--base`, by
a checkout of the commit before the check with its own `.venv`; default /work/base), and
the ratio printed:

- the SDK path: `judge_write(...)` and, when it says so, `note_writes(...)` called
  in-process (what the PreToolUse hook of an SDK agent and the HTTP guard run; the baseline
  runs its `write_denial`), median of 200 calls per turn;
- the command hook: a fresh `lockyard hook pre-tool-use` process per write (what Codex,
  Gemini CLI and OpenCode pay), one per turn.

Two cases on this tree: the file as the agent read it, and the file rewritten since by the
agent's own writes. After the agent's first allowed write both cost one `stat` of the book's
entry (its own write is what it knows of the file).

    python3 scripts/uv run python benchmarks/bench_stale_guard.py [--base /work/base] [--runs 30]

Each tree is set up by this file run with `--serve` by that tree's interpreter; the trees
are measured turn by turn, so the machine's load hits them alike.
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

from processes import FigureServer

DEFAULT_BASE = "/work/base"


def serve(own_edits: bool) -> None:
    from lockyard.infra.hooks.write_guard import decide
    from lockyard.infra.lockstore import LockStore

    lockyard = str(Path(sys.executable).parent / "lockyard")
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        source = repo / "app.py"
        source.write_text("x = 1\n" * 400)  # a 2.4 kB source file
        old = time.time() - 60
        os.utime(source, (old, old))
        time.sleep(2.1)  # past the racy window of the utime's ctime: a settled file
        lock_dir = str(Path(tmp) / "locks")
        store = LockStore(repo, lock_dir)
        assert store.try_lock("app.py", "alice")
        hook = [lockyard, "hook", "pre-tool-use", "--agent-id", "alice", "--repo", str(repo),
                "--lock-dir", lock_dir]  # fmt: skip

        def tool(name: str) -> bytes:
            data = {"tool_name": name, "tool_input": {"file_path": "app.py"}, "cwd": str(repo)}
            return json.dumps(data).encode()

        def guard() -> str | None:
            if not hasattr(decide, "judge_write"):  # the baseline: the guard before the check
                reason: str | None = decide.write_denial(
                    store, "alice", "app.py", str(repo), "lock_acquire"
                )
                return reason
            # What the SDK hook runs: the decision, then the book's note of an allowed write.
            from lockyard.infra.hooks.guard_common import note_writes

            reason, written = decide.judge_write(
                store, "alice", "app.py", str(repo), "lock_acquire"
            )
            if reason is None and written:
                note_writes(store, "alice", written)
            return reason

        # The agent reads the file (a Read the baseline does not judge), then edits it.
        subprocess.run(hook, input=tool("Read"), capture_output=True, check=True)
        if own_edits:
            assert guard() is None
            source.write_text("x = 2\n" * 400)
        for line in sys.stdin:
            command, *count = line.split()
            if command == "hook":
                start = time.perf_counter()
                done = subprocess.run(hook, input=tool("Write"), capture_output=True, check=True)
                figure = (time.perf_counter() - start) * 1000
                assert done.stdout == b"", done.stdout
            else:
                times = []
                for _ in range(int(count[0])):
                    start = time.perf_counter()
                    reason = guard()
                    times.append(time.perf_counter() - start)
                    assert reason is None, reason
                figure = statistics.median(times) * 1e6
            print(figure, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--base", default=DEFAULT_BASE)
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--own-edits", action="store_true")
    args = parser.parse_args()
    if args.serve:
        serve(args.own_edits)
        return
    base_python = str(Path(args.base) / ".venv" / "bin" / "python")
    trees = {
        "baseline guard (no stale-read check)": FigureServer(base_python, __file__),
        "with the check, file as the agent read it": FigureServer(sys.executable, __file__),
        "with the check, file rewritten by its edits": FigureServer(
            sys.executable, __file__, "--own-edits"
        ),
    }
    # Turn by turn, so a change in the machine's load hits every tree alike.
    figures: dict[str, dict[str, list[float]]] = {name: {"in": [], "hook": []} for name in trees}
    for _ in range(args.runs):
        for name, tree in trees.items():
            figures[name]["in"].append(tree.ask("inproc 200"))
            figures[name]["hook"].append(tree.ask("hook"))
    for tree in trees.values():
        tree.close()
    medians = {
        name: (statistics.median(f["in"]), statistics.median(f["hook"]))
        for name, f in figures.items()
    }
    base_in, base_hook = next(iter(medians.values()))
    print(f"per guarded write, median of {args.runs} turns; baseline = the guard of {args.base}")
    print(f"{'':44} {'in-process':>12} {'ratio':>6} {'hook process':>13} {'ratio':>6}")
    for name, (inproc, hook) in medians.items():
        print(
            f"{name:44} {inproc:9.1f} µs {inproc / base_in:5.2f}x "
            f"{hook:10.1f} ms {hook / base_hook:5.2f}x"
        )


if __name__ == "__main__":
    main()
