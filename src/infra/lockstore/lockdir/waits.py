"""A store's waits, from their place in line to what they leave behind: each waiter's
`line.Place` and `Sleeper`, the run of the line's `wait` recipe (blocking or async: only the
sleeping differs, `operations.py`), and at its end the grant kept for its release
(`grants.py`) and the journal's record of how it ended (`lock_journal.py`)."""

from __future__ import annotations

import time

from ..limits import validate_poll_interval, validate_timeout
from ..liveness import current_process
from ..paths import validate_agent_id
from ..records import encode_waiter
from . import line
from .disk import LockDir
from .grants import GrantRecords, Grants
from .keys import LockKeys
from .lock_journal import LockJournal
from .operations import DiskOperations, wait, wait_async
from .sleep import Sleeper


class Waits:
    """The waits of one store on `directory`, its locks found by `keys` (locks of
    `namespace`, keyed in the checkout at `root`). `push`: sleep on push wake-ups across
    processes (else poll); `backstop`: how often a pushed waiter still re-checks on its own."""

    def __init__(
        self,
        keys: LockKeys,
        directory: LockDir,
        operations: DiskOperations,
        grants: Grants,
        grant_records: GrantRecords,
        journal: LockJournal | None,
        *,
        namespace: str,
        root: str,
        push: bool,
        backstop: float,
    ) -> None:
        self._keys, self._directory, self._operations = keys, directory, operations
        self._grants, self._grant_records, self._journal = grants, grant_records, journal
        self._namespace, self._root = namespace, root
        self._push, self._backstop = push, backstop

    def begin(
        self, filepath: str, agent_id: str, timeout_seconds: float, poll_interval_ms: float
    ) -> bool | tuple[line.Place, Sleeper, float, float]:
        """What a wait does first: check the arguments and try the lock. True: taken;
        False: not, and no time to wait; else the place in line, how it sleeps, for how long
        at most, and when the wait began (journalled)."""
        agent = validate_agent_id(agent_id)
        return self.begin_at(self._keys.locate(filepath), agent, timeout_seconds, poll_interval_ms)

    def begin_at(
        self, located: tuple[str, str], agent: str, timeout_seconds: float, poll_interval_ms: float
    ) -> bool | tuple[line.Place, Sleeper, float, float]:
        """`begin` for the lock `located` ((key, name), `LockKeys.locate`) by a valid `agent`."""
        timeout = validate_timeout(timeout_seconds)
        poll = validate_poll_interval(poll_interval_ms)
        key, name = located
        if self._grants.take(name, key, agent):
            return True
        if timeout == 0:
            return False
        began = self.began(agent, key)
        return (*self.line_up(name, key, agent, poll), timeout, began)

    def line_up(self, name: str, key: str, agent: str, poll: float) -> tuple[line.Place, Sleeper]:
        """A wait for lock `name` (`key`) by `agent`, not begun: its place in line (the line's
        `wait` recipe queues it) and how it sleeps (polling every `poll` seconds without
        push wake-ups). The tests drive one look at a time with these."""
        me = current_process()  # the waiting is done here, whoever the store's owner is
        namespace, root = self._namespace, self._root

        def record_for(ticket: int, token: str) -> str:
            return encode_waiter(me, agent, token, ticket, key, namespace, root)

        place = line.Place(name, key, agent, record_for, self._grant_records.maker(agent, key))
        sleeper = Sleeper(
            self._directory, name, push=self._push, poll_interval=poll, backstop=self._backstop
        )
        return place, sleeper

    def began(self, agent: str, key: str) -> float:
        """Now, when `agent` begins to wait for `key` (journalled)."""
        return time.time() if self._journal is None else self._journal.wait_began(agent, key)

    def run(self, place: line.Place, sleeper: Sleeper, timeout: float, began: float) -> bool:
        """Wait in line, sleeping with `sleeper` for at most `timeout` seconds: True when the
        lock is ours."""
        try:
            got = wait(line.wait(self._operations, place), sleeper, timeout)
        except BaseException:
            self._interrupted(place, began)
            raise
        return self.record_wait(place, got, began)

    async def run_async(
        self, place: line.Place, sleeper: Sleeper, seconds: float, began: float
    ) -> bool:
        """`run` on the event loop (cancel-safe: a cancelled wait leaves nothing behind)."""
        try:
            got = await wait_async(line.wait(self._operations, place), sleeper, seconds)
        except BaseException:
            self._interrupted(place, began)
            raise
        return self.record_wait(place, got, began)

    def record_wait(self, place: line.Place, got: bool, began: float | None = None) -> bool:
        """Keep what a wait that ended with the lock (`got`) leaves for the release: its
        grant's token, and the waiter that was next; journal how a wait begun at `began`
        ended. Returns `got`."""
        if began is not None and self._journal is not None:
            self._journal.wait_ended(place.agent, place.key, began, got, place.held)
        if got:
            self._grants.remember(place.name, place.agent, place.held, place.key)
            if place.successor is not None:
                self._grants.note_successor(place.name, place.successor)
        return got

    def _interrupted(self, place: line.Place, began: float) -> None:
        """Journal a wait that ended by an interruption (cancelled, given way)."""
        if self._journal is not None:
            self._journal.wait_ended(place.agent, place.key, began, None)
