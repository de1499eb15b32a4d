"""scripts/trace_lock_path.py keeps measuring what docs/ARCHITECTURE.md says it does: a real
`lock_acquire` that queues behind another process's lock, sleeps, wakes and takes it. Only the
shape is asserted (which parts the call passes through), never a count."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="module")
def trace() -> Iterator[ModuleType]:
    sys.path.insert(0, str(SCRIPTS))
    try:
        import trace_lock_path

        yield trace_lock_path
    finally:
        sys.path.remove(str(SCRIPTS))


def test_a_waiting_acquire_is_traced_from_the_tool_through_the_queue_to_the_wake_up(
    trace: ModuleType,
) -> None:
    recording = trace.Recording()
    trace.traced_run(recording)  # asserts the holder released and the tool got the lock
    assert not recording.active
    modules = set(recording.modules)
    assert {
        "lockyard.infra.tools.mcp_server",
        "lockyard.infra.tools.lock_tools",
        "lockyard.infra.lockstore.lockdir.store",
        "lockyard.infra.lockstore.lockdir.operations",
        "lockyard.infra.lockstore.lockdir.line",
        "lockyard.infra.lockstore.lockdir.sleep",
        "lockyard.infra.lockstore.wakeup",
        "lockyard.core.events",
    } <= modules
    assert all(name.startswith("lockyard.") for name in modules)
    assert recording.crossings
    assert all(caller != callee for caller, callee in recording.crossings)
    assert sum(recording.crossings.values()) == sum(recording.edges.values())


def test_a_coroutine_resuming_after_an_await_is_not_a_new_call(trace: ModuleType) -> None:
    import anyio

    inner: dict[str, object] = {"__name__": "lockyard.fake_inner", "anyio": anyio}
    exec(
        "async def wait_twice():\n    await anyio.sleep(0)\n    await anyio.sleep(0)\n",
        inner,
    )
    outer: dict[str, object] = {"__name__": "lockyard.fake_outer", "inner": inner["wait_twice"]}
    exec("async def call_once():\n    await inner()\n", outer)

    recording = trace.Recording(active=True)
    profiler = trace.make_profiler(recording)
    sys.setprofile(profiler)
    try:
        anyio.run(outer["call_once"])  # type: ignore[arg-type]
    finally:
        sys.setprofile(None)
    assert recording.crossings == {("lockyard.fake_outer", "lockyard.fake_inner"): 1}
