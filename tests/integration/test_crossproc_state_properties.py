"""Property: what the cross-process monitor reads from a lock directory is exactly the holds
and waits that were made through the real store, and the verdict equals the in-process one."""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockyard.core.events import LockEvent, LockEventType
from lockyard.domain.monitor import DeadlockMonitor
from lockyard.infra.crossproc.monitor_loop import CrossProcessMonitor
from lockyard.infra.crossproc.state import WaitForReader, node_key
from lockyard.infra.lockstore.lockdir.store import LockStore
from polling_support import wait_until_async

AGENTS = ("a", "b", "c", "d")
FILES = ("f1", "f2", "f3", "f4", "f5")

# A scenario: who holds each file (or nobody), then which agents wait on which held files.
scenarios = st.tuples(
    st.dictionaries(st.sampled_from(FILES), st.sampled_from(AGENTS), max_size=len(FILES)),
    st.sets(st.tuples(st.sampled_from(AGENTS), st.sampled_from(FILES)), max_size=8),
)


async def check(holds: dict[str, str], wanted: set[tuple[str, str]]) -> None:
    waits = sorted((a, f) for a, f in wanted if f in holds and holds[f] != a)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        store = LockStore(str(repo), Path(tmp) / "locks")
        in_process = DeadlockMonitor()
        events: list[LockEvent] = []
        for name, agent in holds.items():  # grant order = age order for both monitors
            if agent not in {e.agent_id for e in events}:
                in_process.register_agent(agent)
            assert store.try_lock(name, agent)
            key = store.canonicalize(name)
            events.append(LockEvent(event_type=LockEventType.ACQUIRED, agent_id=agent,
                                    lock_path=key))  # fmt: skip
            await anyio.sleep(0.002)  # distinct grant times
        events += [
            LockEvent(event_type=LockEventType.WAITING, agent_id=a, lock_path=store.canonicalize(f))
            for a, f in waits
        ]
        async with anyio.create_task_group() as group:
            for agent, name in waits:
                group.start_soon(store.acquire_async, name, agent, 60)
            await wait_until_async(
                lambda: len(store.snapshot().waits) >= len(waits), "every waiter queued"
            )
            snapshot = WaitForReader(store).read()
            report = await CrossProcessMonitor(Path(tmp) / "locks", resolve=False).check_once()
            group.cancel_scope.cancel()
        store.close()

        ns = store.namespace
        assert snapshot.holders() == {
            node_key(ns, store.canonicalize(f)): a for f, a in holds.items()
        }
        assert sorted(snapshot.wait_pairs()) == sorted(
            (a, node_key(ns, store.canonicalize(f))) for a, f in waits
        )
        first_grant = {a: i for i, a in reversed(list(enumerate(holds.values())))}
        starts = snapshot.agent_start_times()
        assert sorted(starts, key=starts.__getitem__) == sorted(first_grant, key=first_grant.get)

        reported = [await in_process.handle_event(event) for event in events]
        mine = sorted(r.deadlock.victim for r in report.resolutions)
        theirs = sorted(info.victim for info in reported if info is not None)
        assert bool(mine) == bool(theirs)  # a deadlock is seen by both or by neither
        if len(theirs) == 1 and len(mine) == 1:
            assert mine == theirs  # one cycle: the same victim


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios)
def test_the_lock_dir_reads_back_what_the_store_did_and_both_monitors_agree(
    scenario: tuple[dict[str, str], set[tuple[str, str]]],
) -> None:
    holds, wanted = scenario
    anyio.run(check, holds, wanted)
