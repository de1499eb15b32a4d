"""LockTools on a real lock directory: acquire, wait for any, timeouts, cancellation, release."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from lockyard.core.events import LockEvent, LockEventType
from lockyard.infra.lockstore import LockStore
from lockyard.infra.tools.lock_tools import LockTools, ToolOutcome
from polling_support import wait_until_async

ACQ, WAIT, ENDED, REL = (
    LockEventType.ACQUIRED,
    LockEventType.WAITING,
    LockEventType.WAIT_ENDED,
    LockEventType.RELEASED,
)


class Events:
    """Records every event, per agent, in order."""

    def __init__(self) -> None:
        self.all: list[LockEvent] = []

    async def __call__(self, event: LockEvent) -> None:
        self.all.append(event)

    def of(self, agent: str) -> list[tuple[LockEventType, str]]:
        return [(e.event_type, Path(e.lock_path).name) for e in self.all if e.agent_id == agent]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    for name in ("a.py", "b.py", "c.py", "d.py"):
        (root / "src" / name).write_text("x = 1\n")
    return root


@pytest.fixture
def store(repo: Path, tmp_path: Path) -> LockStore:
    return LockStore(repo, tmp_path / "locks")


@pytest.fixture
def events() -> Events:
    return Events()


def tools_for(store: LockStore, agent: str, events: Events) -> LockTools:
    return LockTools(store, agent, emit_lock_event=events)


def data(outcome: ToolOutcome) -> dict[str, Any]:
    assert not outcome.is_error, outcome.text
    parsed = json.loads(outcome.text)
    assert parsed == outcome.data
    return parsed  # type: ignore[no-any-return]


def states(outcome: ToolOutcome) -> dict[str, tuple[bool, str | None]]:
    return {
        Path(item["filepath"]).name: (item["acquired"], item["holder"])
        for item in data(outcome)["results"]
    }


def key(store: LockStore, name: str) -> str:
    return store.canonicalize(f"src/{name}")


@pytest.mark.anyio
async def test_free_files_are_locked_deduplicated_in_canonical_order(
    store: LockStore, events: Events, repo: Path
) -> None:
    a1 = tools_for(store, "a1", events)
    outcome = await a1.acquire(
        {"filepaths": ["src/b.py", str(repo / "src" / "a.py"), "./src/../src/b.py"]}
    )
    result = data(outcome)
    assert result == {
        "results": [
            {"filepath": key(store, "a.py"), "acquired": True, "holder": "a1"},
            {"filepath": key(store, "b.py"), "acquired": True, "holder": "a1"},
        ],
        "all_acquired": True,
    }
    assert events.of("a1") == [(ACQ, "a.py"), (ACQ, "b.py")]
    assert store.holder("src/a.py") == store.holder("src/b.py") == "a1"
    assert outcome.to_sdk_result() == {"content": [{"type": "text", "text": outcome.text}]}


@pytest.mark.anyio
async def test_timeout_zero_never_blocks_and_keeps_what_it_got(
    store: LockStore, events: Events
) -> None:
    assert store.try_lock("src/b.py", "a2")
    a1 = tools_for(store, "a1", events)
    with anyio.fail_after(5):
        outcome = await a1.acquire({"filepaths": ["src/a.py", "src/b.py"], "timeout_seconds": 0})
    assert states(outcome) == {"a.py": (True, "a1"), "b.py": (False, "a2")}
    assert data(outcome)["all_acquired"] is False
    assert events.of("a1") == [(ACQ, "a.py")]  # no WAITING for a call that does not wait
    assert store.holder("src/a.py") == "a1"


@pytest.mark.anyio
async def test_a_held_file_is_reacquired_without_waiting(store: LockStore, events: Events) -> None:
    a1 = tools_for(store, "a1", events)
    await a1.acquire({"filepaths": ["src/a.py"]})
    again = await a1.acquire({"filepaths": ["src/a.py"], "timeout_seconds": 5})
    assert states(again) == {"a.py": (True, "a1")}


@pytest.mark.anyio
async def test_waits_until_any_blocked_file_is_granted_then_returns(
    store: LockStore, events: Events
) -> None:
    assert store.try_lock("src/b.py", "a2")
    assert store.try_lock("src/c.py", "a2")
    a1 = tools_for(store, "a1", events)
    result: dict[str, ToolOutcome] = {}

    async def call() -> None:
        result["a1"] = await a1.acquire(
            {"filepaths": ["src/a.py", "src/b.py", "src/c.py"], "timeout_seconds": 30}
        )

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await wait_until_async(
                lambda: bool(store.waiters("src/b.py") and store.waiters("src/c.py"))
            )
            assert store.release("src/c.py", "a2")
    assert states(result["a1"]) == {
        "a.py": (True, "a1"),
        "b.py": (False, "a2"),
        "c.py": (True, "a1"),
    }
    assert events.of("a1") == [
        (ACQ, "a.py"),
        (WAIT, "b.py"),
        (WAIT, "c.py"),
        (ACQ, "c.py"),
        (ENDED, "b.py"),
    ]
    # The cancelled wait on b.py left no queue entry and took nothing.
    assert store.waiters("src/b.py") == []
    assert store.holder("src/b.py") == "a2"


@pytest.mark.anyio
async def test_a_timeout_ends_every_wait_and_keeps_what_was_acquired(
    store: LockStore, events: Events
) -> None:
    assert store.try_lock("src/b.py", "a2")
    a1 = tools_for(store, "a1", events)
    with anyio.fail_after(10):
        outcome = await a1.acquire({"filepaths": ["src/a.py", "src/b.py"], "timeout_seconds": 0.2})
    assert states(outcome) == {"a.py": (True, "a1"), "b.py": (False, "a2")}
    assert events.of("a1") == [(ACQ, "a.py"), (WAIT, "b.py"), (ENDED, "b.py")]
    assert store.holder("src/a.py") == "a1"
    assert store.waiters("src/b.py") == []


@pytest.mark.anyio
async def test_a_holder_that_frees_up_is_reported_as_free(store: LockStore, events: Events) -> None:
    """After the first grant the call returns; a blocked file freed meanwhile shows no holder."""
    assert store.try_lock("src/b.py", "a2")
    assert store.try_lock("src/c.py", "a3")
    a1 = tools_for(store, "a1", events)

    async def free_both() -> None:
        await wait_until_async(lambda: store.waiters("src/b.py"))
        store.release("src/c.py", "a3")
        store.release("src/b.py", "a2")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(free_both)
            outcome = await a1.acquire({"filepaths": ["src/b.py", "src/c.py"]})
    result = states(outcome)
    assert sorted(acquired for acquired, _ in result.values()) in ([False, True], [True, True])
    for acquired, holder in result.values():
        assert holder == ("a1" if acquired else None)


@pytest.mark.anyio
async def test_cancellation_mid_wait_leaves_no_wait_edge_and_no_lock_from_the_call(
    store: LockStore, events: Events
) -> None:
    """The CLI's tool timeout cancels the handler: the agent never sees this call's result."""
    a1 = tools_for(store, "a1", events)
    await a1.acquire({"filepaths": ["src/d.py"]})  # held before: must survive
    assert store.try_lock("src/b.py", "a2")
    with anyio.fail_after(10):
        with anyio.move_on_after(0.3) as scope:
            await a1.acquire(
                {"filepaths": ["src/a.py", "src/b.py", "src/d.py"], "timeout_seconds": 60}
            )
    assert scope.cancelled_caught
    assert events.of("a1") == [
        (ACQ, "d.py"),
        (ACQ, "a.py"),
        (ACQ, "d.py"),
        (WAIT, "b.py"),
        (ENDED, "b.py"),
        (REL, "a.py"),
    ]
    assert store.holder("src/a.py") is None  # taken by the cancelled call: given back
    assert store.holder("src/d.py") == "a1"  # held before the call: kept
    assert store.holder("src/b.py") == "a2"
    assert store.waiters("src/b.py") == []


@pytest.mark.anyio
async def test_a_grant_that_races_the_cancellation_is_given_back(
    store: LockStore, events: Events
) -> None:
    """Cancelled right as the wait is granted: the grant is released and the monitor told."""
    assert store.try_lock("src/b.py", "a2")
    scope = anyio.CancelScope()

    async def cancel_on_grant(event: LockEvent) -> None:
        await events(event)
        if event.event_type is ACQ and event.lock_path.endswith("b.py"):
            scope.cancel()  # lands at the call's next checkpoint, after the grant

    a1 = LockTools(store, "a1", emit_lock_event=cancel_on_grant)

    async def release_soon() -> None:
        await wait_until_async(lambda: store.waiters("src/b.py"))
        store.release("src/b.py", "a2")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(release_soon)
            with scope:
                await a1.acquire({"filepaths": ["src/b.py"], "timeout_seconds": 30})
    assert scope.cancelled_caught
    assert events.of("a1") == [(WAIT, "b.py"), (ACQ, "b.py"), (REL, "b.py")]
    assert store.holder("src/b.py") is None


@pytest.mark.anyio
async def test_release_by_files_all_and_idempotent(store: LockStore, events: Events) -> None:
    a1 = tools_for(store, "a1", events)
    await a1.acquire({"filepaths": ["src/a.py", "src/b.py", "src/c.py"]})
    assert store.try_lock("src/d.py", "a2")

    one = data(await a1.release({"filepaths": ["src/a.py", "src/./a.py", "src/d.py"]}))
    assert one == {"released": [key(store, "a.py")], "count": 1}
    assert store.holder("src/d.py") == "a2"  # someone else's lock is never touched

    again = data(await a1.release({"filepaths": ["src/a.py"]}))
    assert again == {"released": [], "count": 0}

    everything = data(await a1.release({"all": True}))
    assert everything == {"released": [key(store, "b.py"), key(store, "c.py")], "count": 2}
    assert data(await a1.release({"all": True})) == {"released": [], "count": 0}
    assert [pair for pair in events.of("a1") if pair[0] is REL] == [
        (REL, "a.py"),
        (REL, "b.py"),
        (REL, "c.py"),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "arguments",
    [
        {"filepaths": ["src/a.py", "/etc/passwd"]},
        {"filepaths": ["src/a.py", "../outside.py"]},
        {"filepaths": ["src/a.py"], "timeout_seconds": 99999},
        {"filepaths": ["src/a.py"], "colour": "blue"},
        {"filepaths": []},
        {},
    ],
)
async def test_a_bad_acquire_changes_nothing(
    store: LockStore, events: Events, arguments: dict[str, Any]
) -> None:
    a1 = tools_for(store, "a1", events)
    outcome = await a1.acquire(arguments)
    assert outcome.is_error
    assert outcome.to_sdk_result()["is_error"] is True
    assert "Nothing was locked" in outcome.text
    assert store.holder("src/a.py") is None
    assert events.all == []


@pytest.mark.anyio
async def test_a_path_outside_the_repo_is_named_in_the_error(store: LockStore) -> None:
    outcome = await LockTools(store, "a1").acquire({"filepaths": ["/etc/passwd"]})
    assert outcome.is_error
    assert "'/etc/passwd'" in outcome.text
    assert "inside the repository" in outcome.text


@pytest.mark.anyio
@pytest.mark.parametrize(
    "arguments",
    [{"filepaths": ["src/a.py", "/etc/passwd"]}, {"all": True, "filepaths": ["src/a.py"]}, {}],
)
async def test_a_bad_release_changes_nothing(
    store: LockStore, events: Events, arguments: dict[str, Any]
) -> None:
    a1 = tools_for(store, "a1", events)
    await a1.acquire({"filepaths": ["src/a.py"]})
    outcome = await a1.release(arguments)
    assert outcome.is_error
    assert "Nothing was released" in outcome.text
    assert store.holder("src/a.py") == "a1"


@pytest.mark.anyio
async def test_literal_keys_lock_things_that_are_not_files(store: LockStore) -> None:
    outcome = await LockTools(store, "a1").acquire({"filepaths": ["__schema__"]})
    assert states(outcome) == {"__schema__": (True, "a1")}


@pytest.mark.anyio
async def test_dispatch_by_tool_name(store: LockStore) -> None:
    tools = LockTools(store, "a1")
    assert not (await tools.call("lock_acquire", {"filepaths": ["src/a.py"]})).is_error
    released = await tools.call("lock_release", {"all": True})
    assert json.loads(released.text)["count"] == 1
    unknown = await tools.call("lock_everything", {})
    assert unknown.is_error
    assert "lock_acquire, lock_release" in unknown.text


@pytest.mark.anyio
async def test_a_failing_monitor_is_logged_and_the_lock_still_works(
    store: LockStore, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(event: LockEvent) -> None:
        raise RuntimeError("monitor down")

    tools = LockTools(store, "a1", emit_lock_event=broken)
    with caplog.at_level(logging.ERROR):
        outcome = await tools.acquire({"filepaths": ["src/a.py"]})
    assert states(outcome) == {"a.py": (True, "a1")}
    assert "emit_lock_event failed" in caplog.text


@pytest.mark.anyio
async def test_a_store_failure_mid_call_gives_back_the_calls_locks(
    store: LockStore, events: Events, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lockyard.infra.lockstore import LockDirError

    assert store.try_lock("src/b.py", "a2")

    async def broken_wait(*args: Any, **kwargs: Any) -> bool:
        raise LockDirError("the lock directory vanished")

    monkeypatch.setattr(store, "acquire_async", broken_wait)
    outcome = await tools_for(store, "a1", events).acquire(
        {"filepaths": ["src/a.py", "src/b.py"], "timeout_seconds": 5}
    )
    assert outcome.is_error
    assert "the lock directory vanished" in outcome.text
    assert store.holder("src/a.py") is None
    assert events.of("a1") == [(ACQ, "a.py"), (WAIT, "b.py"), (ENDED, "b.py"), (REL, "a.py")]


def test_agent_id_must_be_given(store: LockStore) -> None:
    with pytest.raises(ValueError, match="agent_id"):
        LockTools(store, " ")


@pytest.mark.anyio
async def test_a_store_failure_mid_release_reports_what_was_released(
    store: LockStore, events: Events, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lockyard.infra.lockstore import CorruptRecordError

    a1 = tools_for(store, "a1", events)
    await a1.acquire({"filepaths": ["src/a.py", "src/b.py"]})
    real_release = store.release

    def release_then_fail(filepath: str, agent_id: str) -> bool:
        if filepath.endswith("b.py"):
            raise CorruptRecordError("unreadable holder record")
        return real_release(filepath, agent_id)

    monkeypatch.setattr(store, "release", release_then_fail)
    outcome = await a1.release({"filepaths": ["src/a.py", "src/b.py"]})
    assert outcome.is_error
    assert "unreadable holder record" in outcome.text
    assert json.dumps([key(store, "a.py")]) in outcome.text
    assert events.of("a1")[-1] == (REL, "a.py")
    assert store.holder("src/a.py") is None


@pytest.mark.anyio
async def test_an_unexpected_failure_is_an_error_result(
    store: LockStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(agent_id: str) -> list[str]:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(store, "cleanup_agent_locks", broken)
    with caplog.at_level(logging.ERROR):
        outcome = await LockTools(store, "a1").call("lock_release", {"all": True})
    assert outcome.is_error
    assert outcome.text.startswith("lock_release failed: disk on fire.")
    assert "lock_release failed for agent a1" in caplog.text


@pytest.mark.anyio
async def test_broken_victim_notices_do_not_break_the_wait(
    store: LockStore, events: Events, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        async def wait_for_victim(self, agent_id: str) -> Any:
            raise OSError("notices directory unreadable")

    assert store.try_lock("src/b.py", "a2")
    a1 = LockTools(store, "a1", emit_lock_event=events, victim_notices=Broken())

    async def release_soon() -> None:
        await wait_until_async(lambda: store.waiters("src/b.py"))
        store.release("src/b.py", "a2")

    with caplog.at_level(logging.ERROR), anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(release_soon)
            outcome = await a1.acquire({"filepaths": ["src/b.py"], "timeout_seconds": 30})
    assert states(outcome) == {"b.py": (True, "a1")}
    assert "victim notices failed" in caplog.text


@pytest.mark.anyio
async def test_an_unreadable_holder_while_reporting_gives_back_the_calls_locks(
    store: LockStore, events: Events, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The result could not be built: the agent never learns of the locks, so they go back."""
    from lockyard.infra.lockstore import LockDirError

    assert store.try_lock("src/b.py", "a2")
    a1 = tools_for(store, "a1", events)
    real_holder = store.holder
    calls = {"n": 0}

    def holder_failing_late(filepath: str) -> str | None:
        calls["n"] += 1
        if calls["n"] > 2:  # the two reads before try_lock pass; the report's read fails
            raise LockDirError("half-written record")
        return real_holder(filepath)

    monkeypatch.setattr(store, "holder", holder_failing_late)
    outcome = await a1.acquire({"filepaths": ["src/a.py", "src/b.py"], "timeout_seconds": 0})
    assert outcome.is_error
    assert "half-written record" in outcome.text
    monkeypatch.setattr(store, "holder", real_holder)
    assert store.holder("src/a.py") is None
    assert events.of("a1") == [(ACQ, "a.py"), (REL, "a.py")]


@pytest.mark.anyio
async def test_giving_back_continues_past_a_failing_release(
    store: LockStore,
    events: Events,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert store.try_lock("src/c.py", "a2")
    a1 = tools_for(store, "a1", events)
    real_release = store.release

    def release_a_fails(filepath: str, agent_id: str) -> bool:
        if filepath.endswith("a.py"):
            raise OSError("EIO")
        return real_release(filepath, agent_id)

    monkeypatch.setattr(store, "release", release_a_fails)
    with caplog.at_level(logging.ERROR), anyio.move_on_after(0.2):
        await a1.acquire({"filepaths": ["src/a.py", "src/b.py", "src/c.py"], "timeout_seconds": 30})
    assert store.holder("src/b.py") is None  # given back despite a.py's failure
    assert "could not give back" in caplog.text
    assert (REL, "b.py") in events.of("a1")
