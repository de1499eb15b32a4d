"""How fast the deadlock monitor reacts, and whether that depends on the number of agents.

For 10, 100, 1,000 and 10,000 agents holding ten locks each (and waiting on one another in
short acyclic chains, so searches have something to walk), it measures:

- the cost of `handle_event` on events that close nothing (a mix of ACQUIRED, WAITING,
  WAIT_ENDED and RELEASED);
- the time from the `handle_event` call whose event closes a cycle to the `on_deadlock`
  callback, for cycles of 2 and of 8 agents;
- a whole pass of the cross-process `lockyard monitor`: `rebuild` from a snapshot, then
  `check_all` over the whole graph (linear in its size, so this one grows with the agents).

Figures are medians over many repetitions, printed next to a baseline measured in the same run
(awaiting a coroutine that only updates a dict) and as ratios against the 100-agent row, so a
busy machine shifts all figures alike. Run it:

    python3 scripts/uv run python benchmarks/bench_monitor.py            # full run (~1 min)
    python3 scripts/uv run python benchmarks/bench_monitor.py --quick    # fewer repetitions
"""

from __future__ import annotations

import argparse
import gc
import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from lockyard.core.deadlock_info import DeadlockInfo
from lockyard.core.events import LockEvent, LockEventType
from lockyard.domain.monitor import DeadlockMonitor

AGENT_COUNTS = (10, 100, 1_000, 10_000)
LOCKS_PER_AGENT = 10
CHAIN = 5  # agents wait on one another in chains of this length: agent k waits on agent k + 1
CYCLE_LENGTHS = (2, 8)


def agent(i: int) -> str:
    return f"agent-{i:05d}"


def lock(i: int, j: int) -> str:
    return f"/repo/src/module_{i:05d}/file_{j}.py"


def ev(kind: LockEventType, who: str, key: str) -> LockEvent:
    return LockEvent(event_type=kind, agent_id=who, lock_path=key)


def snapshot(agents: int) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Every agent holds ten locks; agents wait on the next one in chains of CHAIN."""
    holds = {lock(i, j): agent(i) for i in range(agents) for j in range(LOCKS_PER_AGENT)}
    waits = [(agent(i), lock(i + 1, 0)) for i in range(agents - 1) if (i + 1) % CHAIN]
    return holds, waits


def build(agents: int, on_deadlock: Callable[[DeadlockInfo], None]) -> DeadlockMonitor:
    monitor = DeadlockMonitor(on_deadlock=on_deadlock)
    for i in range(agents):
        monitor.register_agent(agent(i), start_time=float(i))
    monitor.rebuild(*snapshot(agents))
    return monitor


@dataclass
class Row:
    agents: int
    quiet_us: float
    closing_us: dict[int, float | None]
    full_pass_ms: float


async def quiet_event_cost(monitor: DeadlockMonitor, agents: int, rounds: int) -> float:
    """Median µs of handle_event for events that close no cycle."""
    samples: list[float] = []
    for r in range(rounds):
        i = (r * 7919) % agents  # spread over the agents
        me, other = agent(i), agent((i + CHAIN) % agents)  # another chain: no cycle
        events = (
            ev(LockEventType.ACQUIRED, me, f"/repo/scratch/{i}.txt"),
            ev(LockEventType.WAITING, me, lock((i + CHAIN) % agents, 3)),
            ev(LockEventType.WAIT_ENDED, me, lock((i + CHAIN) % agents, 3)),
            ev(LockEventType.RELEASED, me, f"/repo/scratch/{i}.txt"),
            ev(LockEventType.ACQUIRED, other, lock((i + CHAIN) % agents, 3)),  # duplicate
        )
        for event in events:
            start = time.perf_counter()
            found = await monitor.handle_event(event)
            samples.append(time.perf_counter() - start)
            assert found is None
    return statistics.median(samples) * 1e6


async def closing_latency(
    monitor: DeadlockMonitor, agents: int, length: int, rounds: int, seen: list[float]
) -> float | None:
    """Median µs from the closing event's handle_event call to on_deadlock."""
    heads = list(range(0, agents, CHAIN))  # chain heads: each already waits down its chain
    if len(heads) < length:
        return None
    samples: list[float] = []
    for r in range(rounds):
        offset = (r * length) % (len(heads) - length + 1)
        members = [agent(heads[offset + m]) for m in range(length)]
        targets = [lock(heads[offset + (m + 1) % length], 9) for m in range(length)]
        for who, key in zip(members[:-1], targets[:-1], strict=True):
            assert await monitor.handle_event(ev(LockEventType.WAITING, who, key)) is None
        closing = ev(LockEventType.WAITING, members[-1], targets[-1])
        seen.clear()
        start = time.perf_counter()
        found = await monitor.handle_event(closing)
        assert found is not None
        assert len(found.cycle) == length
        samples.append(seen[0] - start)
        # As the tools do: the victim's call gives way (all its waits end), the others' waits
        # end too; then the victim's chain wait is restored for the next round.
        victim_head = heads[offset + members.index(found.victim)]
        for who, key in zip(members, targets, strict=True):
            await monitor.handle_event(ev(LockEventType.WAIT_ENDED, who, key))
        chain_wait = lock(victim_head + 1, 0)
        await monitor.handle_event(ev(LockEventType.WAIT_ENDED, found.victim, chain_wait))
        assert monitor.victim_mark(found.victim) is None
        await monitor.handle_event(ev(LockEventType.WAITING, found.victim, chain_wait))
    return statistics.median(samples) * 1e6


async def full_pass_cost(monitor: DeadlockMonitor, agents: int, rounds: int) -> float:
    """Median ms of one `lockyard monitor` pass: rebuild from a snapshot, then check_all."""
    holds, waits = snapshot(agents)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        monitor.rebuild(holds, waits)
        found = await monitor.check_all()
        samples.append(time.perf_counter() - start)
        assert found == []
    return statistics.median(samples) * 1e3


async def baseline_cost(rounds: int) -> float:
    """Median µs of awaiting a coroutine that records an event in a dict."""
    table: dict[str, str] = {}

    async def noop(event: LockEvent) -> None:
        table[event.lock_path] = event.agent_id

    events = [ev(LockEventType.ACQUIRED, agent(i), lock(i, 0)) for i in range(rounds)]
    samples = []
    for event in events:
        start = time.perf_counter()
        await noop(event)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


async def measure(rounds: int) -> tuple[float, list[Row]]:
    rows = []
    baseline = await baseline_cost(rounds * 5)
    for agents in AGENT_COUNTS:
        seen: list[float] = []
        monitor = build(agents, lambda info, seen=seen: seen.append(time.perf_counter()))
        gc.collect()
        gc.disable()
        try:
            quiet = await quiet_event_cost(monitor, agents, rounds)
            closing = {
                length: await closing_latency(monitor, agents, length, rounds, seen)
                for length in CYCLE_LENGTHS
            }
            full_pass = await full_pass_cost(monitor, agents, max(3, rounds // 100))
        finally:
            gc.enable()
        rows.append(Row(agents, quiet, closing, full_pass))
    return baseline, rows


def ratio(value: float | None, reference: float | None) -> str:
    if value is None or not reference:
        return "n/a"
    return f"{value / reference:.2f}x"


def micro(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def report(baseline: float, rows: list[Row]) -> None:
    ref = next(row for row in rows if row.agents == 100)
    print(f"baseline (await a no-op coroutine): {baseline:.2f} µs")
    print(
        f"{'agents':>7} | {'quiet event µs':>14} {'vs 100':>7} {'vs base':>8} |"
        + "".join(f" {f'cycle of {k} µs':>14} {'vs 100':>7} |" for k in CYCLE_LENGTHS)
        + f" {'full pass ms':>12}"
    )
    for row in rows:
        line = (
            f"{row.agents:>7} | {row.quiet_us:>14.1f} {ratio(row.quiet_us, ref.quiet_us):>7}"
            f" {ratio(row.quiet_us, baseline):>8} |"
        )
        for k in CYCLE_LENGTHS:
            value = row.closing_us[k]
            line += f" {micro(value):>14} {ratio(value, ref.closing_us[k]):>7} |"
        print(line + f" {row.full_pass_ms:>12.2f}")
    thousand = next(row for row in rows if row.agents == 1_000)
    biggest = rows[-1]
    print()
    print(
        "targets: closing-event-to-callback median < 1000 µs at 1,000 agents: "
        + ", ".join(f"cycle of {k}: {micro(thousand.closing_us[k])} µs" for k in CYCLE_LENGTHS)
    )
    print(
        "         cost at 10,000 agents within 3x the cost at 100: "
        f"quiet {ratio(biggest.quiet_us, ref.quiet_us)}, "
        + ", ".join(
            f"cycle of {k} {ratio(biggest.closing_us[k], ref.closing_us[k])}" for k in CYCLE_LENGTHS
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    rounds = 200 if args.quick else 1_000
    # Every deadlock is logged as a warning; measure the monitor, not a terminal's speed.
    logging.getLogger("lockyard").addHandler(logging.NullHandler())
    logging.getLogger("lockyard").propagate = False
    baseline, rows = anyio.run(measure, rounds)
    report(baseline, rows)


if __name__ == "__main__":
    main()
