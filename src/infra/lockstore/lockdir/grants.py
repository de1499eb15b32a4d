"""A store's grants: taking a lock now, giving it back, and what the store remembers of the
grants it made for their release: each grant's token, the key spelling it was asked by, and
the waiter that was next when a wait took the lock. Only the tokens are needed (a release
removes its grant by token); the rest are hints that save a canonicalisation or a listing,
dropped when there are too many.

A grant is published with a short record, `@<card>:<acquired at>` (`GrantRecords`), naming a
holder card that holds the rest (the agent, the processes, the key, the checkout) and is
written once per agent and key, so that a grant's record lives in its symlink's inode
(`disk.py`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

from ..errors import CorruptRecordError
from ..liveness import ProcessIdentity, current_process
from ..paths import validate_agent_id
from ..records import holder_card
from . import line
from .disk import CARD_MARK, HolderCards, LockDir
from .keys import LockKeys
from .lock_journal import LockJournal
from .operations import DiskOperations, run

_MAX_HINTS: Final = 4096


class Grants:
    """The grants of one store (shared by its threads): its locks found by `keys` in
    `directory`, taken and given back by the line's recipes run with `operations`, published
    with `records`, journalled in `journal` (None: off)."""

    def __init__(
        self,
        keys: LockKeys,
        directory: LockDir,
        operations: DiskOperations,
        records: GrantRecords,
        journal: LockJournal | None,
    ) -> None:
        self._keys, self._directory, self._operations = keys, directory, operations
        self._records, self._journal = records, journal
        self._tokens: dict[tuple[str, str], str] = {}  # (lock name, agent) -> grant token
        self._by_key: dict[tuple[str, str], tuple[str, str]] = {}
        """(lock key as the caller spelled it, agent) -> (lock name, agent)."""
        self._successors: dict[str, tuple[str, str]] = {}
        """lock name -> (entry, wait token) of the waiter that was next when a wait here took
        the lock from the queue: where its release looks for the first waiter first."""
        self._guard = threading.Lock()

    def remember(self, name: str, agent: str, token: str, key: str) -> None:
        """`agent` holds grant `token` of lock `name`, asked for by `key`."""
        with self._guard:
            self._tokens[(name, agent)] = token
            if len(self._by_key) >= _MAX_HINTS:
                self._by_key.clear()  # a hint only: dropping it costs a canonicalisation
            self._by_key[(key, agent)] = (name, agent)

    def forget(self, name: str, agent: str) -> None:
        """Forget `agent`'s grant of lock `name` (released elsewhere)."""
        with self._guard:
            self._tokens.pop((name, agent), None)

    def take_by_key(self, key: str, agent: str) -> tuple[str, str] | None:
        """(lock name, token) of the grant made here to `agent` for this very spelling of
        the key, forgotten; None when none is known."""
        with self._guard:
            granted = self._by_key.pop((key, agent), None)
            token = None if granted is None else self._tokens.pop(granted, None)
        return None if granted is None or token is None else (granted[0], token)

    def take_token(self, name: str, agent: str) -> str | None:
        """The token of `agent`'s grant of lock `name`, forgotten; None when none is known."""
        with self._guard:
            return self._tokens.pop((name, agent), None)

    def note_successor(self, name: str, successor: tuple[str, str]) -> None:
        if len(self._successors) >= _MAX_HINTS:
            self._successors.clear()  # a hint only: dropping it costs a listing
        self._successors[name] = successor

    def take_successor(self, name: str) -> tuple[str, str] | None:
        """(entry, wait token) of the waiter that was next at lock `name`, forgotten."""
        return self._successors.pop(name, None) if self._successors else None

    # -- taking and giving back --------------------------------------------------------------

    def take(self, name: str, key: str, agent: str) -> bool:
        """Take lock `name` (`key`) for `agent` now, if it is free and nobody alive queues
        for it (or `agent` holds it)."""
        return self.take_fresh(name, key, agent) is not None

    def take_fresh(self, name: str, key: str, agent: str) -> bool | None:
        """`take`, saying whether the grant is new (True) or `agent` held it already
        (False); None when not taken."""
        taken = run(line.take(self._operations, name, agent, self._records.maker(agent, key)))
        if taken is None:
            return None
        token, new = taken
        self.remember(name, agent, token, key)
        if new and self._journal is not None:
            self._journal.granted(token, agent, key)
        return new

    def release(self, filepath: str, agent_id: str) -> bool:
        """Give back `agent_id`'s lock of `filepath`; False, touching nothing, when it does
        not hold it."""
        if type(filepath) is str and type(agent_id) is str:
            # A lock this store granted under this very key needs no canonicalising: the
            # grant's token names the lock, and removal by token succeeds only while that
            # grant is current (else the full path below decides, as for any other path).
            granted = self.take_by_key(filepath, agent_id)
            if granted is not None and self._release(*granted, agent_id, filepath):
                return True
        agent = validate_agent_id(agent_id)
        key, name = self._keys.locate(filepath)
        token = self.take_token(name, agent)
        if token is not None and self._release(name, token, agent, key):
            return True
        try:
            holder = self._directory.read_holder(name)
        except CorruptRecordError:
            return False
        if holder is None or holder.agent_id != agent:
            return False
        return self._release(name, holder.token, agent, key, holder.acquired_at)

    def _release(
        self, name: str, token: str, agent: str, key: str, acquired_at: float | None = None
    ) -> bool:
        # Hands the lock over to the queue's head when it staged its grant (`line.release`).
        hint = self.take_successor(name)
        if self._journal is None:
            return run(line.release(self._operations, name, token, hint))
        # Journalled when the grant is dropped, before the hand-over (operations.py).
        releases = self._operations.releases
        releases[token] = (agent, key, acquired_at)
        try:
            return run(line.release(self._operations, name, token, hint))
        finally:
            releases.pop(token, None)


_MAX_CARDS_KNOWN: Final = 4096


class GrantRecords:
    """The grant records of one store: its holder is `owner` (None: the process that makes
    the grant), its locks are of `namespace`, keyed in the checkout at `root`."""

    def __init__(
        self, cards: HolderCards, owner: ProcessIdentity | None, namespace: str, root: str
    ) -> None:
        self._cards = cards
        self._owner, self._namespace, self._root = owner, namespace, root
        self._known: dict[tuple[str, str], tuple[ProcessIdentity, str]] = {}
        """(agent, key) -> (this process, the holder card its grants name)."""

    def maker(self, agent: str, key: str) -> Callable[[], str]:
        """The record of `agent`'s grants of `key`, made when a grant is."""
        return lambda: f"{CARD_MARK}{self.card(agent, key)}:{time.time()!r}"

    def card(self, agent: str, key: str) -> str:
        """The holder card of `agent`'s grants of `key` made by this process."""
        me = current_process()
        known = self._known.get((agent, key))
        if known is not None and known[0] is me:  # a forked child is another writer
            return known[1]
        text = holder_card(self._owner or me, agent, key, self._namespace, self._root, me)
        card = self._cards.write(text)
        if len(self._known) >= _MAX_CARDS_KNOWN:
            self._known.clear()
        self._known[(agent, key)] = (me, card)
        return card
