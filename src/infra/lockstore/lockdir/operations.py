"""The line's operations carried out on one lock directory, and the loops that run its recipes.

`DiskOperations` is `line.Operations` on disk: most operations are the directory's own
(`disk.py`: its locks, stagings and queues), bound as they are (a recipe's operation is one
call, no wrapper in between); the rest look at processes (`liveness.py`), wake waiters
(`sleep.py`) or report.

`run` carries out a recipe that never sleeps (a take, a release, a clean-up); `wait` and
`wait_async` carry out a waiting recipe, the same loop around it but for the sleeping
(`sleep.Sleeper`): a thread blocks, an anyio task awaits. An operation that raises raises
inside the recipe, at its `yield`, so the recipe catches what it expects; a wait interrupted
while asleep (cancelled, KeyboardInterrupt) is interrupted inside the recipe too, which leaves
the line (synchronously) before the interruption goes on.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import TypeVar

from ..errors import LockDirFullError
from ..liveness import Liveness, is_this_process, new_token
from ..records import HolderRecord, Reclamation, WaiterRecord
from .disk import LOCK_SUFFIX, QUEUE_SUFFIX, LockDir
from .line import SLEEP, Accepted, Recipe, Record
from .lock_journal import LockJournal
from .sleep import Sleeper, process_hub, ring

log = logging.getLogger(__name__)

T = TypeVar("T")

OnReclaim = Callable[[Reclamation], None]


class DiskOperations:
    """`line.Operations` on the lock directory `directory`."""

    def __init__(
        self,
        directory: LockDir,
        *,
        turn_timeout: float,
        on_reclaim: OnReclaim | None = None,
        journal: LockJournal | None = None,
    ) -> None:
        self.turn_timeout = turn_timeout
        self._dir = directory
        self._on_reclaim = on_reclaim
        self._journal = journal
        self._path = directory.path
        queues = directory.queues
        self.lock_exists = directory.lock_exists
        self.read_holder = directory.read_holder
        self.holds = directory.holds
        self.publish = directory.publish
        self.drop_grant = directory.drop_grant if journal is None else self._drop_and_record
        self.releases: dict[str, tuple[str, str, float | None]] = {}
        """grant token -> (agent, lock key, when granted if not here) of a release under way
        here: journalled the moment its grant is dropped (`_drop_and_record`)."""
        self.free = directory.free
        self.make_staging = directory.stagings.make_staging
        self.write_staging = directory.stagings.write_staging
        self.rename_staging = directory.stagings.rename_staging
        self.unstage = directory.stagings.unstage
        self.queue_exists = queues.queue_exists
        self.enqueue = queues.enqueue
        self.queue_order = queues.queue_order
        self.checked_queue_order = queues.checked_queue_order
        self.queued = queues.queued
        self.entry_token = queues.entry_token
        self.waiter = queues.waiter
        self.dequeue = queues.dequeue
        self.stamp_turn = queues.stamp_turn
        self.turn_stamp = queues.turn_stamp
        self.new_token = new_token

    def turn_over(self, name: str, entry: str) -> bool:
        started = self._dir.queues.turn_started(name, entry)
        return started is not None and time.time() - started >= self.turn_timeout

    def liveness(self, record: Record) -> Liveness:
        if is_this_process(record.pid, record.start_time):
            return Liveness.ALIVE  # no need to ask /proc
        return record.liveness()[0]

    def ring(self, name: str, token: str) -> None:
        if not process_hub().heads.is_asleep(token):  # one asleep here hears `lock_changed`
            ring(self._dir, name, token)

    def claim_asleep(self, token: str) -> str | None:
        return process_hub().heads.claim(token)

    def let_wake(self, token: str, accepted: Accepted | None) -> None:
        process_hub().heads.let_wake(token, accepted)

    def lock_changed(self, name: str) -> None:
        process_hub().notify(f"{self._path}/{name}{LOCK_SUFFIX}")

    def entry_gone(self, name: str, entry: str) -> None:
        process_hub().notify(f"{self._path}/{name}{QUEUE_SUFFIX}/{entry}")

    def _drop_and_record(self, name: str, token: str) -> bool:
        """`drop_grant`, and the journal's release record as soon as it dropped: before the
        lock is handed on, so the successor's hand-over (written by its own wait, maybe in
        another thread or process) never comes before the release that caused it."""
        dropped = self._dir.drop_grant(name, token)
        if dropped and self._journal is not None:
            release = self.releases.pop(token, None)
            if release is not None:
                self._journal.released(token, *release)
        return dropped

    def reclaimed(self, name: str, holder: Record, by_agent: str | None) -> Reclamation:
        assert isinstance(holder, HolderRecord)  # what `LockDir.read_holder` reads
        _liveness, reason = holder.liveness()
        reclamation = Reclamation(
            lock_path=holder.lock_path,
            namespace=holder.namespace,
            holder=holder,
            reason=reason,
            reclaimed_by_pid=os.getpid(),
            reclaimed_by_agent=by_agent,
        )
        log.warning(
            "reclaimed stale lock %s of agent %s (%s)", holder.lock_path, holder.agent_id, reason
        )
        if self._journal is not None:
            self._journal.reclaimed(reclamation)
        if self._on_reclaim is not None:
            self._on_reclaim(reclamation)
        return reclamation

    def waits_without_space(self, key: str, agent: str, error: LockDirFullError) -> None:
        log.warning("agent %s keeps waiting for %s: %s", agent, key, error)

    def passed_over(self, name: str, waiter: Record) -> None:
        assert isinstance(waiter, WaiterRecord)  # what `QueueEntries.waiter` reads
        log.warning(
            "passed over waiter %s (pid %d) on %s: it did not take its turn at the lock for "
            "over %gs",
            waiter.agent_id,
            waiter.pid,
            waiter.lock_path,
            self.turn_timeout,
        )
        if self._journal is not None:
            self._journal.passed_over(waiter)


def run(recipe: Recipe[T]) -> T:
    """Carry out a recipe that never sleeps, operation by operation, here and now. Every
    exception goes into the recipe (an interrupt included): a release that claimed a head
    asleep here gives it its verdict before the exception goes on (`line._accept_for`)."""
    try:
        op = next(recipe)
        while True:
            try:
                result = op[0](*op[1:])
            except BaseException as error:
                op = recipe.throw(error)
            else:
                op = recipe.send(result)
    except StopIteration as done:
        value: T = done.value
        return value


def wait(recipe: Recipe[bool], sleeper: Sleeper, seconds: float) -> bool:
    """Carry out a waiting recipe in this thread, sleeping where it says, for at most
    `seconds` of waiting."""
    deadline = time.monotonic() + seconds
    try:
        op = next(recipe)
        while True:
            try:
                result = sleeper.sleep(op[1], deadline) if op[0] is SLEEP else op[0](*op[1:])
            except BaseException as error:
                op = recipe.throw(error)
            else:
                op = recipe.send(result)
    except StopIteration as done:
        got: bool = done.value
        return got
    finally:
        sleeper.close()


async def wait_async(recipe: Recipe[bool], sleeper: Sleeper, seconds: float) -> bool:
    """`wait` for anyio tasks: the task awaits where the recipe sleeps; cancel-safe (the
    recipe leaves the line before the cancellation goes on)."""
    deadline = time.monotonic() + seconds
    try:
        op = next(recipe)
        while True:
            try:
                if op[0] is SLEEP:
                    result = await sleeper.sleep_async(op[1], deadline)
                else:
                    result = op[0](*op[1:])
            except BaseException as error:
                op = recipe.throw(error)
            else:
                op = recipe.send(result)
    except StopIteration as done:
        got: bool = done.value
        return got
    finally:
        sleeper.close()
