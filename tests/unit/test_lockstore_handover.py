"""A release hands the lock over to the queue's head: the races around that grant.

Waits are `waiting.Waiting`s driven round by round on a real lock directory (as the sync and
async loops drive them between sleeps), each head accepting its grant in its own round as a
head in another process does, so each interleaving is forced, not hoped for: a
head that stops waiting while the lock is handed over, one that never accepts its grant,
a newcomer's `try_lock` in the middle of a handover.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from handover_support import FILE, looked_once, name_of, queued, waiting_agents

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.liveness import current_process
from lockyard.infra.lockstore.lockdir import disk, queue, waiting
from lockyard.infra.lockstore.lockdir.wake_hub import WakeHub
from lockyard.infra.lockstore.records import encode_waiter


@pytest.fixture(autouse=True)
def heads_accept_for_themselves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every head here accepts its grant in its own round, as a head in another process
    does: a release in this process would otherwise accept it for the head at once (those
    interleavings are in test_lockstore_in_process_handover.py)."""
    monkeypatch.setattr(WakeHub, "hand_grant", lambda _hub, _token: False)


def _head(store: LockStore, agent: str) -> waiting.Waiting:
    """A wait that is first in line at a held lock: it has staged its grant."""
    wait = looked_once(store, agent)
    assert _staged(store) == [agent]
    return wait


def _staged(store: LockStore) -> list[str]:
    """The agents whose grant is staged in the lock directory (by the token of their wait;
    a token no queued wait has any more is listed as itself)."""
    agents = {record.token: record.agent_id for _entry, record in store.read_queue(name_of(store))}
    return [
        agents.get(token, token)
        for entry in os.listdir(store.lock_dir)
        for _name_part, mark, token in [entry.partition(disk.STAGING_MARK)]
        if mark
    ]


def _age_first_turn(store: LockStore, seconds: float) -> None:
    name = name_of(store)
    [first, *_rest] = store._dir.queue_order(name)
    then = time.time() - seconds
    os.utime(f"{store.lock_dir}/{name}.q/{first}", (then, then), follow_symlinks=False)


def test_a_release_hands_the_lock_to_the_head_which_accepts_it_by_leaving_the_queue(
    store: LockStore,
) -> None:
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    assert store.release(FILE, "holder")
    assert store.holder(FILE) == "b"  # never free in between
    assert _staged(store) == []  # the staged grant is the lock now
    assert not store.try_lock(FILE, "newcomer")
    assert head.advance()  # one look: the grant is there
    head.__exit__(None, None, None)
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
    assert not second.advance()
    assert first.advance()
    first.__exit__(None, None, None)
    second.__exit__(None, None, None)


@pytest.mark.parametrize("successor", [True, False])
def test_a_head_that_stops_waiting_after_the_handover_passes_the_lock_on(
    store: LockStore, successor: bool
) -> None:
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    behind = looked_once(store, "c") if successor else None
    assert store.release(FILE, "holder")
    assert store.holder(FILE) == "b"
    head.__exit__(None, None, None)  # timed out or cancelled before it looked
    assert store.holder(FILE) is None  # passed on: c's turn, or nobody's
    if behind is not None:
        assert not store.try_lock(FILE, "newcomer")  # c is first now
        assert behind.advance()
        behind.__exit__(None, None, None)
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
    head.__exit__(None, None, None)  # b leaves: c becomes first
    assert not behind.advance() or store.holder(FILE) == "c"
    behind.__exit__(None, None, None)
    assert waiting_agents(store) == []


def test_a_head_that_stops_waiting_while_the_release_renames_its_staging_leaves_no_lock(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head takes its record back (`unlink`) just before the releaser renames the now
    empty staging onto the lock: the releaser finds no grant there and frees the lock."""
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    discard = store._dir.discard_staging
    released: list[bool] = []

    def release_in_between(staging: str, token: str) -> None:
        if not released:
            released.append(store.release(FILE, "holder"))
        discard(staging, token)

    monkeypatch.setattr(store._dir, "discard_staging", release_in_between)
    head.__exit__(None, None, None)
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

    monkeypatch.setattr(disk.os, "rename", newcomer_first)
    assert store.release(FILE, "holder")
    assert tried == [False]
    assert store.holder(FILE) == "b"
    assert head.advance()
    head.__exit__(None, None, None)


def test_a_grant_left_unaccepted_past_the_turn_is_passed_over_by_the_successor(
    store: LockStore,
) -> None:
    assert store.try_lock(FILE, "holder")
    stalled = _head(store, "b")
    behind = looked_once(store, "c")
    assert store.release(FILE, "holder")
    assert store.holder(FILE) == "b"
    assert not behind.advance()  # b's turn is young: nothing is taken from it
    _age_first_turn(store, store.turn_timeout + 1)
    assert behind.advance()  # passes b over, takes its grant back, and gets the lock
    behind.__exit__(None, None, None)
    assert store.holder(FILE) == "c"
    # b runs again: its entry is gone and so is its grant; it queues again, behind nobody
    assert not stalled.advance()
    assert waiting_agents(store) == ["b"]
    assert store.release(FILE, "c")
    assert store.holder(FILE) == "b"  # handed over to b, which staged its grant anew
    assert stalled.advance()
    stalled.__exit__(None, None, None)


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
    assert not stalled.advance()  # queues again behind the newcomer
    stalled.__exit__(None, None, None)
    assert store.holder(FILE) == "newcomer"


def test_a_head_that_accepts_first_keeps_the_lock_from_a_late_pass_over(
    store: LockStore,
) -> None:
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    name = name_of(store)
    [(entry, record)] = store.read_queue(name)
    assert store.release(FILE, "holder")
    _age_first_turn(store, store.turn_timeout + 1)  # judged stalled by someone ...
    assert head.advance()  # ... but b accepts first
    head.__exit__(None, None, None)
    assert not store._queues.pass_over(name, entry, record)  # the late pass-over is void
    assert store.holder(FILE) == "b"


def test_a_waiter_passed_over_while_taking_does_not_keep_the_lock(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its entry is dropped between its take and its accepting: the grant is not its own."""
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    name = name_of(store)
    [(entry, record)] = store.read_queue(name)
    assert store.release(FILE, "holder")
    take: Callable[[str], bool] = head._take

    def dropped_after_take(token: str) -> bool:
        taken = take(token)
        if token == record.token:
            store._queues.drop(name, entry)  # `lockyard clean` ended b's wait just then
        return taken

    monkeypatch.setattr(head, "_take", dropped_after_take)
    # It passes the grant on (nobody else waits: the lock is free), queues again, and,
    # first at a free lock, takes it under its new wait.
    assert head.advance()
    assert record.token != head._place.token
    head.__exit__(None, None, None)
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
    [(entry, record)] = store.read_queue(name)
    assert store._queues.end_wait(name, entry, record)  # what a dead waiter's entry gets
    assert store.holder(FILE) is None
    head.__exit__(None, None, None)
    assert store.holder(FILE) is None
    assert _staged(store) == []


# -- a head in another process: rung at its doorbell ------------------------------------------


@pytest.fixture
def apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every record counts as another process's: heads open doorbells and releases ring
    them, as between two processes (the waits are still driven round by round here)."""
    monkeypatch.setattr(queue.Head, "here", property(lambda _head: False))
    monkeypatch.setattr(waiting, "is_ours", lambda _record: False)


def _rung(wait: waiting.Waiting) -> bool:
    return wait.waker.wait(0)


@pytest.mark.usefixtures("apart")
def test_a_rung_head_accepts_its_grant_without_a_round_of_reads(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    assert head._bell is not None  # the holder is "elsewhere": it opened its doorbell
    assert not _rung(head)
    assert store.release(FILE, "holder")
    assert _rung(head)

    def no_round() -> None:
        raise AssertionError("a handed-over grant is accepted without the round's reads")

    monkeypatch.setattr(head, "_round", no_round)
    assert head.advance()
    head.__exit__(None, None, None)
    assert store.holder(FILE) == "b"
    assert waiting_agents(store) == []
    assert not [entry for entry in os.listdir(store.lock_dir) if disk.BELL_MARK in entry]


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
    stamp = store._dir.stamp_turn
    looked: list[tuple[bool, bool, str | None]] = []

    def head_looks_first(name: str, entry: str) -> bool:
        if not looked:
            rung = _rung(head)
            looked.append((rung, head.advance(), store.holder(FILE)))
        return stamp(name, entry)

    monkeypatch.setattr(store._dir, "stamp_turn", head_looks_first)
    assert store.release(FILE, "holder")
    assert looked == [(True, True, "b")]  # rung early, and the lock was already free of ours
    head.__exit__(None, None, None)
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
    [(entry, record), _c] = store.read_queue(name)
    assert store.release(FILE, "holder")
    assert store.holder(FILE) == "b"
    assert store._queues.drop(name, entry)  # `lockyard clean` ends b's wait just then
    # b finds its grant but not its entry: it passes the grant on (c, the first now, has
    # staged nothing yet: the lock is free for c to take), and queues again behind c.
    assert not head.advance()
    assert store.holder(FILE) is None
    assert not store.try_lock(FILE, "newcomer")
    assert waiting_agents(store) == ["c", "b"]
    assert behind.advance()
    behind.__exit__(None, None, None)
    assert store.release(FILE, "c")
    assert head.advance()
    head.__exit__(None, None, None)
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

    monkeypatch.setattr(store._dir, "queue_order", no_listing)
    assert store._queues.first_waiter(name) == (
        queue.FIRST_TICKET,
        queue.Head(first._place.token, current_process()),
    )


def test_a_release_lists_the_queue_when_the_lowest_ticket_has_left(store: LockStore) -> None:
    assert store.try_lock(FILE, "holder")
    first = queued(store, "b")
    second = queued(store, "c")
    first.__exit__(None, None, None)
    found = store._queues.first_waiter(name_of(store))
    assert found is not None
    assert (found[0], found[1].token) == (second._place.entry, second._place.token)
    assert found[0] != queue.FIRST_TICKET


def test_a_release_skips_a_lowest_ticket_that_is_no_waiters_record(store: LockStore) -> None:
    assert store.try_lock(FILE, "holder")
    name = name_of(store)
    os.mkdir(store.lock_dir / f"{name}.q")
    os.symlink("not a record", store.lock_dir / f"{name}.q" / queue.FIRST_TICKET)
    waiter = queued(store, "b")
    found = store._queues.first_waiter(name)
    assert found is not None
    assert found[1].token == waiter._place.token


def test_a_head_is_read_from_the_fields_a_release_needs() -> None:
    me = current_process()
    record = encode_waiter(me, 'a","token":"forged', "tok1", 3, "k", "ns", "/c")
    assert queue.head_of(record) == queue.Head("tok1", me)
    spaced = json.dumps(json.loads(record))  # another spelling: decoded as JSON
    assert queue.head_of(spaced) == queue.Head("tok1", me)
    elsewhere = json.dumps({"token": "t", "pid": me.pid + 1, "start_time": None})
    assert queue.head_of(elsewhere) == queue.Head("t", None)
    for not_a_head in (
        "not json",
        "[1]",
        '{"token":"t"}',
        '{"token":"a/b","pid":1,"start_time":null}',
        '{"token":"","pid":1,"start_time":null}',
        '{"token":"t","pid":"1","start_time":null}',
        '{"token":"t","pid":1,"start_time":1.5}',
    ):
        assert queue.head_of(not_a_head) is None, not_a_head


def test_a_head_that_accepts_forgets_it_was_first_so_its_next_release_reads_no_stale_entry(
    store: LockStore, repo: Path, lock_dir: Path
) -> None:
    """A head that queued first remembered itself as the entry a release here stamps; the
    release came from elsewhere (another store, as another process), so nothing here used
    that note: accepting drops it."""
    with LockStore(repo, lock_dir) as elsewhere:
        assert elsewhere.try_lock(FILE, "holder")
        head = _head(store, "b")
        name = name_of(store)
        assert name in store._queues._next_first
        assert elsewhere.release(FILE, "holder")
        assert head.advance()
        head.__exit__(None, None, None)
        assert name not in store._queues._next_first
        assert store.holder(FILE) == "b"


@pytest.mark.usefixtures("apart")
def test_a_head_that_queued_again_is_rung_at_the_doorbell_of_its_new_wait(
    store: LockStore,
) -> None:
    assert store.try_lock(FILE, "holder")
    head = _head(store, "b")
    name = name_of(store)
    [(entry, _record)] = store.read_queue(name)
    assert head._bell is not None
    first_token = head._bell[0]
    assert store._queues.drop(name, entry)  # `lockyard clean` ends b's wait
    assert not head.advance()  # queues again, first again, with a new token
    assert head._bell is not None
    assert head._bell[0] == head._place.token != first_token
    bells = [entry for entry in os.listdir(store.lock_dir) if disk.BELL_MARK in entry]
    assert bells == [f"{name}{disk.BELL_MARK}{head._place.token}"]  # the old one is gone
    assert store.release(FILE, "holder")
    assert _rung(head)
    assert head.advance()
    head.__exit__(None, None, None)
    assert store.holder(FILE) == "b"
