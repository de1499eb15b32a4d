"""The queue protocol against a model: waits driven round by round, in every order hypothesis
picks, on a real lock directory; and the cost of a waiter's re-check, counted in reads.

Each wait is a `waiting.Waiting` entered (queued) and advanced one round at a time, as the
sync and async loops do between sleeps, so any interleaving of rounds, releases, cancels,
`try_lock` calls and waiters that died in line can be produced without threads.
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
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.liveness import current_process, new_token
from lockyard.infra.lockstore.lockdir import waiting
from lockyard.infra.lockstore.lockdir.protocol import Look, Move, Seen, step
from lockyard.infra.lockstore.lockdir.wake_hub import process_hub
from lockyard.infra.lockstore.paths import lock_name
from lockyard.infra.lockstore.records import encode_waiter

FILE = "f.py"
DEAD = "dead-waiter"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _waiting(store: LockStore, agent: str) -> waiting.Waiting:
    key = store.canonicalize(FILE)
    return store._waiting(lock_name(store.namespace, key), key, agent, 0.05)


def _plant_dead_waiter(store: LockStore, pid: int) -> None:
    key = store.canonicalize(FILE)
    me = current_process()
    dead = type(me)(pid, me.start_time, me.host, me.boot_id, me.pid_ns)
    token = new_token()
    store._dir.enqueue(
        lock_name(store.namespace, key),
        lambda ticket: encode_waiter(dead, DEAD, token, ticket, key, store.namespace, store.root),
    )


@pytest.mark.parametrize(
    ("look", "move"),
    [
        (Look(in_line=False, ahead=None), Move.QUEUE_AGAIN),
        (Look(in_line=False, ahead=Seen.WAITING), Move.QUEUE_AGAIN),
        (Look(in_line=True, ahead=None), Move.TAKE),
        (Look(in_line=True, ahead=Seen.GONE), Move.NEXT_AHEAD),
        (Look(in_line=True, ahead=Seen.DEAD), Move.DROP_AHEAD),
        (Look(in_line=True, ahead=Seen.STALLED), Move.PASS_OVER_AHEAD),
        (Look(in_line=True, ahead=Seen.WAITING), Move.WATCH_AHEAD),
    ],
)
def test_a_waiter_takes_only_at_the_head_and_only_while_in_line(look: Look, move: Move) -> None:
    assert step(look) is move


class QueueModel(RuleBasedStateMachine):
    """The model: who holds the lock, the queue on disk (live waiters, and waiters that died
    in line) in arrival order, and which heads staged the grant a release hands over.

    A release in this process accepts the grant it hands over for the head at once (the
    head left the line, and its next look returns the lock), unless the head accepts for
    itself, as a head in another process does: each run picks one of the two."""

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
        self.waits: dict[str, waiting.Waiting] = {}
        self.granted: list[str] = []
        self.queued: list[str] = []
        self.accept_at_release = True
        self.accepted: str | None = None  # handed the lock and accepted for it, not yet told

    @initialize(at_release=st.booleans())
    def heads_accept(self, at_release: bool) -> None:
        self.accept_at_release = at_release
        if not at_release:
            process_hub().hand_grant = lambda _token: False  # type: ignore[method-assign]

    def teardown(self) -> None:
        vars(process_hub()).pop("hand_grant", None)
        for wait in self.waits.values():
            wait.__exit__(None, None, None)
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
            if self.accept_at_release:
                self.handed, self.accepted = False, first
                self.line.remove(first)
                self.disk.remove(first)
                self.staged.discard(first)
        else:
            self.holder, self.handed = None, False

    def _leave(self, agent: str) -> None:
        self.waits.pop(agent).__exit__(None, None, None)
        self.line.remove(agent)
        self.disk.remove(agent)
        self.staged.discard(agent)

    @rule()
    def queue_a_waiter(self) -> None:
        agent = next(self.names)
        wait = _waiting(self.store, agent)
        wait.__enter__()
        self.waits[agent] = wait
        self.line.append(agent)
        self.disk.append(agent)
        self.queued.append(agent)

    @precondition(lambda self: self.waits)
    @rule(data=st.data())
    def a_waiter_looks(self, data: st.DataObject) -> None:
        agent = data.draw(st.sampled_from(sorted(self.waits)))
        if self.accepted == agent:
            assert self.waits[agent].advance()  # the grant accepted for it at the release
            self.waits.pop(agent).__exit__(None, None, None)
            self.accepted = None
            return
        if self.handed and self.holder == agent:
            assert self.waits[agent].advance()  # accepts the grant handed over to it
            self.handed = False
            self._leave(agent)
            return
        at = self.disk.index(agent)
        while at > 0 and self.disk[at - 1].startswith("dead-"):
            del self.disk[at - 1]  # it drops the dead right ahead of it
            at -= 1
        head = at == 0
        expected = head and self.holder is None
        assert self.waits[agent].advance() is expected
        if expected:
            self._leave(agent)
            self.holder = agent
            self.granted.append(agent)
        elif head:
            self.staged.add(agent)

    @precondition(lambda self: self.holder is not None and not self.handed and not self.accepted)
    @rule()
    def the_holder_releases(self) -> None:
        assert self.holder is not None
        assert self.store.release(FILE, self.holder)
        self._hand_over_or_free()

    @precondition(lambda self: self.waits)
    @rule(data=st.data())
    def a_waiter_gives_up(self, data: st.DataObject) -> None:
        agent = data.draw(st.sampled_from(sorted(self.waits)))
        if self.accepted == agent:
            self.waits.pop(agent).__exit__(None, None, None)  # timed out as it was woken
            self.accepted = None
            self._hand_over_or_free()  # it releases the grant accepted for it
            return
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
    """Counts the calls made to a lock directory's methods."""

    def __init__(self, target: Any) -> None:
        self.calls: dict[str, int] = {}
        self._target = target

    def wrap(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in dir(type(self._target)):
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
    waits = [_waiting(store, f"w{n}") for n in range(waiters)]
    for wait in waits:
        wait.__enter__()
        assert not wait.advance()
    counting = _Counting(store._dir)
    with monkeypatch.context() as patch:
        counting.wrap(patch)
        assert not waits[-1].advance()  # the backstop re-check: nothing changed
    for wait in waits:
        wait.__exit__(None, None, None)
    assert store.release(FILE, "holder")
    return counting.calls


def test_a_waiters_recheck_reads_as_much_in_a_long_queue_as_in_a_short_one(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = _recheck_reads(store, 3, monkeypatch)
    long = _recheck_reads(store, 300, monkeypatch)
    assert long == short
    assert "queue_entries" not in long  # no whole-queue read
    assert "queue_order" not in long


def _first_of_fifty_took_the_lock_and_left(store: LockStore) -> list[waiting.Waiting]:
    """Fifty waits queued; the first took the lock and left the queue as head (stamping its
    successor's turn, which has not looked since): the waits, the first one ended."""
    assert store.try_lock(FILE, "holder")
    waits = [_waiting(store, f"w{n}") for n in range(50)]
    for wait in waits:
        wait.__enter__()
        assert not wait.advance()
    assert store.release(FILE, "holder")
    assert waits[0].advance()
    waits[0].__exit__(None, None, None)
    return waits


def test_the_successor_of_a_head_that_took_the_lock_knows_it_is_first_without_a_queue_read(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits = _first_of_fifty_took_the_lock_and_left(store)
    assert store.release(FILE, "w0")
    counting = _Counting(store._dir)
    with monkeypatch.context() as patch:
        counting.wrap(patch)
        assert waits[1].advance()
    assert "queue_entries" not in counting.calls
    assert "queue_order" not in counting.calls
    for wait in waits[1:]:
        wait.__exit__(None, None, None)


def test_a_release_whose_head_has_not_staged_its_grant_yet_frees_the_lock_without_a_queue_read(
    store: LockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process that hands the lock on at once (each waiter releases as soon as it returns)
    # releases before its just-stamped successor has run: nothing is staged to hand over, so
    # the lock is freed, and the successor, still first, needs no search of the queue.
    waits = _first_of_fifty_took_the_lock_and_left(store)
    counting = _Counting(store._dir)
    with monkeypatch.context() as patch:
        counting.wrap(patch)
        assert store.release(FILE, "w0")
    assert "queue_entries" not in counting.calls
    assert "queue_order" not in counting.calls
    assert store.holder(FILE) is None
    assert waits[1].advance()  # the lock freed for it, it takes it in its turn
    assert store.holder(FILE) == "w1"
    assert [w.agent_id for w in store.waiters(FILE)] == [f"w{n}" for n in range(2, 50)]
    assert store.release(FILE, "w1")
    for wait in waits[1:]:
        wait.__exit__(None, None, None)
