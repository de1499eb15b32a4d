"""Helpers for the tests of a release handing its lock over to the queue's head, in another
process (test_lockstore_handover.py) or in this one (test_lockstore_in_process_handover.py):
waits on one file driven round by round, and what they leave in the lock directory."""

from __future__ import annotations

import os

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.lockdir import disk, waiting
from lockyard.infra.lockstore.paths import lock_name

FILE = "f.py"
"""The one file every wait here is for."""


def name_of(store: LockStore) -> str:
    """The lock name of `FILE` in `store`'s lock directory."""
    return lock_name(store.namespace, store.canonicalize(FILE))


def queued(store: LockStore, agent: str) -> waiting.Waiting:
    """A wait for `FILE` that has joined the queue and not looked yet."""
    wait = store._waiting(name_of(store), store.canonicalize(FILE), agent, 0.05)
    wait.__enter__()
    return wait


def looked_once(store: LockStore, agent: str) -> waiting.Waiting:
    """A queued wait whose first look did not get the lock: first in line at a held lock, it
    has staged its grant; behind another waiter, it waits its turn."""
    wait = queued(store, agent)
    assert not wait.advance()
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
