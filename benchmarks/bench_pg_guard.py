"""What the guards' look costs on PostgreSQL: this tree against a baseline tree, turn by turn
in the same run, on one server (`LOCKYARD_TEST_PG_DSN`, else a throwaway local cluster; each
tree in a schema of its own).

    python3 scripts/uv run python benchmarks/bench_pg_guard.py --base /work/wt/pg3-base

The look is `holder_over` (what the write, shell and commit guards ask before a write: who
holds the file, else a directory over it) for a file nobody holds, DEPTH directories deep
(`--depth`, default 4: `d1/d2/d3/d4/f.py`), with nothing held over it, and with another
agent's directory lock on its outermost directory (found first: the walk stops there). Wall
time per look (median of a turn's), and the ratio this/base. Each tree is set up by this file
run with `--serve` by that tree's interpreter, answering one turn at a time on stdin.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_shared_mode_cost import load, pg_server
from processes import FigureServer

TURN_LOOKS = 300


def serve(spec: str, depth: int) -> None:
    from lockyard.infra.hooks.guard_common import holder_over
    from lockyard.infra.lockstore import open_backend

    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        folders = "/".join(f"d{level}" for level in range(1, depth + 1))
        (repo / folders).mkdir(parents=True)
        (repo / ".git").mkdir()
        key = f"{folders}/f.py"
        store, other = open_backend(repo, spec), open_backend(repo, spec)

        def looks() -> float:
            times = []
            for _ in range(TURN_LOOKS):
                start = time.perf_counter()
                holder_over(store, key, "ann")  # type: ignore[arg-type]
                times.append(time.perf_counter() - start)
            return statistics.median(times) * 1e6

        for line in sys.stdin:
            if line.strip() == "free":
                figure = looks()
            else:
                assert other.try_lock("d1/", "bob")
                figure = looks()
                assert other.release("d1/", "bob")
            print(figure, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", help="a checkout to compare with, synced (required)")
    parser.add_argument("--turns", type=int, default=7)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.depth)
        return
    if not args.base:
        parser.error("--base CHECKOUT is required")
    with pg_server() as server:
        separator = "&" if "?" in server else "?"

        def tree(python: str, name: str) -> FigureServer:
            spec = f"{server}{separator}lockyard_schema=bench_guard_{name}_{os.getpid()}"
            return FigureServer(python, __file__, spec, "--depth", str(args.depth))

        print(f"guard look on PostgreSQL, depth {args.depth}, load {load()}")
        trees = {
            "base": tree(str(Path(args.base) / ".venv" / "bin" / "python"), "base"),
            "this": tree(sys.executable, "this"),
        }
        try:
            labels = {"free": "nothing held over it", "held": "its outer dir held"}
            for what, label in labels.items():
                figures: dict[str, list[float]] = {name: [] for name in trees}
                for _ in range(args.turns):
                    for name, figure_server in trees.items():
                        figures[name].append(figure_server.ask(what))
                base = statistics.median(figures["base"])
                this = statistics.median(figures["this"])
                print(f"{label:22} base {base:8.1f} µs   this {this:8.1f} µs   {this / base:.2f}x")
            print(f"load {load()}")
        finally:
            for figure_server in trees.values():
                figure_server.close()


if __name__ == "__main__":
    main()
