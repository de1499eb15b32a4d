"""A release hands the lock over to the queue's head: the races around that grant.

Waits are the line's `wait` recipe driven one look at a time on a real lock directory (as the
store runs them between sleeps), so each interleaving is forced, not hoped for: a head that
stops waiting while the lock is handed over, one that never accepts its grant, a newcomer's
`try_lock` in the middle of a handover.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.liveness import current_process
from lockyard.infra.lockstore.lockdir import disk, line, sleep
from lockyard.infra.lockstore.lockdir.operations import run
from lockyard.infra.lockstore.records import encode_waiter
from stepped_waits import FILE, SteppedWait, looked_once, name_of, queued, waiting_agents


def _head(store: LockStore, agent: str) -> SteppedWait:
    """A wait that is first in line at a held lock: it has staged its grant."""
    wait = looked_once(store, agent)
    assert _staged(store) == [agent]
    return wait


def _staged(store: LockStore) -> list[str]:
    """The agents whose grant is staged in the lock directory (by the token of their wait;
    a token no queued wait has any more is listed as itself)."""
    queued = store.directory.queues.read_queue(name_of(store))
    agents = {record.token: record.agent_id for _entry, record in queued}
    return [
        agents.get(token, token)
        for entry in os.listdir(store.lock_dir)
        for _name_part, mark, token in [entry.partition(disk.STAGING_MARK)]
        if mark
    ]


def _age_first_turn(store: LockStore, seconds: float) -> None:
    name = name_of(store)
    [first, *_rest] = store.directory.queues.queue_order(name)
    then = time.time() - seconds
    token = store.directory.queues.entry_token(name, first)
    os.utime(f"{store.lock_dir}/{name}.q/{first}/{token}", (then, then), follow_symlinks=False)


def test_a_release_hands_the_lock_to_the_head_which_accepts_it_by_leaving_the_queue(
    store: LockStore,
) -> None:
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    assert store.release(FILE, "holder")
    assert store.holder(FILE) == "b"  # never free in between
    assert _staged(store) == []  # the staged grant is the lock now
    assert not store.try_lock(FILE, "newcomer")
    assert head.look()  # one look: the grant is there
    head.stop()
    assert waiting_agents(store) == []
    assert store.holder(FILE) == "b"
    assert store.release(FILE, "b")
    assert store.holder(FILE) is None


def test_a_waiter_not_yet_first_is_not_handed_anything(store: LockStore) -> None:
    assert store.try_lock(FILE, "holder")
    first = queued(store, "b")  # queued, but has not looked: nothing staged
    second = looked_once(store, "c")
    assert store.release(FILE, "holder")
    assert store.holder(FILE) is None  # freed: b's turn, b takes it itself
    assert not second.look()
    assert first.look()
    first.stop()
    second.stop()


@pytest.mark.parametrize("successor", [True, False])
def test_a_head_that_stops_waiting_after_the_handover_passes_the_lock_on(
    store: LockStore, successor: bool
) -> None:
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    behind = looked_once(store, "c") if successor else None
    assert store.release(FILE, "holder")
    assert store.holder(FILE) == "b"
    head.stop()  # timed out or cancelled before it looked
    assert store.holder(FILE) is None  # passed on: c's turn, or nobody's
    if behind is not None:
        assert not store.try_lock(FILE, "newcomer")  # c is first now
        assert behind.look()
        behind.stop()
        assert store.holder(FILE) == "c"
    else:
        assert store.try_lock(FILE, "newcomer")
    assert waiting_agents(store) == []
    assert _staged(store) == []


def test_a_head_handed_over_to_while_a_staged_successor_waits_passes_it_on_at_once(
    store: LockStore,
) -> None:
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    behind = looked_once(store, "c")
    assert store.release(FILE, "holder")
    head.stop()  # b leaves: c becomes first
    assert not behind.look() or store.holder(FILE) == "c"
    behind.stop()
    assert waiting_agents(store) == []


def test_a_head_that_stops_waiting_while_the_release_renames_its_staging_leaves_no_lock(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head takes its record back (`unlink`) just before the releaser renames the now
    empty staging onto the lock: the releaser finds no grant there and frees the lock."""
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    discard = store.directory.stagings.discard_staging
    released: list[bool] = []

    def release_in_between(staging: str, token: str) -> None:
        if not released:
            released.append(store.release(FILE, "holder"))
        discard(staging, token)

    monkeypatch.setattr(store.directory.stagings, "discard_staging", release_in_between)
    head.stop()
    assert released == [True]
    assert store.holder(FILE) is None
    assert not (store.lock_dir / f"{name_of(store)}.lock").exists()  # no empty lock left
    assert _staged(store) == []
    assert store.try_lock(FILE, "newcomer")


def test_a_newcomer_cannot_take_the_lock_in_the_middle_of_a_handover(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the releaser's `unlink` of its grant and its `rename` of the head's staging
    the lock is an empty directory: free, but the head's turn."""
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    rename = os.rename
    tried: list[bool] = []

    def newcomer_first(source: str, target: str, **options: int) -> None:
        if not tried and disk.STAGING_MARK in str(source):
            tried.append(store.try_lock(FILE, "newcomer"))
        rename(source, target, **options)

    monkeypatch.setattr(disk.os, "rename", newcomer_first)  # the staging renamed onto the lock
    assert store.release(FILE, "holder")
    assert tried == [False]
    assert store.holder(FILE) == "b"
    assert head.look()
    head.stop()


def test_a_grant_left_unaccepted_past_the_turn_is_passed_over_by_the_successor(
    store: LockStore,
) -> None:
    assert store.try_lock(FILE, "holder")
    stalled = _head(store, "b")
    behind = looked_once(store, "c")
    assert store.release(FILE, "holder")
    assert store.holder(FILE) == "b"
    assert not behind.look()  # b's turn is young: nothing is taken from it
    _age_first_turn(store, store.turn_timeout + 1)
    assert behind.look()  # passes b over, takes its grant back, and gets the lock
    behind.stop()
    assert store.holder(FILE) == "c"
    # b runs again: its entry is gone and so is its grant; it queues again, behind nobody
    assert not stalled.look()
    assert waiting_agents(store) == ["b"]
    assert store.release(FILE, "c")
    assert store.holder(FILE) == "b"  # handed over to b, which staged its grant anew
    assert stalled.look()
    stalled.stop()


def test_a_grant_left_unaccepted_past_the_turn_is_passed_over_by_try_lock(
    store: LockStore,
) -> None:
    assert store.try_lock(FILE, "holder")
    stalled = _head(store, "b")
    assert store.release(FILE, "holder")
    assert not store.try_lock(FILE, "newcomer")  # b's turn
    _age_first_turn(store, store.turn_timeout + 1)
    assert store.try_lock(FILE, "newcomer")
    assert waiting_agents(store) == []
    assert not stalled.look()  # queues again behind the newcomer
    stalled.stop()
    assert store.holder(FILE) == "newcomer"


def test_a_head_that_accepts_first_keeps_the_lock_from_a_late_pass_over(
    store: LockStore,
) -> None:
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    name = name_of(store)
    [(entry, record)] = store.directory.queues.read_queue(name)
    assert store.release(FILE, "holder")
    _age_first_turn(store, store.turn_timeout + 1)  # judged stalled by someone ...
    assert head.look()  # ... but b accepts first
    head.stop()
    assert not run(line.pass_over(store.operations, name, entry, record))  # void: too late
    assert store.holder(FILE) == "b"


def test_a_waiter_passed_over_while_taking_does_not_keep_the_lock(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its entry is dropped between its take and its accepting: the grant is not its own."""
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    name = name_of(store)
    [(entry, record)] = store.directory.queues.read_queue(name)
    assert store.release(FILE, "holder")
    holds: Callable[[str, str], bool] = store.operations.holds

    def dropped_after_take(lock: str, token: str) -> bool:
        taken = holds(lock, token)
        if taken and token == record.token:
            # `lockyard clean` ended b's wait just then
            store.operations.dequeue(name, entry, record.token)
        return taken

    monkeypatch.setattr(store.operations, "holds", dropped_after_take)
    # It passes the grant on (nobody else waits: the lock is free), queues again, and,
    # first at a free lock, takes it under its new wait.
    assert head.look()
    assert record.token != head.place.token
    head.stop()
    holder = store.holder_record(FILE)
    assert holder is not None
    assert holder.agent_id == "b"
    assert holder.token != record.token


def test_a_dead_heads_unaccepted_grant_is_taken_back_when_its_entry_is_dropped(
    store: LockStore,
) -> None:
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    assert store.release(FILE, "holder")
    name = name_of(store)
    [(entry, record)] = store.directory.queues.read_queue(name)
    assert run(line.end_wait(store.operations, name, entry, record))  # as for a dead waiter
    assert store.holder(FILE) is None
    head.stop()
    assert store.holder(FILE) is None
    assert _staged(store) == []


# -- a head in another process: rung at its doorbell ------------------------------------------


@pytest.fixture
def apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every record counts as another process's: heads open doorbells, as between two
    processes (the waits are still driven one look at a time here)."""
    monkeypatch.setattr(sleep, "is_this_process", lambda _pid, _start_time: False)


def _bells(store: LockStore) -> list[str]:
    return [entry for entry in os.listdir(store.lock_dir) if disk.BELL_MARK in entry]


@pytest.mark.usefixtures("apart")
def test_a_head_is_rung_at_its_doorbell_and_accepts_its_grant(store: LockStore) -> None:
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    assert _bells(store) == [f"{name_of(store)}{disk.BELL_MARK}{head.place.token}"]
    assert not head.rung()
    assert store.release(FILE, "holder")
    assert head.rung()
    assert head.look()
    head.stop()
    assert store.holder(FILE) == "b"
    assert waiting_agents(store) == []
    assert _bells(store) == []


@pytest.mark.usefixtures("apart")
def test_a_head_that_looks_as_soon_as_it_is_rung_takes_the_emptied_lock_itself(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release drops its grant, then rings the head before it stamps the turn and hands
    the lock over, so the head wakes meanwhile; one that looks that soon finds the lock
    empty (held by nobody) and publishes its staged grant itself. The release's handover
    then finds the staging gone and leaves the lock to the head."""
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    stamp = store.operations.stamp_turn
    looked: list[tuple[bool, bool, str | None]] = []
    releasing = [True]

    def head_looks_first(name: str, entry: str, token: str) -> bool:
        if releasing:  # the release's stamp (not the head's own, as it looks)
            releasing.clear()
            rung = head.rung()
            looked.append((rung, head.look(), store.holder(FILE)))
        return stamp(name, entry, token)

    monkeypatch.setattr(store.operations, "stamp_turn", head_looks_first)
    assert store.release(FILE, "holder")
    assert looked == [(True, True, "b")]  # rung early, and the lock was already free of ours
    head.stop()
    assert store.holder(FILE) == "b"
    assert waiting_agents(store) == []
    assert not [entry for entry in os.listdir(store.lock_dir) if disk.STAGING_MARK in entry]
    assert waiting_agents(store) == []


@pytest.mark.usefixtures("apart")
def test_a_rung_head_whose_wait_was_ended_before_it_accepted_does_not_keep_the_grant(
    store: LockStore,
) -> None:
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    behind = looked_once(store, "c")
    name = name_of(store)
    [(entry, record), _c] = store.directory.queues.read_queue(name)
    assert store.release(FILE, "holder")
    assert store.holder(FILE) == "b"
    # `lockyard clean` ends b's wait just then
    assert store.operations.dequeue(name, entry, record.token)
    # b finds its grant but not its entry: it passes the grant on (c, the first now, has
    # staged nothing yet: the lock is free for c to take), and queues again behind c.
    assert not head.look()
    assert store.holder(FILE) is None
    assert not store.try_lock(FILE, "newcomer")
    assert waiting_agents(store) == ["c", "b"]
    assert behind.look()
    behind.stop()
    assert store.release(FILE, "c")
    assert head.look()
    head.stop()
    holder = store.holder_record(FILE)
    assert holder is not None
    assert (holder.agent_id, holder.token == record.token) == ("b", False)


# -- finding the head at a release ------------------------------------------------------------


def test_a_release_finds_the_head_of_a_queue_at_the_lowest_ticket_without_listing_it(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.try_lock(FILE, "holder")
    first = queued(store, "b")
    queued(store, "c")
    name = name_of(store)

    def no_listing(*args: object, **options: object) -> list[str]:
        raise AssertionError("the lowest ticket is first: no listing needed")

    monkeypatch.setattr(store.operations, "queue_order", no_listing)
    assert run(line.first_waiter(store.operations, name)) == (line.FIRST_TICKET, first.place.token)


def test_a_release_lists_the_queue_when_the_lowest_ticket_has_left(store: LockStore) -> None:
    assert store.try_lock(FILE, "holder")
    first = queued(store, "b")
    second = queued(store, "c")
    first.stop()
    found = run(line.first_waiter(store.operations, name_of(store)))
    assert found == (second.place.entry, second.place.token)
    assert found[0] != line.FIRST_TICKET


def test_a_release_skips_a_lowest_ticket_that_is_no_waiters_record(store: LockStore) -> None:
    assert store.try_lock(FILE, "holder")
    name = name_of(store)
    os.mkdir(store.lock_dir / f"{name}.q")
    os.symlink("not a record", store.lock_dir / f"{name}.q" / line.FIRST_TICKET)
    waiter = queued(store, "b")
    found = run(line.first_waiter(store.operations, name))
    assert found is not None
    assert found[1] == waiter.place.token


def test_a_waiters_token_is_the_name_of_the_one_record_its_entry_holds(
    store: LockStore,
) -> None:
    # A release reads the first waiter's token without its record: the entry's one name.
    # An entry emptied by a remover that died, one holding two records, a record still
    # being written, or a plain file where an entry should be: no waiter's token.
    me = current_process()
    name = name_of(store)
    queue = store.lock_dir / f"{name}.q"
    queue.mkdir()
    record = encode_waiter(me, "a", "tok1", 1, "k", "ns", "/c")
    for ticket, names in enumerate([["tok1"], [], ["x", "y"], ["tok4.part"]], start=1):
        entry = queue / f"{ticket:020d}"
        entry.mkdir()
        for token in names:
            os.symlink(record, entry / token)
    (queue / f"{5:020d}").write_text(record)
    tokens = [store.directory.queues.entry_token(name, f"{n:020d}") for n in range(1, 6)]
    assert tokens == ["tok1", None, None, None, None]
    assert [entry for entry, _waiter in store.directory.queues.read_queue(name)] == [f"{1:020d}"]


@pytest.mark.usefixtures("apart")
def test_a_head_that_queued_again_is_rung_at_the_doorbell_of_its_new_wait(
    store: LockStore,
) -> None:
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    name = name_of(store)
    [(entry, record)] = store.directory.queues.read_queue(name)
    first_token = head.place.token
    assert _bells(store) == [f"{name}{disk.BELL_MARK}{first_token}"]
    assert store.operations.dequeue(name, entry, record.token)  # `lockyard clean` ends b's wait
    assert not head.look()  # queues again, first again, with a new token
    assert head.place.token != first_token
    assert _bells(store) == [f"{name}{disk.BELL_MARK}{head.place.token}"]  # the old one went
    assert store.release(FILE, "holder")
    assert head.rung()
    assert head.look()
    head.stop()
    assert store.holder(FILE) == "b"
