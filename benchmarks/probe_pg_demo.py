"""Why `lockyard demo --backend postgres` showed slow and out-of-order hand-offs: one run of
the demo's scenario on a throwaway PostgreSQL server, with every store call, queue ticket and
event timed.

    python3 scripts/uv run python benchmarks/probe_pg_demo.py [--runs 3] [--seed 1] [--agents 8]

Per run it prints:
- the hand-off latency as the demo's recorder measures it (from the RELEASED event to the
  ACQUIRED event), next to the same hand-offs measured from the moment the holder's release
  call started (what an agent sees);
- how many ACQUIRED events arrived before the RELEASED event of the hand-off that caused them
  (the recorder then measures from an earlier release of the file);
- how long store calls waited for the store's one session (its guard) before their round trip;
- for every hand-off, whether the new holder had the lowest queue ticket (the server's order)
  and whether it was the first to emit WAITING (the order the demo checks).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

import anyio

from lockyard.cli.demo.agent import Pacing
from lockyard.cli.demo.backend import demo_backend
from lockyard.cli.demo.recorder import SessionRecorder
from lockyard.cli.demo.runner import DemoSession, open_workspace
from lockyard.cli.demo.scenario import build_scenario
from lockyard.core.events import LockEvent, LockEventType
from lockyard.infra.lockstore.postgres import store as pg_store
from lockyard.infra.lockstore.postgres.session import Session


class Probe:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.release_started: dict[str, float] = {}
        self.tickets: dict[tuple[str, str], int] = {}  # (key, agent) -> ticket
        self.guard_waits: list[float] = []
        self.round_trips: list[float] = []
        self.from_release_call: list[float] = []
        self.acquired_before_released = 0
        self.server_order = 0
        self.server_checked = 0

    def install(self) -> None:
        probe = self
        original_release = pg_store.PgLockStore.release
        original_enqueue = pg_store._Wait.enqueue
        original_run = Session.run

        def release(store: Any, filepath: str, agent_id: str) -> bool:
            key = store.canonicalize(filepath)
            with probe.lock:
                probe.release_started[key] = time.perf_counter()
            return bool(original_release(store, filepath, agent_id))

        def enqueue(wait: Any) -> bool:
            taken = bool(original_enqueue(wait))
            if not taken:
                with probe.lock:
                    probe.tickets[(wait.key, wait.agent)] = wait.ticket
            return taken

        def run(session: Any, operation: Any) -> Any:
            asked = time.perf_counter()
            with session._guard:
                got = time.perf_counter()
                try:
                    return original_run(session, operation)
                finally:
                    with probe.lock:
                        probe.guard_waits.append(got - asked)
                        probe.round_trips.append(time.perf_counter() - got)

        pg_store.PgLockStore.release = release  # type: ignore[method-assign]
        pg_store._Wait.enqueue = enqueue  # type: ignore[method-assign]
        Session.run = run  # type: ignore[method-assign]


class ProbingRecorder(SessionRecorder):
    probe: Probe

    def on_event(self, event: LockEvent) -> None:
        key, agent = event.lock_path, event.agent_id
        if event.event_type is LockEventType.ACQUIRED and key in self.waits[agent]:
            holder = self.holds.get(key)
            if holder is not None and holder != agent:
                self.probe.acquired_before_released += 1
            started = self.probe.release_started.get(key)
            if started is not None:
                self.probe.from_release_call.append(time.perf_counter() - started)
            queued = [
                (self.probe.tickets[(key, other)], other)
                for other in self._queues[key]
                if (key, other) in self.probe.tickets
            ]
            if queued and (key, agent) in self.probe.tickets:
                self.probe.server_checked += 1
                if min(queued)[1] == agent:
                    self.probe.server_order += 1
                else:
                    print(f"  not the lowest ticket: {agent} got {key}; queue {sorted(queued)}")
            self.probe.tickets.pop((key, agent), None)
        elif event.event_type is LockEventType.WAIT_ENDED:
            self.probe.tickets.pop((key, agent), None)
        super().on_event(event)


def ms(values: list[float], fraction: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[max(0, round(fraction * len(ordered)) - 1)] * 1000:.2f} ms"


PROBE = Probe()


def one_run(spec: str, seed: int, agents: int, files: int) -> None:
    probe = PROBE
    probe.reset()
    scenario = build_scenario(agents, files, seed)
    with open_workspace(None) as workspace:
        session = DemoSession(scenario, workspace, Pacing(), spec)
        recorder = ProbingRecorder()
        recorder.probe = probe
        for script in scenario.agents:
            recorder.add_agent(script.agent_id, 0)
        session.recorder = recorder
        try:
            report = anyio.run(session.run)
        finally:
            session.store.close()
    print(f"seed {seed}: {report.handoffs} hand-offs, {report.handoffs_in_order} in WAITING order")
    print(
        f"  recorder (RELEASED -> ACQUIRED): median {ms(recorder.handoffs, 0.5)}, "
        f"p99 {ms(recorder.handoffs, 0.99)}"
    )
    print(
        f"  from the release call's start:   median {ms(probe.from_release_call, 0.5)}, "
        f"p99 {ms(probe.from_release_call, 0.99)}"
    )
    print(f"  ACQUIRED before the hand-off's RELEASED: {probe.acquired_before_released}")
    print(
        f"  store calls: {len(probe.round_trips)}, waiting for the session: median "
        f"{ms(probe.guard_waits, 0.5)}, p99 {ms(probe.guard_waits, 0.99)}, max "
        f"{ms(probe.guard_waits, 1.0)}; the call itself: median {ms(probe.round_trips, 0.5)}"
    )
    print(
        f"  hand-offs to the lowest live ticket (server FIFO): "
        f"{probe.server_order}/{probe.server_checked}"
    )
    if probe.guard_waits:
        print(f"  mean session wait {statistics.mean(probe.guard_waits) * 1000:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--files", type=int, default=12)
    args = parser.parse_args()
    PROBE.install()
    with demo_backend("postgres") as spec:
        assert spec is not None
        for run in range(args.runs):
            one_run(spec, args.seed + run, args.agents, args.files)


if __name__ == "__main__":
    main()
