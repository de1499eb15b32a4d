"""Helpers for the tests that drive waits one look at a time on a real lock directory
(test_lockstore_handover.py, test_lockstore_queue_protocol.py and others): each wait is the
line's own `wait` recipe, carried out operation by operation as the store does, but stopped
where it would sleep, so any interleaving of looks, releases, cancels and `try_lock` calls can
be forced without threads."""

from __future__ import annotations

import os
import time
from typing import Any

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.lockdir import disk, line
from lockyard.infra.lockstore.lockdir.line import SLEEP
from lockyard.infra.lockstore.lockdir.sleep import sleep_through
from lockyard.infra.lockstore.paths import lock_name

FILE = "f.py"
"""The one file every wait here is for."""


class _StopError(Exception):
    """Ends a stepped wait from outside, as a timeout or a cancellation does."""


class SteppedWait:
    """One wait for `filepath`: `look()` runs it until it would sleep (False) or has the
    lock (True); `stop()` ends it as a timeout or a cancellation would."""

    def __init__(self, store: LockStore, agent: str, filepath: str = FILE) -> None:
        self.store = store
        key = store.canonicalize(filepath)
        name = lock_name(store.namespace, key)
        self.place, self.sleeper = store.waits.line_up(name, key, agent, 0.05)
        self._recipe = line.wait(store.operations, self.place)
        self._op: Any = next(self._recipe)
        self.got: bool | None = None
        self.asleep: line.Await | None = None
        # Run until it stands in line, before its first look.
        while self.place.ahead is None:
            self._carry_out()

    def _carry_out(self) -> None:
        """Carry out the pending operation; one that raises raises inside the recipe, as
        the store's runner does."""
        op = self._op
        try:
            result = op[0](*op[1:])
        except Exception as error:
            self._step(error, throw=True)
        else:
            self._step(result)

    def _step(self, result: object, *, throw: bool = False) -> None:
        try:
            if throw:
                assert isinstance(result, BaseException)
                self._op = self._recipe.throw(result)
            else:
                self._op = self._recipe.send(result)
        except StopIteration as done:
            self.got = self.store.waits.record_wait(self.place, done.value)
            self.sleeper.close()

    def look(self) -> bool:
        """Look (again): True when the lock is ours (the wait is over), False when the wait
        sleeps (subscribed to what it waits for)."""
        if self.asleep is not None:
            self.asleep = None
            self._step(True)  # woken, or a re-check is due
        while self.got is None:
            if self._op[0] is SLEEP:
                if sleep_through(self.sleeper.sleep(self._op[1], time.monotonic())):
                    self._step(True)  # a new subscription looks again at once
                    continue
                self.asleep = self._op[1]
                return False
            self._carry_out()
        return self.got

    def stop(self) -> None:
        """End the wait as a timeout (asleep) or a cancellation (anywhere else) does."""
        if self.got is not None:
            return
        if self.asleep is not None:
            self.asleep = None
            self._step(False)  # the time is up
        else:
            try:
                self._op = self._recipe.throw(_StopError())
            except _StopError:
                self.got = False
        while self.got is None:
            try:
                self._carry_out()
            except _StopError:
                self.got = False
        self.sleeper.close()

    def rung(self) -> bool:
        """Whether something woke its waker since it went to sleep."""
        return self.sleeper.waker.wait(0)


def name_of(store: LockStore) -> str:
    """The lock name of `FILE` in `store`'s lock directory."""
    return lock_name(store.namespace, store.canonicalize(FILE))


def queued(store: LockStore, agent: str) -> SteppedWait:
    """A wait for `FILE` that has joined the queue and not looked yet."""
    return SteppedWait(store, agent)


def looked_once(store: LockStore, agent: str) -> SteppedWait:
    """A queued wait whose first look did not get the lock: first in line at a held lock, it
    has staged its grant; behind another waiter, it waits its turn."""
    wait = queued(store, agent)
    assert not wait.look()
    return wait


def waiting_agents(store: LockStore) -> list[str]:
    """The agents in `FILE`'s queue, in order."""
    return [w.agent_id for w in store.waiters(FILE)]


def leftovers(store: LockStore) -> list[str]:
    """Staged grants and doorbells left in the lock directory."""
    return [
        entry
        for entry in os.listdir(store.lock_dir)
        if disk.STAGING_MARK in entry or disk.BELL_MARK in entry
    ]
