"""Follow one `lock_acquire` that waits for another holder and then gets its lock.

A second process holds `a.py`; this process calls the `lock_acquire` tool of the in-process
SDK server through the real MCP protocol. When the tool reports WAITING, the holder releases,
and the tool returns with the lock. Every Python call made in this process (all threads) while
the tool runs is recorded with `sys.setprofile` / `threading.setprofile`, and the script prints
the lockyard modules the call passed through and how often a function of one lockyard module
called a function of another (a coroutine or generator resuming is not a new call).

    python3 scripts/uv run scripts/trace_lock_path.py [--runs 3] [--calls]

The holder releases once the waiter stands in the queue (and a moment later, so the waiter is
asleep): the traced path is place in line, sleep, wake, take.

The counts describe the shape of the code path (how many modules a newcomer must read, how
often control crosses between them), not its speed.
"""

from __future__ import annotations

import argparse
import dis
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import anyio
from mcp import Client

from lockyard.core.events import LockEvent, LockEventType
from lockyard.infra.tools.locking_mcp import create_locking_mcp_server

PACKAGE = "lockyard"
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR

HOLDER = textwrap.dedent(
    """
    import sys, time
    from lockyard.infra.lockstore import LockStore
    store = LockStore(sys.argv[1], sys.argv[2])
    assert store.try_lock("a.py", "holder")
    print("held", flush=True)
    sys.stdin.readline()  # the waiter said WAITING
    deadline = time.monotonic() + 30
    while not store.waiters("a.py") and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.3)  # let the waiter go to sleep on its wake-up, so the trace shows the wake
    assert store.release("a.py", "holder")
    print("released", flush=True)
    """
)


@dataclass
class Recording:
    """Calls between lockyard modules seen while `active` is set."""

    active: bool = False
    modules: dict[str, int] = field(default_factory=dict)  # module -> order of first call
    crossings: Counter[tuple[str, str]] = field(default_factory=Counter)
    edges: Counter[tuple[str, str]] = field(default_factory=Counter)
    guard: threading.Lock = field(default_factory=threading.Lock)


_first_resume: dict[CodeType, int] = {}


def _is_resumption(frame: FrameType) -> bool:
    """True when a generator or coroutine frame continues after a yield or an await."""
    code = frame.f_code
    if not code.co_flags & _GENERATOR_FLAGS:
        return False
    start = _first_resume.get(code)
    if start is None:
        start = next(
            (ins.offset for ins in dis.get_instructions(code) if ins.opname == "RESUME"), 0
        )
        _first_resume[code] = start
    return frame.f_lasti > start


def _module_of(frame: FrameType | None) -> str | None:
    if frame is None:
        return None
    name = frame.f_globals.get("__name__")
    return name if isinstance(name, str) and name.split(".")[0] == PACKAGE else None


def make_profiler(recording: Recording) -> Any:
    def profile(frame: FrameType, event: str, arg: object) -> None:
        if not recording.active or event != "call":
            return
        callee = _module_of(frame)
        if callee is None or _is_resumption(frame):
            return
        caller = _module_of(frame.f_back)
        with recording.guard:
            recording.modules.setdefault(callee, len(recording.modules))
            if caller is not None and caller != callee:
                recording.crossings[(caller, callee)] += 1
                back = frame.f_back
                assert back is not None
                recording.edges[
                    (
                        f"{caller}.{back.f_code.co_qualname}",
                        f"{callee}.{frame.f_code.co_qualname}",
                    )
                ] += 1

    return profile


def start_holder(repo: Path, lock_dir: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(repo), str(lock_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    return holder


async def one_waiting_acquire(
    recording: Recording, repo: Path, lock_dir: Path, holder: subprocess.Popen[str]
) -> None:
    def on_event(event: LockEvent) -> None:
        if event.event_type is LockEventType.WAITING and holder.stdin is not None:
            holder.stdin.write("release when I wait\n")
            holder.stdin.flush()

    config = create_locking_mcp_server("waiter", str(repo), on_event, lock_dir=lock_dir)
    async with Client(config["instance"], mode="legacy") as client:
        recording.active = True
        try:
            result = await client.call_tool(
                "lock_acquire", {"filepaths": ["a.py"], "timeout_seconds": 30}
            )
        finally:
            recording.active = False
        await client.call_tool("lock_release", {"all": True})
    answer = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert answer["all_acquired"], answer


def traced_run(recording: Recording) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo, lock_dir = Path(tmp) / "repo", Path(tmp) / "locks"
        repo.mkdir()
        (repo / "a.py").write_text("")
        holder = start_holder(repo, lock_dir)
        try:
            profiler = make_profiler(recording)
            threading.setprofile(profiler)
            sys.setprofile(profiler)
            try:
                anyio.run(one_waiting_acquire, recording, repo, lock_dir, holder)
            finally:
                sys.setprofile(None)
                threading.setprofile(None)  # type: ignore[arg-type]
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "released"
        finally:
            holder.kill()
            holder.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="waiting acquires to trace")
    parser.add_argument("--calls", action="store_true", help="list every cross-module call")
    args = parser.parse_args()

    totals: list[int] = []
    widths: list[int] = []
    last = Recording()
    for _ in range(args.runs):
        recording = Recording()
        traced_run(recording)
        totals.append(sum(recording.crossings.values()))
        widths.append(len(recording.modules))
        last = recording

    print(f"one lock_acquire that waits, then gets its lock ({args.runs} runs, last shown)")
    print()
    print("lockyard modules, in the order the call first enters them:")
    called = Counter[str]()
    for (_, callee), count in last.crossings.items():
        called[callee] += count
    for module in sorted(last.modules, key=last.modules.__getitem__):
        print(f"  {module:<50} entered {called[module]:>3}x from other lockyard modules")
    if args.calls:
        print()
        print("cross-module calls (caller -> callee: count):")
        for (caller, callee), count in sorted(last.edges.items()):
            print(f"  {caller} -> {callee}: {count}")
    print()
    print(f"modules crossed:      {widths[-1]}  (runs: {widths})")
    print(f"cross-module calls:   {int(statistics.median(totals))} (median; runs: {totals})")
    print(f"distinct call edges:  {len(last.edges)}")


if __name__ == "__main__":
    main()
