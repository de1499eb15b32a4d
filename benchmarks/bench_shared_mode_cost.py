"""What shared holds cost the plain exclusive file lock: this tree against a baseline tree
(before shared holds), measured turn by turn in the same run, on the lock directory or, with
`--postgres`, on PostgreSQL (`LOCKYARD_TEST_PG_DSN`, else a throwaway local cluster; each
tree in a schema of its own on the one server).

    python3 scripts/uv run python benchmarks/bench_shared_mode_cost.py --base /work/wt/scopes-base
    python3 scripts/uv run python benchmarks/bench_shared_mode_cost.py --base ... --postgres

Two figures per tree, each the median of a turn's samples (µs), and their ratio this/base:

1. Uncontended cycle: `try_lock` + `release` of one file (the exclusive path now looks for
   readers once per grant, and for directory locks over the file once one was ever taken).
2. In-process hand-off: a task releases, the task waiting in line for the file gets it (on
   PostgreSQL the waiter has a store, so a database session, of its own: the grant is a push).
3. Reader drain: the last reader of the file releases, the task holding the file's line
   while it waits for the readers (an exclusive request) gets it.
4. Drain under a directory: the last hold under `src/` is released, the task holding the
   directory's line while it waits for the holds under it gets the directory.

Then, in both trees, the uncontended cycle of a file in a lock directory where a directory
lock was taken and released (`released`) against one where none ever was: a directory
lock's marks go with it (`lockdir/scope_marks.py`), so the file lock no longer looks above.

Then, in this tree only, the uncontended cycle of a file with DIRECTORIES unrelated directory
locks held (`--directories`, default 1,000: `other/d7/`) in its lock directory, or in its
namespace on PostgreSQL, and with GLOBS unrelated glob locks (`--globs`, default 100:
`other/g7/**/*.py`), each against the same cycle where no directory or glob lock was ever
taken, turn by turn.

With `--plain`, the base is a checkout from before issue 28's work (no shared, directory or
glob locks: 989d5b7, say), and only the plain file lock's figures compare (1 and 2, the
issue's 1.3x bound); the rows that need the new locks run in this tree only.

Each tree is set up by this file run with `--serve` by that tree's interpreter and answers one
turn at a time on stdin, so the machine's load hits both trees alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from processes import FigureServer

TURN_CYCLES = 500
TURN_HANDOFFS = 50
TURN_DRAINS = 20
DRAINS = {"readers": ("src/app.py", "shared"), "below": ("src/", "exclusive")}
"""What waits for what: (the waiter's key, the mode in which `src/app.py` is held)."""


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def serve(postgres: str | None) -> None:
    import anyio

    from lockyard.infra.lockstore import LockStore, open_backend
    from lockyard.infra.lockstore.backend import LockBackend

    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        (repo / "src").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        (repo / "src" / "app.py").write_text("x = 1\n")
        store = LockStore(repo, Path(tmp) / "locks") if postgres is None else None
        store = store or open_backend(repo, postgres)
        waiter = store if postgres is None else open_backend(repo, postgres)

        def cycle() -> float:
            times = []
            for _ in range(TURN_CYCLES):
                start = time.perf_counter()
                assert store.try_lock("src/app.py", "alice")
                assert store.release("src/app.py", "alice")
                times.append(time.perf_counter() - start)
            return statistics.median(times) * 1e6

        async def wait(got: anyio.Event) -> None:
            assert await waiter.acquire_async("src/app.py", "bob", 30)
            got.set()

        async def handoffs() -> float:
            times: list[float] = []
            for _ in range(TURN_HANDOFFS):
                assert store.try_lock("src/app.py", "alice")
                got = anyio.Event()

                async with anyio.create_task_group() as group:
                    group.start_soon(wait, got)
                    # Until the waiter is in line and asleep there (polling: it is queued by
                    # a task of this loop, so no event can say so).
                    for _ in range(1000):
                        if store.waiters("src/app.py"):
                            break
                        await anyio.sleep(0.0005)
                    await anyio.sleep(0.002)
                    start = time.perf_counter()
                    assert store.release("src/app.py", "alice")
                    await got.wait()
                    times.append(time.perf_counter() - start)
                assert waiter.release("src/app.py", "bob")
            return statistics.median(times) * 1e6

        async def drained(key: str, got: anyio.Event) -> None:
            assert await store.acquire_async(key, "bob", 30)
            got.set()

        async def drains(kind: str) -> float:
            key, mode = DRAINS[kind]
            times: list[float] = []
            for turn in range(TURN_DRAINS):
                assert store.try_lock("src/app.py", "alice", mode=mode)
                got = anyio.Event()
                async with anyio.create_task_group() as group:
                    group.start_soon(drained, key, got)
                    # Until the waiter holds its line and waits for alice's hold (polling:
                    # no event says so), then at a different moment of its poll interval
                    # (100 ms) each turn.
                    for _ in range(1000):
                        if store.holder(key) == "bob":
                            break
                        await anyio.sleep(0.0005)
                    await anyio.sleep(0.002 + (turn % 10) * 0.011)
                    start = time.perf_counter()
                    assert store.release("src/app.py", "alice")
                    await got.wait()
                    times.append(time.perf_counter() - start)
                assert store.release(key, "bob")
            return statistics.median(times) * 1e6

        scoped: dict[str, LockBackend] = {}

        def scoped_cycle(kind: str, count: int) -> float:
            """The cycle of `src/app.py` in a lock directory (on PostgreSQL: a namespace) where
            another agent holds `count` directory locks (`other/d7/`) or glob locks
            (`other/g7/**/*.py`) elsewhere in the checkout."""
            if kind not in scoped:
                scoped[kind] = (
                    LockStore(repo, Path(tmp) / f"{kind}-locks")
                    if postgres is None
                    else open_backend(repo, postgres, namespace=f"bench-{kind}")
                )
                for number in range(count):
                    key = f"other/d{number}/" if kind != "globbed" else f"other/g{number}/**/*.py"
                    assert scoped[kind].try_lock(key, "carol")
                if kind == "released":  # held no more: the lock directory was marked once
                    for number in range(count):
                        assert scoped[kind].release(f"other/d{number}/", "carol")
            store = scoped[kind]
            times = []
            for _ in range(TURN_CYCLES):
                start = time.perf_counter()
                assert store.try_lock("src/app.py", "alice")
                assert store.release("src/app.py", "alice")
                times.append(time.perf_counter() - start)
            return statistics.median(times) * 1e6

        for line in sys.stdin:
            what, _, count = line.strip().partition(" ")
            if what == "cycle":
                figure = cycle()
            elif what in ("scoped", "globbed", "released"):
                figure = scoped_cycle(what, int(count))
            elif what == "drain":
                figure = anyio.run(drains, count)
            else:
                figure = anyio.run(handoffs)
            print(figure, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", help="a checkout before shared holds, synced (required)")
    parser.add_argument(
        "--plain",
        action="store_true",
        help="the base has no shared, directory or glob locks: compare the file lock only",
    )
    parser.add_argument("--turns", type=int, default=7)
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--directories", type=int, default=1000)
    parser.add_argument("--globs", type=int, default=100)
    parser.add_argument(
        "--postgres",
        nargs="?",
        const="",
        help="on PostgreSQL (a server's spec when serving; alone: the test server or a cluster)",
    )
    args = parser.parse_args()
    if args.serve:
        serve(args.postgres)
        return
    if not args.base:
        parser.error("--base CHECKOUT is required (a checkout before shared holds, synced)")
    with ExitStack() as stack:
        server = None if args.postgres is None else stack.enter_context(pg_server())
        compare(args, server)


@contextmanager
def pg_server() -> Iterator[str]:
    """A server's libpq URI: `LOCKYARD_TEST_PG_DSN`, else a throwaway local cluster's."""
    dsn = os.environ.get("LOCKYARD_TEST_PG_DSN", "").strip()
    if dsn:
        yield dsn
        return
    from lockyard.infra.lockstore.postgres.cluster import ThrowawayCluster

    cluster = ThrowawayCluster().start()
    try:
        yield cluster.dsn
    finally:
        cluster.destroy()


def compare(args: argparse.Namespace, server: str | None) -> None:
    def serving(name: str) -> list[str]:
        if server is None:
            return []
        separator = "&" if "?" in server else "?"
        return ["--postgres", f"{server}{separator}lockyard_schema=bench_{name}_{os.getpid()}"]

    print(f"on {'the lock directory' if server is None else 'PostgreSQL'}, load {load()}")
    trees = {
        "base": FigureServer(
            str(Path(args.base) / ".venv" / "bin" / "python"), __file__, *serving("base")
        ),
        "this": FigureServer(sys.executable, __file__, *serving("this")),
    }
    try:
        labels = {
            "cycle": "uncontended cycle",
            "handoff": "in-process hand-off",
            "drain readers": "reader drain",
            "drain below": "drain under a dir",
        }
        if args.plain:  # the base knows exclusive file locks only
            del labels["drain readers"], labels["drain below"]
        for what, label in labels.items():
            figures: dict[str, list[float]] = {name: [] for name in trees}
            for _ in range(args.turns):
                for name, tree in trees.items():
                    figures[name].append(tree.ask(what))
            base = statistics.median(figures["base"])
            this = statistics.median(figures["this"])
            print(f"{label:22} base {base:8.1f} µs   this {this:8.1f} µs   {this / base:.2f}x")
        none: list[float] = []
        held: list[float] = []
        globbed: list[float] = []
        before: dict[str, list[float]] = {name: [] for name in trees}
        after: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(args.turns):
            none.append(trees["this"].ask("cycle"))
            held.append(trees["this"].ask(f"scoped {args.directories}"))
            globbed.append(trees["this"].ask(f"globbed {args.globs}"))
            for name, tree in trees.items():
                if name == "this" or not args.plain:
                    before[name].append(tree.ask("cycle"))
                    after[name].append(tree.ask("released 1"))
        plain = statistics.median(none)
        rows = [
            (f"with {args.directories} dir locks", held),
            (f"with {args.globs} glob locks", globbed),
        ]
        for title, samples in rows:
            scoped = statistics.median(samples)
            print(
                f"{title:22} none {plain:8.1f} µs   held {scoped:8.1f} µs   {scoped / plain:.2f}x"
            )
        for name in before:  # the marks go with the locks (scope_marks.py): no look above after
            if not before[name]:
                continue
            never, once = statistics.median(before[name]), statistics.median(after[name])
            print(
                f"{name} after a dir lock  never {never:8.1f} µs   released {once:8.1f} µs"
                f"   {once / never:.2f}x"
            )
    finally:
        for tree in trees.values():
            tree.close()


if __name__ == "__main__":
    main()
