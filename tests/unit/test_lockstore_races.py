"""Release, cleanup and stale-lock breaking racing each other, forced deterministically:
no interleaving removes another agent's fresh lock.

Each test pauses one operation at its most dangerous point (after it decided what to
remove, before it removes it), runs the competing operations to completion there, then
lets it continue. `other` plays a second process sharing the lock directory.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from lock_dir_listing import lock_dir_entries
from lockyard.infra.lockstore import LockStore, Reclamation
from lockyard.infra.lockstore.liveness import current_process
from lockyard.infra.lockstore.paths import lock_name


@pytest.fixture
def other(repo: Path, tmp_path: Path) -> LockStore:
    return LockStore(repo, tmp_path / "locks")


def race_before_removal(
    monkeypatch: pytest.MonkeyPatch, store: LockStore, interleave: Callable[[], None]
) -> None:
    """Run `interleave` once, when `store` is about to remove a grant by token."""
    original = store.operations.drop_grant
    pending = [interleave]

    def drop_grant(name: str, token: str) -> bool:
        if pending:
            pending.pop()()
        return original(name, token)

    monkeypatch.setattr(store.operations, "drop_grant", drop_grant)


@pytest.mark.parametrize("releaser_knows_its_grant", [True, False])
def test_release_races_a_cleanup_and_cannot_delete_a_third_agents_fresh_lock(
    monkeypatch: pytest.MonkeyPatch,
    store: LockStore,
    other: LockStore,
    repo: Path,
    tmp_path: Path,
    releaser_knows_its_grant: bool,
) -> None:
    assert store.try_lock("f.py", "alice")
    releaser = store if releaser_knows_its_grant else LockStore(repo, tmp_path / "locks")

    def cleanup_then_carol_acquires() -> None:
        assert other.cleanup_agent_locks("alice") == ["f.py"]
        assert other.try_lock("f.py", "carol")

    race_before_removal(monkeypatch, releaser, cleanup_then_carol_acquires)
    assert releaser.release("f.py", "alice") is False
    assert other.holder("f.py") == "carol"
    assert not store.try_lock("f.py", "dave")


def test_two_concurrent_releases_by_the_holder_remove_only_its_own_lock(
    monkeypatch: pytest.MonkeyPatch, store: LockStore, other: LockStore
) -> None:
    assert store.try_lock("f.py", "alice")

    def second_release_then_carol_acquires() -> None:
        assert other.release("f.py", "alice") is True
        assert other.try_lock("f.py", "carol")

    race_before_removal(monkeypatch, store, second_release_then_carol_acquires)
    assert store.release("f.py", "alice") is False
    assert other.holder("f.py") == "carol"


def _plant_dead_holder(store: LockStore, filepath: str, agent: str) -> None:
    key = store.canonicalize(filepath)
    me = current_process()
    record = {
        "agent_id": agent,
        "token": "deadbeef",
        "pid": 1,
        "start_time": -1,  # pid 1 started at another time: provably not this holder
        "host": me.host,
        "boot_id": me.boot_id,
        "pid_ns": me.pid_ns,
        "lock_path": key,
        "namespace": store.namespace,
        "acquired_at": 0.0,
    }
    assert store.operations.publish(lock_name(store.namespace, key), "deadbeef", json.dumps(record))


def test_two_stale_breakers_race_and_the_late_one_cannot_break_the_fresh_lock(
    monkeypatch: pytest.MonkeyPatch, repo: Path, tmp_path: Path, other: LockStore
) -> None:
    reports: list[Reclamation] = []
    slow_breaker = LockStore(repo, tmp_path / "locks", on_reclaim=reports.append)
    _plant_dead_holder(slow_breaker, "f.py", "ghost")

    def fast_breaker_reclaims_then_carol_acquires() -> None:
        assert [r.holder.agent_id for r in other.reclaim_stale()] == ["ghost"]
        assert other.try_lock("f.py", "carol")

    race_before_removal(monkeypatch, slow_breaker, fast_breaker_reclaims_then_carol_acquires)
    assert slow_breaker.reclaim_stale() == []
    assert reports == []
    assert other.holder("f.py") == "carol"


def test_a_restarted_agent_races_another_breaker_for_its_own_dead_grant(
    monkeypatch: pytest.MonkeyPatch, repo: Path, tmp_path: Path, other: LockStore
) -> None:
    reports: list[Reclamation] = []
    restarted = LockStore(repo, tmp_path / "locks", on_reclaim=reports.append)
    _plant_dead_holder(restarted, "f.py", "bob")  # bob's previous process died holding it

    def carol_reclaims_and_acquires_first() -> None:
        assert other.try_lock("f.py", "carol")

    race_before_removal(monkeypatch, restarted, carol_reclaims_and_acquires_first)
    assert restarted.try_lock("f.py", "bob") is False  # the dead grant was never bob's to keep
    assert reports == []  # carol's unlink of the dead token won; bob's removed nothing
    assert other.holder("f.py") == "carol"


def test_a_restarted_agent_never_keeps_its_dead_grant(
    repo: Path, tmp_path: Path, other: LockStore
) -> None:
    reports: list[Reclamation] = []
    restarted = LockStore(repo, tmp_path / "locks", on_reclaim=reports.append)
    _plant_dead_holder(restarted, "f.py", "bob")
    assert restarted.try_lock("f.py", "bob")
    record = other.holder_record("f.py")
    assert record is not None
    assert (record.pid, record.token == "deadbeef") == (os.getpid(), False)
    assert [r.holder.token for r in reports] == ["deadbeef"]
    assert not other.try_lock("f.py", "carol")  # bob's fresh grant is alive: not reclaimable


def test_cleanup_races_a_release_and_reacquire_and_cannot_remove_the_new_grant(
    monkeypatch: pytest.MonkeyPatch, store: LockStore, other: LockStore
) -> None:
    assert store.try_lock("f.py", "alice")

    def alice_releases_and_reacquires() -> None:
        assert other.release("f.py", "alice")
        assert other.try_lock("f.py", "alice")

    race_before_removal(monkeypatch, store, alice_releases_and_reacquires)
    assert store.cleanup_agent_locks("alice") == []
    assert other.holder("f.py") == "alice"


def test_a_new_lock_renamed_in_mid_release_survives_the_releasers_rmdir(
    store: LockStore, other: LockStore
) -> None:
    assert store.try_lock("f.py", "alice")
    name = lock_name(store.namespace, store.canonicalize("f.py"))
    lock = store.lock_dir / f"{name}.lock"
    [token] = os.listdir(lock)
    os.unlink(lock / token)  # alice's release, first half
    assert not store.is_locked("f.py")  # an empty lock directory is free...
    assert other.try_lock("f.py", "carol")  # ...and a new lock renames onto it
    with pytest.raises(OSError, match=r"not empty|exists") as raised:
        os.rmdir(lock)  # alice's release, second half
    assert raised.value.errno in (errno.ENOTEMPTY, errno.EEXIST)
    assert other.holder("f.py") == "carol"


def test_an_acquire_that_loses_the_rename_race_leaves_no_debris(
    store: LockStore, other: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = store.operations.publish

    def publish(name: str, token: str, record: str) -> bool:
        if not other.is_locked("f.py"):
            assert other.try_lock("f.py", "carol")  # carol wins between check and rename
        return original(name, token, record)

    monkeypatch.setattr(store.operations, "publish", publish)
    assert store.try_lock("f.py", "alice") is False
    assert other.holder("f.py") == "carol"
    assert sorted(e for e in lock_dir_entries(store.lock_dir) if not e.endswith(".card")) == [
        f"{lock_name(store.namespace, store.canonicalize('f.py'))}.lock"
    ]
