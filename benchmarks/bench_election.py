"""Deadlock detection with no daemon: how fast a deadlock between `lockyard serve` processes
is resolved when they elect the resolver among themselves, and how fast another takes over
when the leader is SIGKILLed. Real processes, on a lock directory and on PostgreSQL.

1. Deadlock: two serves (alice holds f1.py, bob f2.py); alice waits for f2.py, then bob's
   call for f1.py closes the cycle. The figure is from sending bob's call to bob (the victim)
   getting his `deadlock` result, through MCP over stdio. Baseline of the same run: the same
   with a `lockyard monitor` process started first, which then leads (the set-up before the
   election, when the monitor had to be started by hand).
2. Takeover: three idle serves; the leader is SIGKILLed; the figure is from the kill to
   another serve leading (a lock directory: its pid in `deadlock-leader`; PostgreSQL: another
   backend holding the leader's advisory lock). The candidates try every 0.25 s.

    python3 scripts/uv run python benchmarks/bench_election.py [--rounds 10] [--postgres]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from lockyard.infra.crossproc.leader_file import current_leader
from lockyard.infra.crossproc.sources import monitor_source
from lockyard.infra.lockstore import LockBackend, open_backend

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


def serve_args(agent: str, repo: Path, backend: str) -> list[str]:
    return ["serve", "--agent-id", agent, "--repo", str(repo), "--backend", backend,
            "--log-level", "WARNING"]  # fmt: skip


async def call(client: Client, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool("lock_acquire", arguments)
    data: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return data


async def until(condition: Callable[[], bool]) -> None:
    for _ in itertools.count():
        if condition():
            return
        await anyio.sleep(0.002)


@contextlib.asynccontextmanager
async def monitor_process(backend: str, use: bool) -> AsyncIterator[None]:
    if not use:
        yield
        return
    process = await anyio.open_process(
        [LOCKYARD, "monitor", "--backend", backend],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await anyio.sleep(1.0)  # up and leading before the serves start
        yield
    finally:
        process.terminate()
        await process.wait()


async def one_deadlock(repo: Path, backend: str, store: LockBackend, with_monitor: bool) -> float:
    def client(agent: str) -> Client:
        return Client(
            StdioServerParameters(command=LOCKYARD, args=serve_args(agent, repo, backend))
        )

    async with (
        monitor_process(backend, with_monitor),
        client("alice") as alice,
        client("bob") as bob,
    ):
        assert (await call(alice, {"filepaths": ["f1.py"]}))["all_acquired"]
        assert (await call(bob, {"filepaths": ["f2.py"]}))["all_acquired"]
        await until(lambda: monitor_source(store).who_leads() is not None)
        took: list[float] = []
        async with anyio.create_task_group() as group:

            async def alice_waits() -> None:
                await call(alice, {"filepaths": ["f2.py"], "timeout_seconds": 60})

            group.start_soon(alice_waits)
            await until(lambda: len(store.snapshot().waits) >= 1)
            start = time.perf_counter()
            result = await call(bob, {"filepaths": ["f1.py"], "timeout_seconds": 60})
            took.append((time.perf_counter() - start) * 1000)
            assert result["deadlock"]["victim"] == "bob", result
        await call(alice, {"filepaths": ["f2.py"], "timeout_seconds": 0})
        await alice.call_tool("lock_release", {"all": True})
    return took[0]


def idle_serve(agent: str, repo: Path, backend: str) -> subprocess.Popen[bytes]:
    """A serve nobody calls; returns once it stands in the election (it logs `serving agent`
    just before its candidacy starts)."""
    log = repo.parent / f"{agent}.log"
    with log.open("wb") as err:
        process = subprocess.Popen(
            [LOCKYARD, *serve_args(agent, repo, backend)[:-2], "--log-level", "INFO"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    deadline = time.monotonic() + 300
    while b"serving agent" not in log.read_bytes():
        if time.monotonic() > deadline or process.poll() is not None:
            raise SystemExit(f"serve {agent} did not start: {log.read_text()}")
        time.sleep(0.01)
    return process


@contextlib.contextmanager
def serves_kept(started: list[subprocess.Popen[bytes]]) -> Iterator[list[subprocess.Popen[bytes]]]:
    try:
        yield started
    finally:
        for process in started:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()


def leader_pid(backend: str, store: LockBackend) -> int | None:
    """The pid of the serve that leads, or None while none does."""
    if not backend.startswith("postgresql"):
        found = current_leader(backend)
        return None if found is None else found.pid
    text = monitor_source(store).who_leads()  # "... (PostgreSQL backend pid N)"
    return None if text is None else int(text.rsplit(" ", 1)[1].rstrip(")"))


def one_takeover(repo: Path, backend: str, store: LockBackend) -> float:
    """The first serve leads alone; two more start and stand; the first is SIGKILLed."""
    with serves_kept([idle_serve("first", repo, backend)]) as serves:
        deadline = time.monotonic() + 120
        while (first := leader_pid(backend, store)) is None:
            assert time.monotonic() < deadline, "no serve leads"
            time.sleep(0.01)
        serves += [idle_serve("second", repo, backend), idle_serve("third", repo, backend)]
        time.sleep(0.5)  # every candidate has tried once
        start = time.perf_counter()
        os.kill(serves[0].pid, signal.SIGKILL)
        while leader_pid(backend, store) in (None, first):
            time.sleep(0.002)
        return (time.perf_counter() - start) * 1000


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):7.1f} ms, max {max(values):7.1f} ms"


def run_backend(name: str, backend: str, repo: Path, rounds: int) -> None:
    store = open_backend(repo, backend)
    print(f"\n{name} ({rounds} rounds each, interleaved)")
    elected, monitored, takeovers = [], [], []
    for _ in range(rounds):
        elected.append(anyio.run(one_deadlock, repo, backend, store, False))
        monitored.append(anyio.run(one_deadlock, repo, backend, store, True))
        takeovers.append(one_takeover(repo, backend, store))
    ratio = statistics.median(elected) / statistics.median(monitored)
    print(f"  deadlock resolved, serves elect the resolver  {summary(elected)} "
          f"({ratio:.2f}x the monitor's)")  # fmt: skip
    print(f"  deadlock resolved, lockyard monitor leads     {summary(monitored)}")
    print(f"  leader SIGKILLed -> another serve leads       {summary(takeovers)}")
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--postgres", action="store_true", help="also on a throwaway server")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        (repo / ".git").mkdir()
        lock_dir = Path(tmp) / "locks"
        lock_dir.mkdir(mode=0o700)
        run_backend("lock directory", str(lock_dir), repo, options.rounds)
        if options.postgres:
            from lockyard.infra.lockstore.postgres import ThrowawayCluster

            cluster = ThrowawayCluster().start()
            try:
                run_backend("PostgreSQL", cluster.dsn, repo, options.rounds)
            finally:
                cluster.destroy()


if __name__ == "__main__":
    main()
