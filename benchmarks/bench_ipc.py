"""IPC figures beside `lockyard serve` over stdio, measured in the same run.

    python3 scripts/uv run python benchmarks/bench_ipc.py [--quick]

1. Round trip: lock_acquire + lock_release from an MCP client through `lockyard serve --ipc`
   (a process) -> the IPC folder -> `lockyard ipc-host` (another process) and back, against
   the same two calls through `lockyard serve` over stdio on a lock directory. Rounds of the
   two alternate, so load on the machine hits both alike. Target: IPC within 3x of stdio.
2. Handoff: agent A holds a file and B waits for it in a blocking lock_acquire; the time from
   A's lock_release call to B's lock_acquire returning. Between two sandboxes (two `serve
   --ipc` processes, one host) against two `lockyard serve` processes on one lock directory.
3. The write guard: one `lockyard hook pre-tool-use` process judging a Write of a file the
   agent holds, inside a sandbox (`--ipc`: a `check` round trip through the folder to the
   host) against the same command on the lock directory (`--agent-id --lock-dir`), alternating.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from lockyard.infra.lockstore.lockdir.store import LockStore

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


def env(**extra: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], **extra}


def stdio_params(agent: str, repo: Path, lock_dir: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=LOCKYARD,
        args=["serve", "--agent-id", agent, "--repo", str(repo), "--log-level", "ERROR"],
        env=env(LOCKYARD_LOCK_DIR=str(lock_dir)),
    )


def ipc_params(folder: Path, repo: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=LOCKYARD,
        args=["serve", "--ipc", str(folder), "--repo", str(repo), "--log-level", "ERROR"],
        env=env(),
    )


@asynccontextmanager
async def ipc_host(root: Path, repo: Path, lock_dir: Path) -> AsyncIterator[None]:
    process = await anyio.open_process(
        [LOCKYARD, "ipc-host", "--root", str(root), "--repo", str(repo), "--lock-dir",
         str(lock_dir), "--log-level", "ERROR", "--rate", "10000", "--burst", "10000"],
        env=env(), stdout=None, stderr=None,
    )  # fmt: skip
    try:
        yield
    finally:
        process.terminate()
        await process.wait()


async def round_trip(client: Client, name: str) -> float:
    start = time.perf_counter()
    await client.call_tool("lock_acquire", {"filepaths": [name], "timeout_seconds": 0})
    await client.call_tool("lock_release", {"all": True})
    return time.perf_counter() - start


async def guard_call(argv: list[str], payload: bytes) -> float:
    start = time.perf_counter()
    done = await anyio.run_process(argv, input=payload, env=env(), check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0 or done.stdout.strip():
        raise SystemExit(f"the hook did not allow the write: {done.stdout!r} {done.stderr!r}")
    return elapsed


async def handoff(store: LockStore, holder: Client, waiter: Client, agent: str) -> float:
    await holder.call_tool("lock_acquire", {"filepaths": ["h.py"], "timeout_seconds": 0})
    key = store.canonicalize("h.py")
    done: list[float] = []
    async with anyio.create_task_group() as group:

        async def wait() -> None:
            await waiter.call_tool("lock_acquire", {"filepaths": ["h.py"], "timeout_seconds": 60})
            done.append(time.perf_counter())

        group.start_soon(wait)
        while (agent, key) not in store.snapshot().waits:  # noqa: ASYNC110 - state on disk
            await anyio.sleep(0.002)
        start = time.perf_counter()
        await holder.call_tool("lock_release", {"all": True})
    await waiter.call_tool("lock_release", {"all": True})
    return done[0] - start


def ms(values: list[float], q: float = 0.5) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def row(name: str, values: list[float]) -> str:
    return f"  {name:34}{ms(values):>8.2f}ms{ms(values, 0.9):>8.2f}ms{len(values):>5}"


async def main(quick: bool) -> None:
    rounds, handoffs, guards = (40, 10, 10) if quick else (300, 60, 40)
    with tempfile.TemporaryDirectory(dir=os.environ.get("XDG_RUNTIME_DIR", "/dev/shm")) as tmp:
        base = Path(tmp)
        repo = base / "repo"
        repo.mkdir()
        root = base / "ipc"
        for name in ("a", "b"):
            (root / name).mkdir(parents=True)
        stdio_locks, ipc_locks = base / "stdio-locks", base / "ipc-locks"
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(ipc_host(root, repo, ipc_locks))
            stdio_a = await stack.enter_async_context(Client(stdio_params("a", repo, stdio_locks)))
            stdio_b = await stack.enter_async_context(Client(stdio_params("b", repo, stdio_locks)))
            ipc_a = await stack.enter_async_context(Client(ipc_params(root / "a", repo)))
            ipc_b = await stack.enter_async_context(Client(ipc_params(root / "b", repo)))
            for client in (stdio_a, ipc_a):  # warm-up
                for _ in range(5):
                    await round_trip(client, "w.py")
            stdio_rt: list[float] = []
            ipc_rt: list[float] = []
            for _ in range(rounds):
                stdio_rt.append(await round_trip(stdio_a, "f.py"))
                ipc_rt.append(await round_trip(ipc_a, "f.py"))
            stdio_store = LockStore(repo, stdio_locks)
            ipc_store = LockStore(repo, ipc_locks)
            stdio_ho: list[float] = []
            ipc_ho: list[float] = []
            for _ in range(handoffs):
                stdio_ho.append(await handoff(stdio_store, stdio_a, stdio_b, "b"))
                ipc_ho.append(await handoff(ipc_store, ipc_a, ipc_b, "b"))
            await stdio_a.call_tool("lock_acquire", {"filepaths": ["g.py"], "timeout_seconds": 0})
            await ipc_a.call_tool("lock_acquire", {"filepaths": ["g.py"], "timeout_seconds": 0})
            payload = json.dumps({"tool_name": "Write", "cwd": str(repo), "tool_input": {
                "file_path": str(repo / "g.py"), "content": "x\n"}}).encode()  # fmt: skip
            hook = [LOCKYARD, "hook", "pre-tool-use", "--cli", "claude-code", "--repo", str(repo)]
            on_lock_dir = [*hook, "--agent-id", "a", "--lock-dir", str(stdio_locks)]
            in_sandbox = [*hook, "--ipc", str(root / "a")]
            lock_dir_guard: list[float] = []
            ipc_guard: list[float] = []
            for _ in range(guards):
                lock_dir_guard.append(await guard_call(on_lock_dir, payload))
                ipc_guard.append(await guard_call(in_sandbox, payload))
    print(f"  {'':34}{'median':>10}{'p90':>10}{'n':>5}")
    print("lock_acquire + lock_release round trip")
    print(row("lockyard serve (stdio)", stdio_rt))
    print(row("serve --ipc -> folder -> ipc-host", ipc_rt))
    rt_ratio = statistics.median(ipc_rt) / statistics.median(stdio_rt)
    print(f"  IPC costs {rt_ratio:.2f}x the stdio round trip (median; target <= 3x)")
    print("handoff (holder's lock_release called -> waiter's lock_acquire returned)")
    print(row("two lockyard serve (stdio)", stdio_ho))
    print(row("two sandboxes through ipc-host", ipc_ho))
    ho_ratio = statistics.median(ipc_ho) / statistics.median(stdio_ho)
    print(f"  IPC handoff is {ho_ratio:.2f}x the stdio handoff (median)")
    print("write guard: one `lockyard hook pre-tool-use` process, a Write of a held file")
    print(row("on the lock directory (hook)", lock_dir_guard))
    print(row("in a sandbox (hook --ipc)", ipc_guard))
    guard_ratio = statistics.median(ipc_guard) / statistics.median(lock_dir_guard)
    print(f"  the sandbox's guard takes {guard_ratio:.2f}x the lock directory's (median)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    anyio.run(main, parser.parse_args().quick)
