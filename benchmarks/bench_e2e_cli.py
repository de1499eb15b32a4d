"""What our tools cost inside a real Claude CLI turn, as ratios against a no-op tool's turn.

    python3 scripts/uv run python benchmarks/bench_e2e_cli.py [--quick]

The bundled Claude CLI runs against the fake Messages API of tests/e2e (no network, no key).
A "turn" is the time between two consecutive model requests of one agent: the CLI reads the
scripted tool_use, runs PreToolUse hooks, calls the tool, runs PostToolUse hooks and sends the
next request. Measured in the same run:

  baseline    a no-op SDK MCP tool, no hooks
  in-process  lock_acquire (timeout 0) / lock_release, options from AgentRuntimeBuilder
              (SDK server, write/commit guards, PostToolUse event hook, monitor)
  stdio       the same calls through `lockyard serve` (a separate process)
  deadlock    two builder-made agents; after warm-up turns, B's blocking lock_acquire
              closes a cycle and returns the `deadlock` result: B's turn, against the same
              turn when B asks for a free file instead (no cycle)

Figures are medians over every measured turn; the machine may be shared, so compare ratios.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from claude_agent_sdk import ClaudeAgentOptions, create_sdk_mcp_server, tool

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))

from cli_agents import AgentRun, offline_options, run_agent
from fake_messages_api import FakeMessagesApi, Step, call, say

from lockyard.infra.agent_runtime import LockCoordinator

LOCKYARD = str(Path(sys.executable).parent / "lockyard")
MAX_TURNS = 200
ACQUIRE, RELEASE = "mcp__lockyard__lock_acquire", "mcp__lockyard__lock_release"


def turn_seconds(api: FakeMessagesApi, agent: str) -> list[float]:
    """Seconds between consecutive model requests of `agent` (its first turn excluded)."""
    times = [x.at for x in api.exchanges if x.agent == agent and x.answer is not None]
    return [later - earlier for earlier, later in itertools.pairwise(times[1:])]


async def session(
    api: FakeMessagesApi, agent: str, home: Path, options: Any, steps: list[Step]
) -> None:
    api.script(agent, steps)
    run = AgentRun(agent)
    await run_agent(offline_options(api, agent, home, options, run), "go", run, limit_seconds=120)
    if run.result is None or run.result.is_error:
        raise RuntimeError(f"{agent} failed: {run.result} {run.stderr[-5:]}")


def bare(**settings: Any) -> ClaudeAgentOptions:
    """No built-in tools, and room for every scripted turn."""
    return ClaudeAgentOptions(tools=[], max_turns=MAX_TURNS, **settings)


def noop_options() -> ClaudeAgentOptions:
    @tool("noop", "Does nothing", {"n": int})
    async def noop(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "{}"}]}

    server = create_sdk_mcp_server("bench", tools=[noop])
    return bare(mcp_servers={"lockyard": server}, allowed_tools=["mcp__lockyard__noop"])


def lock_steps(calls: int) -> list[Step]:
    steps = []
    for i in range(calls // 2):
        steps.append(call(ACQUIRE, {"filepaths": [f"f{i % 4}.py"], "timeout_seconds": 0}))
        steps.append(call(RELEASE, {"all": True}))
    return [*steps, say("done")]


async def measure(calls: int, rounds: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {kind: [] for kind in ALL_KINDS}
    with tempfile.TemporaryDirectory() as tmp, FakeMessagesApi() as api:
        root = Path(tmp)
        (root / "repo").mkdir()
        coordinator = LockCoordinator(root / "repo", root / "locks")
        bench = Bench(api, coordinator, root, calls)
        await bench.turns("baseline", "warmup")  # the first CLI start pays for cold caches
        for r in range(rounds):
            # Rotate the order so that no kind always runs first (or right after another).
            kinds = [*KINDS[r % len(KINDS) :], *KINDS[: r % len(KINDS)]]
            for kind in kinds:
                if kind == "deadlock":
                    for k in range(DEADLOCKS_PER_ROUND):
                        for cycle in (k % 2 == 0, k % 2 == 1):  # alternate which goes first
                            turn = await pair_turn(api, coordinator, root, f"{r}-{k}", cycle)
                            figures["deadlock" if cycle else "no-cycle"].append(turn)
                else:
                    figures[kind] += await bench.turns(kind, f"{kind}{r}")
    return figures


KINDS = ("baseline", "in-process", "stdio", "deadlock")
ALL_KINDS = (*KINDS, "no-cycle")
DEADLOCKS_PER_ROUND = 4
WARMUP_TURNS = 6
"""Ordinary lock turns before the measured one: a CLI's first turns overlap its startup work."""


class Bench:
    def __init__(
        self, api: FakeMessagesApi, coordinator: LockCoordinator, root: Path, calls: int
    ) -> None:
        self.api, self.coordinator, self.root, self.calls = api, coordinator, root, calls

    async def turns(self, kind: str, agent: str) -> list[float]:
        home = self.root / "homes" / agent
        if kind == "baseline":
            steps = [call("mcp__lockyard__noop", {"n": i}) for i in range(self.calls)]
            await session(self.api, agent, home, noop_options(), [*steps, say("done")])
        elif kind == "in-process":
            runtime = self.coordinator.runtime(agent, base_options=bare())
            async with runtime:
                await session(self.api, agent, home, runtime.options, lock_steps(self.calls))
        else:
            options = stdio_options(agent, self.coordinator)
            await session(self.api, agent, home, options, lock_steps(self.calls))
        return turn_seconds(self.api, agent)


def stdio_options(agent: str, coordinator: LockCoordinator) -> ClaudeAgentOptions:
    server = {
        "type": "stdio",
        "command": LOCKYARD,
        "args": ["serve", "--agent-id", agent, "--repo", coordinator.store.namespace],
        "env": {"LOCKYARD_LOCK_DIR": str(coordinator.store.lock_dir)},
    }
    return bare(mcp_servers={"lockyard": server}, allowed_tools=[ACQUIRE, RELEASE])


async def pair_turn(
    api: FakeMessagesApi, coordinator: LockCoordinator, root: Path, tag: str, cycle: bool
) -> float:
    """B's turn from its blocking lock_acquire to the next request, after warm-up turns.

    A holds f1 and waits for f2; B holds f2 and then asks for f1 (closing a cycle: B, the
    younger, is the victim and its call returns the `deadlock` result) or, without `cycle`,
    for a free file (granted at once). Everything else is the same, gates included.
    """
    a, b = f"pa-{tag}-{cycle:d}", f"pb-{tag}-{cycle:d}"
    store = coordinator.store
    f1, f2, free = (f"{tag}-{cycle:d}-{n}.py" for n in (1, 2, 3))
    warm_a = [call(ACQUIRE, {"filepaths": [f1], "timeout_seconds": 0})] * WARMUP_TURNS
    warm_b = [call(ACQUIRE, {"filepaths": [f2], "timeout_seconds": 0})] * WARMUP_TURNS
    scripts = {
        a: [
            *warm_a,
            call(
                ACQUIRE,
                {"filepaths": [f2], "timeout_seconds": 30},
                gate=lambda: store.holder(f2) == b,
            ),
            call(RELEASE, {"all": True}),
            say("done"),
        ],
        b: [
            *warm_b,
            call(
                ACQUIRE,
                {"filepaths": [f1 if cycle else free], "timeout_seconds": 30},
                gate=lambda: (a, store.canonicalize(f2)) in store.snapshot().waits,
            ),
            call(RELEASE, {"all": True}),
            say("done"),
        ],
    }
    async with anyio.create_task_group() as group:
        for agent, steps in scripts.items():
            runtime = coordinator.runtime(agent, base_options=bare())

            async def one(runtime: Any = runtime, steps: list[Step] = steps) -> None:
                async with runtime:
                    home = root / "homes" / runtime.agent_id
                    await session(api, runtime.agent_id, home, runtime.options, steps)

            group.start_soon(one)
            await anyio.sleep(0.01)  # A registers first, so B is the younger agent
    measured = api.outcomes(b)[WARMUP_TURNS].json or {}
    if cycle != ("deadlock" in measured):
        raise RuntimeError(f"expected deadlock={cycle} in B's result, got {measured}")
    times = [x.at for x in api.exchanges if x.agent == b and x.answer is not None]
    return times[WARMUP_TURNS + 1] - times[WARMUP_TURNS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns, one round")
    args = parser.parse_args()
    calls, rounds = (10, 1) if args.quick else (30, 4)
    logging.getLogger("lockyard").setLevel(logging.ERROR)  # each deadlock logs a warning
    figures = anyio.run(measure, calls, rounds)
    print(f"Turns of {calls}-call sessions, every turn after the first ({rounds} round(s)):")
    report(figures, "baseline", {"baseline": "no-op tool", "in-process": "in-process",
                                 "stdio": "stdio serve"})  # fmt: skip
    print(f"Agent B's blocking lock_acquire after {WARMUP_TURNS} lock turns, while A waits on B:")
    report(figures, "no-cycle", {"no-cycle": "no cycle", "deadlock": "deadlock"})


def report(figures: dict[str, list[float]], baseline: str, rows: dict[str, str]) -> None:
    base = statistics.median(figures[baseline])
    for kind, label in rows.items():
        values = figures[kind]
        median = statistics.median(values)
        ratio = median / base
        versus, n = rows[baseline], len(values)
        print(f"  {label:<11} {median * 1000:8.1f} ms  {ratio:5.2f} x {versus}  (n={n})")


if __name__ == "__main__":
    main()
