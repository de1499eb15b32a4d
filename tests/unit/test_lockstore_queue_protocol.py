"""The queue protocol against a model: waits driven one look at a time, in every order
hypothesis picks, on a real lock directory; and the cost of a waiter's re-check, counted in
operations.

Each wait is the line's `wait` recipe, queued and then run one look at a time, as the store
runs it between sleeps (`stepped_waits.SteppedWait`), so any interleaving of looks,
releases, cancels, `try_lock` calls and waiters that died in line can be produced without
threads. (Every interleaving of every operation, on a model of the directory, is explored by
test_line_explorer.py.)
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.liveness import current_process, new_token
from lockyard.infra.lockstore.paths import lock_name
from lockyard.infra.lockstore.records import encode_waiter
from stepped_waits import FILE, SteppedWait, queued

DEAD = "dead-waiter"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _plant_dead_waiter(store: LockStore, pid: int) -> None:
    key = store.canonicalize(FILE)
    me = current_process()
    dead = type(me)(pid, me.start_time, me.host, me.boot_id, me.pid_ns)
    token = new_token()
    store.directory.queues.enqueue(
        lock_name(store.namespace, key),
        token,
        lambda ticket: encode_waiter(dead, DEAD, token, ticket, key, store.namespace, store.root),
    )


class QueueModel(RuleBasedStateMachine):
    """The model: who holds the lock, the queue on disk (live waiters, and waiters that died
    in line) in arrival order, and which heads staged the grant a release hands over.

    A release in this process accepts the grant it hands over for the head at once (the
    head accepts it by its next look."""

    def __init__(self) -> None:
        super().__init__()
        self.base = tempfile.mkdtemp(prefix="lockyard-queue-model-")
        os.mkdir(f"{self.base}/repo")
        self.store = LockStore(f"{self.base}/repo", f"{self.base}/locks")
        self.names = (f"agent-{n}" for n in itertools.count())
        self.holder: str | None = None
        self.handed = False  # the holder was handed the lock at a release, still in line
        self.line: list[str] = []  # live waiters, oldest first
        self.disk: list[str] = []  # the queue's entries: live waiters and dead ones
        self.staged: set[str] = set()  # heads that staged their grant
        self.dead = (f"dead-{n}" for n in itertools.count())
        self.waits: dict[str, SteppedWait] = {}
        self.granted: list[str] = []
        self.queued: list[str] = []

    def teardown(self) -> None:
        for wait in self.waits.values():
            wait.stop()
        leftovers = [w.agent_id for w in self.store.waiters(FILE) if w.agent_id != DEAD]
        self.store.close()
        shutil.rmtree(self.base)
        assert leftovers == []  # every wait that ended left the queue

    def _hand_over_or_free(self) -> None:
        """What a release does: the first entry gets the lock if it staged its grant."""
        first = self.disk[0] if self.disk else None
        if first is not None and first in self.staged:
            self.holder, self.handed = first, True
            self.granted.append(first)
        else:
            self.holder, self.handed = None, False

    def _leave(self, agent: str) -> None:
        self.waits.pop(agent).stop()
        self.line.remove(agent)
        self.disk.remove(agent)
        self.staged.discard(agent)

    @rule()
    def queue_a_waiter(self) -> None:
        agent = next(self.names)
        self.waits[agent] = queued(self.store, agent)
        self.line.append(agent)
        self.disk.append(agent)
        self.queued.append(agent)

    @precondition(lambda self: self.waits)
    @rule(data=st.data())
    def a_waiter_looks(self, data: st.DataObject) -> None:
        agent = data.draw(st.sampled_from(sorted(self.waits)))
        if self.handed and self.holder == agent:
            assert self.waits[agent].look()  # accepts the grant handed over to it
            self.handed = False
            self._leave(agent)
            return
        at = self.disk.index(agent)
        while at > 0 and self.disk[at - 1].startswith("dead-"):
            del self.disk[at - 1]  # it drops the dead right ahead of it
            at -= 1
        head = at == 0
        expected = head and self.holder is None
        assert self.waits[agent].look() is expected
        if expected:
            self._leave(agent)
            self.holder = agent
            self.granted.append(agent)
        elif head:
            self.staged.add(agent)

    @precondition(lambda self: self.holder is not None and not self.handed)
    @rule()
    def the_holder_releases(self) -> None:
        assert self.holder is not None
        assert self.store.release(FILE, self.holder)
        self._hand_over_or_free()

    @precondition(lambda self: self.waits)
    @rule(data=st.data())
    def a_waiter_gives_up(self, data: st.DataObject) -> None:
        agent = data.draw(st.sampled_from(sorted(self.waits)))
        self._leave(agent)
        if self.handed and self.holder == agent:
            self._hand_over_or_free()  # it releases the grant it was handed

    @rule()
    def a_newcomer_tries(self) -> None:
        agent = next(self.names)
        expected = self.holder is None and not self.line
        if self.holder is None:  # at a free lock it drops the dead ahead of the first live
            while self.disk and self.disk[0].startswith("dead-"):
                del self.disk[0]
        assert self.store.try_lock(FILE, agent) is expected
        if expected:
            self.holder = agent

    @rule()
    def a_waiter_dies_in_line(self) -> None:
        _plant_dead_waiter(self.store, DEAD_PID)
        self.disk.append(next(self.dead))

    @invariant()
    def the_lock_and_the_queue_are_as_modelled(self) -> None:
        assert self.store.holder(FILE) == self.holder
        on_disk = [w.agent_id for w in self.store.waiters(FILE) if w.agent_id != DEAD]
        assert on_disk == self.line
        assert len(self.store.waiters(FILE)) == len(self.disk)

    @invariant()
    def grants_follow_arrival_order(self) -> None:
        queued_order = [agent for agent in self.queued if agent in self.granted]
        assert self.granted == queued_order


DEAD_PID = _dead_pid()
QueueModel.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
test_the_queue_protocol_keeps_one_holder_and_arrival_order = QueueModel.TestCase


class _Counting:
    """Counts the operations the line asks of a store's lock directory."""

    def __init__(self, store: LockStore) -> None:
        self.calls: dict[str, int] = {}
        self._target = store.operations

    def wrap(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in dir(self._target):
            if name.startswith("_") or not callable(getattr(self._target, name)):
                continue
            monkeypatch.setattr(self._target, name, self._counted(name))

    def _counted(self, name: str) -> Callable[..., Any]:
        real = getattr(self._target, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return real(*args, **kwargs)

        return counted


def _recheck_reads(
    store: LockStore, waiters: int, monkeypatch: pytest.MonkeyPatch
) -> dict[str, int]:
    """The lock directory reads of one re-check by the last of `waiters` queued waiters."""
    assert store.try_lock(FILE, "holder")
    waits = [queued(store, f"w{n}") for n in range(waiters)]
    for wait in waits:
        assert not wait.look()
    counting = _Counting(store)
    with monkeypatch.context() as patch:
        counting.wrap(patch)
        assert not waits[-1].look()  # the backstop re-check: nothing changed
    for wait in waits:
        wait.stop()
    assert store.release(FILE, "holder")
    return counting.calls


def test_a_waiters_recheck_reads_as_much_in_a_long_queue_as_in_a_short_one(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = _recheck_reads(store, 3, monkeypatch)
    long = _recheck_reads(store, 300, monkeypatch)
    assert long == short
    assert "queue_order" not in long  # no listing of the queue


def _first_of_fifty_took_the_lock_and_left(store: LockStore) -> list[SteppedWait]:
    """Fifty waits queued; the first took the lock and left the queue as head (stamping its
    successor's turn, which has not looked since): the waits, the first one ended."""
    assert store.try_lock(FILE, "holder")
    waits = [queued(store, f"w{n}") for n in range(50)]
    for wait in waits:
        assert not wait.look()
    assert store.release(FILE, "holder")
    assert waits[0].look()
    return waits


def test_the_successor_of_a_head_that_took_the_lock_knows_it_is_first_without_a_queue_read(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits = _first_of_fifty_took_the_lock_and_left(store)
    assert store.release(FILE, "w0")
    counting = _Counting(store)
    with monkeypatch.context() as patch:
        counting.wrap(patch)
        assert waits[1].look()
    assert "queue_order" not in counting.calls
    for wait in waits[1:]:
        wait.stop()


def test_a_release_whose_head_has_not_staged_its_grant_yet_frees_the_lock_without_a_queue_read(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process that hands the lock on at once (each waiter releases as soon as it returns)
    # releases before its just-stamped successor has run: nothing is staged to hand over, so
    # the lock is freed, and the successor, still first, needs no search of the queue.
    waits = _first_of_fifty_took_the_lock_and_left(store)
    counting = _Counting(store)
    with monkeypatch.context() as patch:
        counting.wrap(patch)
        assert store.release(FILE, "w0")
    assert "queue_order" not in counting.calls
    assert store.holder(FILE) is None
    assert waits[1].look()  # the lock freed for it, it takes it in its turn
    assert store.holder(FILE) == "w1"
    assert [w.agent_id for w in store.waiters(FILE)] == [f"w{n}" for n in range(2, 50)]
    assert store.release(FILE, "w1")
    for wait in waits[1:]:
        wait.stop()
