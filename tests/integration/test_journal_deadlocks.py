"""A deadlock broken by a monitor is journalled by its victim as it gives way: the cycle, the
victim, exactly what it released, and how long each agent of the cycle had waited; its waits
end as `victim`. On both backends."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from lockstore_support import until_waiting

from lockyard.domain.monitor import DeadlockMonitor
from lockyard.infra.lockstore import JournalQuery, LockBackend, open_journal
from lockyard.infra.tools.lock_tools import LockTools


@pytest.mark.anyio
async def test_the_victim_journals_the_deadlock_it_broke(backend_store: LockBackend) -> None:
    monitor = DeadlockMonitor()
    tools = {
        name: LockTools(backend_store, name, monitor.handle_event, victim_notices=monitor)
        for name in ("alice", "bob")
    }
    for name in tools:
        monitor.register_agent(name)
    results: dict[str, dict[str, Any]] = {}
    assert (await tools["alice"].acquire({"filepaths": ["f1"]})).data
    assert (await tools["bob"].acquire({"filepaths": ["f2"]})).data

    async def wants(name: str, path: str) -> None:
        outcome = await tools[name].acquire({"filepaths": [path], "timeout_seconds": 30})
        assert outcome.data is not None
        results[name] = dict(outcome.data)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(wants, "alice", "f2")
            await until_waiting(backend_store, "f2", "alice")
            await anyio.sleep(0.2)  # alice's wait has a measurable length
            group.start_soon(wants, "bob", "f1")
    victim = next(name for name, result in results.items() if "deadlock" in result)
    journal = open_journal(backend_store)
    try:
        deadlocks = journal.latest(JournalQuery.of(kinds=["deadlock"]))
        ended = journal.latest(JournalQuery.of(kinds=["wait-end"], agents=[victim]))
    finally:
        journal.close()
    assert len(deadlocks) == 1
    record = deadlocks[0]
    assert record.victim == record.agent == victim
    assert {(s.agent, s.held_by) for s in record.cycle} == {("alice", "bob"), ("bob", "alice")}
    assert list(record.released) == results[victim]["deadlock"]["released"]
    assert set(record.costs) == {"alice", "bob"}
    assert record.costs["alice"] >= 0.2
    assert record.namespace == backend_store.namespace
    assert record.session
    assert record.pid > 0
    if ended:  # a victim chosen as it asked never began a wait: nothing to end
        assert ended[-1].outcome == "victim"
