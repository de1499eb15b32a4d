"""lock_acquire next to a lock whose holder record cannot be read (a real corrupt record).

Such a lock is never granted nor broken by the store; the tools show it as held by a fixed
text that tells the agent what to do, lock the call's other files as usual, and keep the
store's parser dump out of the result.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from lockyard.core.events import LockEvent, LockEventType
from lockyard.infra.lockstore import CorruptRecordError, LockStore
from lockyard.infra.lockstore.paths import lock_name
from lockyard.infra.tools.lock_tools import UNREADABLE_HOLDER, LockTools, ToolOutcome
from polling_support import wait_until_async

pytestmark = pytest.mark.anyio

ACQ, WAIT, ENDED = LockEventType.ACQUIRED, LockEventType.WAITING, LockEventType.WAIT_ENDED


@pytest.fixture
def store(tmp_path: Path) -> LockStore:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    return LockStore(repo, tmp_path / "locks")


def corrupt(store: LockStore, path: str) -> None:
    """Lock `path` for someone, then overwrite its holder record with garbage."""
    assert store.try_lock(path, "someone")
    lock = store.lock_dir / f"{lock_name(store.namespace, store.canonicalize(path))}.lock"
    [record] = list(lock.iterdir())
    record.unlink()
    os.symlink("garbage{", record)
    with pytest.raises(CorruptRecordError):
        store.holder(path)


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[LockEventType, str]] = []

    async def __call__(self, event: LockEvent) -> None:
        self.seen.append((event.event_type, Path(event.lock_path).name))


def states(outcome: ToolOutcome) -> dict[str, tuple[bool, str | None]]:
    assert not outcome.is_error, outcome.text
    for leak in ("validation error", "pydantic", "HolderRecord"):
        assert leak not in outcome.text
    data: dict[str, Any] = json.loads(outcome.text)
    return {Path(r["filepath"]).name: (r["acquired"], r["holder"]) for r in data["results"]}


async def test_the_free_files_are_locked_and_the_unreadable_one_is_named(
    store: LockStore, caplog: pytest.LogCaptureFixture
) -> None:
    corrupt(store, "src/a.py")
    events = Events()
    bob = LockTools(store, "bob", emit_lock_event=events)
    with caplog.at_level(logging.WARNING):
        outcome = await bob.call(
            "lock_acquire", {"filepaths": ["src/a.py", "src/b.py"], "timeout_seconds": 0}
        )
    # The operator's log has the details, once per call.
    [logged] = [r.getMessage() for r in caplog.records if "lock record" in r.getMessage()]
    assert "unreadable holder record" in logged
    assert states(outcome) == {"a.py": (False, UNREADABLE_HOLDER), "b.py": (True, "bob")}
    assert json.loads(outcome.text)["all_acquired"] is False
    assert store.holder("src/b.py") == "bob"
    assert events.seen == [(ACQ, "b.py")]
    assert "lockyard status" in UNREADABLE_HOLDER


async def test_an_unreadable_lock_is_not_waited_for(store: LockStore) -> None:
    """Nothing repairs it, so a wait could only end by timeout: the call answers at once."""
    corrupt(store, "src/a.py")
    events = Events()
    bob = LockTools(store, "bob", emit_lock_event=events)
    with anyio.fail_after(10):  # not the 600 s timeout
        outcome = await bob.call(
            "lock_acquire", {"filepaths": ["src/a.py"], "timeout_seconds": 600}
        )
    assert states(outcome) == {"a.py": (False, UNREADABLE_HOLDER)}
    assert events.seen == []  # no wait edge on it
    assert store.waiters("src/a.py") == []


async def test_a_wait_beside_an_unreadable_lock_is_granted_the_other_file(
    store: LockStore,
) -> None:
    corrupt(store, "src/a.py")
    assert store.try_lock("src/c.py", "carol")
    events = Events()
    bob = LockTools(store, "bob", emit_lock_event=events)

    async def carol_releases() -> None:
        await wait_until_async(lambda: store.waiters("src/c.py"), "bob queued for src/c.py")
        store.release("src/c.py", "carol")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(carol_releases)
            outcome = await bob.call(
                "lock_acquire", {"filepaths": ["src/a.py", "src/c.py"], "timeout_seconds": 30}
            )
    assert states(outcome) == {"a.py": (False, UNREADABLE_HOLDER), "c.py": (True, "bob")}
    assert events.seen == [(WAIT, "c.py"), (ACQ, "c.py")]
    assert store.waiters("src/a.py") == []


def corrupting_wait(store: LockStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """a.py's record turns unreadable while bob waits for it, and the store's wait raises
    (it does not today; the tools must cope if a store does)."""
    real_wait = store.acquire_async

    async def wait(filepath: str, agent_id: str, *args: Any, **options: Any) -> bool:
        if filepath.endswith("a.py"):
            monkeypatch.setattr(store, "acquire_async", real_wait)
            store.release(filepath, "someone")
            corrupt(store, filepath)
            raise CorruptRecordError("unreadable holder record: 1 validation error for ...")
        return await real_wait(filepath, agent_id, *args, **options)

    monkeypatch.setattr(store, "acquire_async", wait)


async def test_a_wait_that_fails_on_an_unreadable_record_ends_alone(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.try_lock("src/a.py", "someone")
    assert store.try_lock("src/c.py", "carol")
    events = Events()
    bob = LockTools(store, "bob", emit_lock_event=events)
    corrupting_wait(store, monkeypatch)

    async def carol_releases() -> None:
        await wait_until_async(
            lambda: (ENDED, "a.py") in events.seen and store.waiters("src/c.py"),
            "bob's wait on a.py ended and bob queued for src/c.py",
        )
        store.release("src/c.py", "carol")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(carol_releases)
            outcome = await bob.call(
                "lock_acquire", {"filepaths": ["src/a.py", "src/c.py"], "timeout_seconds": 30}
            )
    assert states(outcome) == {"a.py": (False, UNREADABLE_HOLDER), "c.py": (True, "bob")}
    assert events.seen == [(WAIT, "a.py"), (WAIT, "c.py"), (ENDED, "a.py"), (ACQ, "c.py")]


async def test_when_every_wait_fails_on_unreadable_records_the_call_returns_at_once(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.try_lock("src/a.py", "someone")
    events = Events()
    bob = LockTools(store, "bob", emit_lock_event=events)
    corrupting_wait(store, monkeypatch)
    with anyio.fail_after(10):  # not the 600 s timeout
        outcome = await bob.call(
            "lock_acquire", {"filepaths": ["src/a.py"], "timeout_seconds": 600}
        )
    assert states(outcome) == {"a.py": (False, UNREADABLE_HOLDER)}
    assert events.seen == [(WAIT, "a.py"), (ENDED, "a.py")]
