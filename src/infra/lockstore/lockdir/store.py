"""`LockStore`: file locks in one private lock directory, for one checkout of a repository.

A lock is (namespace, repository-relative key) (see `checkout.py`): stores opened on two
worktrees of one clone, or on two checkouts given one explicit namespace, share their locks.

The operations are built from the atomic steps of `disk.py` (publish by rename, remove by
token) so that mutual exclusion holds under any interleaving of acquire, release, cleanup
and stale-lock breaking; docs/lock-store.md walks through the interleavings.
Waiters queue in arrival order (`queue.py`) and are woken by push (`wake_hub.py`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from ..checkout import Checkout, open_checkout
from ..errors import CorruptRecordError
from ..journal.causes import abandoned_wait_outcome, operator_cause
from ..journal.files import JournalFiles, journal_files
from ..journal.record import (
    GRANT,
    GRANTED,
    HAND_OVER,
    OPERATOR_RELEASE,
    PASS_OVER,
    RECLAIM,
    RELEASE,
    TIMED_OUT,
    WAIT_BEGIN,
    WAIT_END,
    JournalRecord,
    LockLines,
    process_session,
)
from ..limits import validate_poll_interval, validate_timeout
from ..liveness import ProcessIdentity, current_process, new_token
from ..paths import lock_name, resolve_entry, validate_agent_id
from ..records import (
    HolderRecord,
    LockInfo,
    LostLock,
    Reclamation,
    StoreSnapshot,
    WaiterRecord,
    encode_waiter,
    holder_card,
)
from . import reading, reclamation, reporting, waiting
from .disk import CARD_MARK, LOCK_SUFFIX, QUEUE_SUFFIX, LockDir, default_lock_dir
from .plain_paths import is_plain_file, resolve_plain_entry
from .queue import Place, Queues
from .wake_hub import WakeHub, process_hub

log = logging.getLogger(__name__)

TURN_TIMEOUT_SECONDS: Final = 5.0
"""How long the first waiter may leave a free lock untaken before others pass it over. A
running waiter takes its turn within milliseconds (pushed) or one poll interval; one that
does not is stopped or stuck, and must not block a free file for everyone."""

_MAX_GRANTED_SPELLINGS: Final = 4096
_MAX_PLAIN_FILES: Final = 4096

OnReclaim = Callable[[Reclamation], None]


class LockStore:
    """Locks on files of one repository, kept in one lock directory shared by processes.

    `repo_namespace` is a directory of the checkout (default: the working directory);
    relative file paths are resolved in the checkout's root. `namespace` names the repository
    explicitly (default: `LOCKYARD_NAMESPACE`, else the name derived from the repository; see
    `checkout.py`).

    `use_inotify=False` disables cross-process push wake-ups (waiters in other processes
    are then seen by polling); in-process notifications always work.
    `liveness_interval` is how often a pushed waiter still re-checks on its own, to notice
    holders and queued waiters that died without releasing.
    `turn_timeout` is how long the first waiter of a free lock has to take it before the
    next one that asks passes it over (it is stopped or stuck; see TURN_TIMEOUT_SECONDS).
    `owner` is the process the store's lock records name as holder (default: this process);
    an agent CLI session's server names the CLI process, so the session's locks live as long
    as the CLI does. Queue entries always name this process: the waiting is done here.
    """

    def __init__(
        self,
        repo_namespace: str | os.PathLike[str] | None = None,
        lock_dir: str | os.PathLike[str] | None = None,
        *,
        namespace: str | None = None,
        allow_outside_repo: bool = False,
        use_inotify: bool = True,
        liveness_interval: float = 0.5,
        turn_timeout: float = TURN_TIMEOUT_SECONDS,
        on_reclaim: OnReclaim | None = None,
        owner: ProcessIdentity | None = None,
        read_only: bool = False,
    ) -> None:
        self._owner = owner
        self.checkout: Checkout = open_checkout(repo_namespace, namespace)
        self.namespace: str = self.checkout.namespace
        self.root: str = self.checkout.root
        """This checkout's root: lock keys are relative to it."""
        self.allow_outside_repo = allow_outside_repo
        self._dir = LockDir(
            lock_dir if lock_dir is not None else default_lock_dir(), read_only=read_only
        )
        self.lock_dir: Path = Path(self._dir.path)
        self._journal: JournalFiles | None = None if read_only else journal_files(self.lock_dir)
        """The journal's writer (journal/files.py), shared by the stores of this process;
        None when it is off (LOCKYARD_JOURNAL=off) or the store only reads."""
        self._use_inotify = use_inotify
        self.liveness_interval = liveness_interval
        self.turn_timeout = turn_timeout
        self._queues = Queues(self._dir, turn_timeout=turn_timeout)
        self._queues.on_pass_over = self._passed_over
        self._on_reclaim: OnReclaim = self._reclaimed
        self._told_of_reclaims = on_reclaim
        self._lines: tuple[ProcessIdentity, LockLines] | None = None
        """This process's encoder of this store's lock-path records (a forked child makes
        its own: the records name the process)."""
        self._since: dict[str, float] = {}
        """grant token -> when it was granted, for the grants made here: the journal's `held`
        of their release (a hint: dropped when it grows past bounds, or the grant is
        released elsewhere)."""
        self._grants: dict[tuple[str, str], str] = {}  # (lock name, agent) -> grant token
        self._granted: dict[tuple[str, str], tuple[str, str]] = {}
        """(lock key, agent) -> (lock name, agent) of the grants made here: `release` of a
        key this store granted skips canonicalising it (see release)."""
        self._grants_guard = threading.Lock()
        self._cards: dict[tuple[str, str], tuple[ProcessIdentity, str]] = {}
        """(agent, key) -> (this process, the holder card its grants name)."""
        self._plain_files: dict[str, tuple[bytes, str, str]] = {}
        """filepath -> (the absolute path resolved, key, lock name) of paths that named an
        existing file reached without symlinks: while the kernel still walks that path
        without meeting a symlink to a file that is not a directory, the key is the same
        (see _locate)."""

    @property
    def _hub(self) -> WakeHub:
        return process_hub()  # looked up each time: a forked child has its own

    def __repr__(self) -> str:
        return (
            f"LockStore(namespace={self.namespace!r}, root={self.root!r}, "
            f"lock_dir={str(self.lock_dir)!r})"
        )

    def close(self) -> None:
        """Close the lock directory handle (also done when the store is garbage-collected)."""
        self._dir.close()

    @property
    def location(self) -> str:
        return str(self.lock_dir)

    def journal_write(self, record: JournalRecord) -> None:
        """Append a record to the lock directory's journal (a deadlock, a denied write); never
        raises (see journal/files.py for what happens when it cannot be written). A record
        with no `session` is stamped with this process's."""
        if self._journal is None:
            return
        if not record.session:  # made by a caller that left who-wrote-it to the store
            me = current_process()
            record.session = process_session(me.pid, me.start_time)
            record.pid, record.host = me.pid, me.host
        self._journal.append(record)

    def _record(
        self, kind: str, agent: str, key: str, *,
        waited: float | None = None, held: float | None = None, outcome: str | None = None,
        at: float | None = None,
    ) -> None:  # fmt: skip
        """Journal one change of a lock of this store's namespace, made now (`at`) by this
        process (one write; nothing when the journal is off)."""
        writer = self._journal
        if writer is None:
            return
        me = current_process()
        lines = self._lines
        if lines is None or lines[0] is not me:
            session = process_session(me.pid, me.start_time)
            lines = self._lines = (me, LockLines(self.namespace, session, me.pid, me.host))
        when = time.time() if at is None else at
        writer.append_line(
            lines[1].line(when, kind, agent, key, waited=waited, held=held, outcome=outcome)
        )

    def _record_of(
        self, kind: str, agent: str, key: str, namespace: str, at: float | None = None,
        **more: object,
    ) -> None:  # fmt: skip
        """Journal a rarer change (a reclaim, a pass-over, an operator's release), in any
        namespace."""
        writer = self._journal
        if writer is None:
            return
        me = current_process()
        session = process_session(me.pid, me.start_time)
        writer.append(
            JournalRecord(time.time() if at is None else at, kind, namespace, agent, key,
                          session, me.pid, me.host, **more)  # type: ignore[arg-type]
        )  # fmt: skip

    def _granted_now(self, token: str, kind: str, agent: str, key: str) -> None:
        if self._journal is None:
            return
        if len(self._since) >= _MAX_GRANTED_SPELLINGS:
            self._since.clear()
        self._since[token] = now = time.time()
        self._record(kind, agent, key, at=now)

    def _released(
        self, token: str, agent: str, key: str, acquired_at: float | None,
        namespace: str | None = None,
    ) -> None:  # fmt: skip
        """Journal the release of grant `token` (an operator's inside `operator_release`)."""
        if self._journal is None:
            return
        since = self._since.pop(token, acquired_at)
        now = time.time()
        held = None if since is None else max(now - since, 0.0)
        operator = operator_cause()
        if operator is not None:
            self._record_of(OPERATOR_RELEASE, agent, key, namespace or self.namespace,
                            held=held, other=operator)  # fmt: skip
        elif namespace is None or namespace == self.namespace:
            self._record(RELEASE, agent, key, held=held, at=now)
        else:
            self._record_of(RELEASE, agent, key, namespace, held=held)

    def _reclaimed(self, reclaimed: Reclamation) -> None:
        holder = reclaimed.holder
        self._record_of(
            RECLAIM, holder.agent_id, holder.lock_path, holder.namespace, reclaimed.reclaimed_at,
            held=max(reclaimed.reclaimed_at - holder.acquired_at, 0.0),
            other=reclaimed.reclaimed_by_agent, reason=reclaimed.reason,
        )  # fmt: skip
        if self._told_of_reclaims is not None:
            self._told_of_reclaims(reclaimed)

    def _passed_over(self, waiter: WaiterRecord) -> None:
        self._record_of(
            PASS_OVER, waiter.agent_id, waiter.lock_path, waiter.namespace,
            reason=f"it left its turn at the free lock untaken for over {self.turn_timeout:g}s",
        )  # fmt: skip

    # A lock directory issues no fencing numbers, and a grant is lost only by release or
    # proof of death, which the holder's own calls see: nothing to report.
    def grant_fence(self, filepath: str, agent_id: str) -> int | None:
        return None

    def stale_grant(self, filepath: str, agent_id: str) -> str | None:
        return None

    def take_lost_locks(self, agent_id: str) -> list[LostLock]:
        return []

    def __enter__(self) -> LockStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- keys ------------------------------------------------------------------------------

    def canonicalize(self, filepath: str) -> str:
        """The repository-relative lock key of `filepath` (`__name__` keys as they are)."""
        return self._locate(filepath)[0]

    def _locate(self, filepath: str) -> tuple[str, str]:
        """(key, lock name) of `filepath`.

        A path that last resolved to an existing file without meeting a symlink resolves
        to the same key for as long as that is still so, which one system call checks
        (`is_plain_file`: the kernel walks the whole path again, so a component replaced by
        a symlink, a file removed or replaced by a directory all take the full resolution
        below). Only the string work is remembered, never what the file system said.
        """
        if type(filepath) is str:
            known = self._plain_files.get(filepath)
            if known is not None and is_plain_file(known[0]):
                return known[1], known[2]
        plain: list[str] = []

        def resolve(path: str) -> tuple[str, bool]:
            found = resolve_plain_entry(path)
            if found is None:
                return resolve_entry(path)
            resolved, is_dir, exists = found
            if exists and not is_dir:
                plain.append(path)
            return resolved, is_dir

        key = self.checkout.key(
            filepath, allow_outside_repo=self.allow_outside_repo, resolve=resolve
        )
        name = lock_name(self.namespace, key)
        # A `\\$` in the path may be read as `$` depending on which files exist (see
        # unescape_dollars): such a spelling is resolved every time.
        if plain and type(filepath) is str and "\\$" not in filepath:
            if len(self._plain_files) >= _MAX_PLAIN_FILES:
                self._plain_files.clear()
            self._plain_files[filepath] = (os.fsencode(plain[0]), key, name)
        return key, name

    def lock_topic(self, name: str) -> str:
        return f"{self._dir.path}/{name}{LOCK_SUFFIX}"

    # -- taking and giving back --------------------------------------------------------------

    def try_lock(self, filepath: str, agent_id: str) -> bool:
        """Take the lock now if it is free and nobody alive queues for it (or you hold it)."""
        agent = validate_agent_id(agent_id)
        key, name = self._locate(filepath)
        return self.take(name, key, agent, unless=self._queues.reserved)

    # The methods that take a lock `name` (the hashed file-system name, not a path) are the
    # building blocks of the path API and of waits; callers outside the lock store use the
    # path API.

    def take(
        self,
        name: str,
        key: str,
        agent: str,
        *,
        unless: Callable[[str], bool] | None = None,
        staged: str | None = None,
    ) -> bool:
        """One attempt at lock `name`; reclaims it first when its holder is provably dead.

        A free lock is left alone when `unless(name)` says so: `try_lock` passes the queue's
        check that a waiter has the turn (the head of the queue, which has it, passes none).
        `staged`: the token of the grant the queue's head staged (`stage`); a release may
        have handed it over already, else it is what the head publishes.
        """
        if staged is not None and self.handed_over(name, key, agent, staged):
            return True
        # A newcomer's usual case first: nobody queues, so publish at once. The publishing
        # rename fails while anybody holds the lock; only then is the holder read (below),
        # so a free lock costs no look at the lock entry. With a queue, the holder is read
        # first: an agent that already holds the lock keeps it even while others queue. The
        # head of the queue (no `unless`) looks first instead: it mostly re-checks a lock
        # that is still held, and a publish that fails still writes the lock directory
        # (waking everyone who watches it, and showing to readers that expect no change).
        newcomer_at_a_free_queue = unless is not None and not self._dir.exists(name + QUEUE_SUFFIX)
        if newcomer_at_a_free_queue and self._publish(name, key, agent):
            return True
        for _attempt in range(8):
            if self._dir.exists(name + LOCK_SUFFIX):
                try:
                    holder = self._read_holder(name)
                except CorruptRecordError:
                    return False  # held by something unreadable: never guess, never break
                if holder is not None:
                    if holder.agent_id == agent and not reclamation.provably_dead(holder):
                        # Held by this agent id (this process, or another live one: the lock
                        # belongs to the agent id, see Limits): keep the existing grant.
                        if staged is not None and holder.token != staged:
                            self._dir.withdraw(name, staged)  # not needed any more
                        self._remember(name, agent, holder.token, key)
                        return True
                    # A dead holder's grant is reclaimed, even one of this very agent id: a
                    # restarted agent must not inherit a lock whose liveness still follows
                    # its dead predecessor (anyone could reclaim it from under the new one).
                    if reclamation.reclaim_if_dead(self, name, holder, agent):
                        continue
                    # A grant handed over at a release to a first waiter that has left it
                    # unaccepted past its turn (stopped, stuck) is passed over, as a free
                    # lock's turn is.
                    if unless is not None and self._queues.pass_over_unaccepted(name, holder.token):
                        continue
                    return False
            if unless is not None and unless(name):
                return False
            if staged is not None:
                published = self._dir.publish_staged(name, staged)
                if published is None:  # reaped as debris meanwhile: stage it again
                    self.stage(name, key, agent, staged)
                    continue
                if published:
                    self._remember(name, agent, staged, key)
                    self._since[staged] = time.time()
                    return True
                continue  # taken by someone meanwhile: look at the holder
            if self._publish(name, key, agent):
                return True
        return False

    def handed_over(self, name: str, key: str, agent: str, staged: str) -> bool:
        """Whether a release handed lock `name` over to the grant staged under `staged`
        (then it is this store's grant to release)."""
        if not self._dir.holds(name, staged):
            return False
        self._remember(name, agent, staged, key)
        self._since.setdefault(staged, time.time())
        return True

    def stage(self, name: str, key: str, agent: str, token: str) -> None:
        """Stage the grant a queue's head publishes, or a release hands over to it."""
        self._dir.stage(name, token, f"{CARD_MARK}{self._card(agent, key)}:{time.time()!r}")

    def _publish(self, name: str, key: str, agent: str) -> bool:
        # The grant's record names its holder card (written once per agent and key), so
        # it is short enough to live in the symlink's inode (see lockdir.py).
        record = f"{CARD_MARK}{self._card(agent, key)}:{time.time()!r}"
        token = new_token()
        if not self._dir.publish(name, token, record):
            return False
        self._remember(name, agent, token, key)
        self._granted_now(token, GRANT, agent, key)
        return True

    def _card(self, agent: str, key: str) -> str:
        """The holder card of `agent`'s grants of `key` made by this process."""
        me = current_process()
        known = self._cards.get((agent, key))
        if known is not None and known[0] is me:  # a forked child is another writer
            return known[1]
        text = holder_card(self._owner or me, agent, key, self.namespace, self.root, me)
        card = self._dir.write_card(text)
        if len(self._cards) >= _MAX_GRANTED_SPELLINGS:
            self._cards.clear()
        self._cards[(agent, key)] = (me, card)
        return card

    def release(self, filepath: str, agent_id: str) -> bool:
        """Give back your lock; False, touching nothing, when `agent_id` does not hold it."""
        if type(filepath) is str and type(agent_id) is str:
            # A lock this store granted under this very key needs no canonicalising: the
            # grant's token names the lock, and removal by token succeeds only while that
            # grant is current (else the full path below decides, as for any other path).
            with self._grants_guard:
                granted = self._granted.pop((filepath, agent_id), None)
                token = None if granted is None else self._grants.pop(granted, None)
            if granted is not None and token is not None and self._remove(granted[0], token):
                self._released(token, agent_id, filepath, None)
                return True
        agent = validate_agent_id(agent_id)
        key, name = self._locate(filepath)
        with self._grants_guard:
            token = self._grants.pop((name, agent), None)
        if token is not None and self._remove(name, token):
            self._released(token, agent, key, None)
            return True
        try:
            holder = self._read_holder(name)
        except CorruptRecordError:
            return False
        if holder is None or holder.agent_id != agent:
            return False
        if not self._remove(name, holder.token):
            return False
        self._released(holder.token, agent, key, holder.acquired_at)
        return True

    def _remove(self, name: str, token: str) -> bool:
        # Hands the lock over to the queue's head when it staged its grant (`queue.py`).
        return self._queues.release(name, token)

    def _remember(self, name: str, agent: str, token: str, key: str) -> None:
        with self._grants_guard:
            self._grants[(name, agent)] = token
            if len(self._granted) >= _MAX_GRANTED_SPELLINGS:
                self._granted.clear()  # a hint only: dropping it costs a canonicalisation
            self._granted[(key, agent)] = (name, agent)

    def _forget(self, name: str, agent: str) -> None:
        with self._grants_guard:
            self._grants.pop((name, agent), None)

    # -- waiting ---------------------------------------------------------------------------

    async def acquire_async(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float = 30.0,
        poll_interval_ms: float = 100,
    ) -> bool:
        """Wait (in arrival order) until the lock is yours: True, or False on timeout.

        Cancel-safe: a cancelled wait leaves no lock and no queue entry behind.
        """
        begun = self._begin_wait(filepath, agent_id, timeout_seconds, poll_interval_ms)
        if isinstance(begun, bool):
            return begun
        wait, timeout, agent, key = begun
        started = time.time()
        try:
            granted = await waiting.wait_async(wait, timeout)
        except BaseException:
            self._wait_ended(agent, key, started, None)
            raise
        self._wait_ended(agent, key, started, granted)
        return granted

    def acquire(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float = 30.0,
        poll_interval_ms: float = 100,
    ) -> bool:
        """The blocking twin of `acquire_async`, for threads and scripts."""
        begun = self._begin_wait(filepath, agent_id, timeout_seconds, poll_interval_ms)
        if isinstance(begun, bool):
            return begun
        wait, timeout, agent, key = begun
        started = time.time()
        try:
            granted = waiting.wait(wait, timeout)
        except BaseException:
            self._wait_ended(agent, key, started, None)
            raise
        self._wait_ended(agent, key, started, granted)
        return granted

    def _begin_wait(
        self, filepath: str, agent_id: str, timeout_seconds: float, poll_interval_ms: float
    ) -> bool | tuple[waiting.Waiting, float, str, str]:
        """What both waits do first: check the arguments and try the lock. True: taken;
        False: not, and no time to wait; else the wait to run, its timeout, agent and key."""
        agent = validate_agent_id(agent_id)
        timeout = validate_timeout(timeout_seconds)
        poll = validate_poll_interval(poll_interval_ms)
        key, name = self._locate(filepath)
        if self.take(name, key, agent, unless=self._queues.reserved):
            return True
        if timeout == 0:
            return False
        self._record(WAIT_BEGIN, agent, key)
        return self._waiting(name, key, agent, poll), timeout, agent, key

    def _wait_ended(self, agent: str, key: str, started: float, granted: bool | None) -> None:
        """Journal how a wait ended (granted: None when it was interrupted) and, when it was
        granted, the grant: a hand-over (the lock passed from the holder to the waiter;
        the releaser is in the release just before, `other` is not known here)."""
        if self._journal is None:
            return
        if granted is None:
            outcome = abandoned_wait_outcome(agent)
        else:
            outcome = GRANTED if granted else TIMED_OUT
        waited = max(time.time() - started, 0.0)
        if granted:
            self._record(HAND_OVER, agent, key)
        self._record(WAIT_END, agent, key, outcome=outcome, waited=waited)

    def _waiting(self, name: str, key: str, agent: str, poll: float) -> waiting.Waiting:
        me = current_process()  # the waiting is done here, whoever the store's owner is

        def record_for(ticket: int, token: str) -> str:
            return encode_waiter(me, agent, token, ticket, key, self.namespace, self.root)

        return waiting.Waiting(
            queues=self._queues,
            place=Place(self._queues, self._dir, name, record_for),
            stage=lambda token: self.stage(name, key, agent, token),
            take=lambda token: self.take(name, key, agent, staged=token),
            handed_over=lambda token: self.handed_over(name, key, agent, token),
            holder=lambda: self.current_holder(name),
            lock_topic=self.lock_topic(name),
            lock_dir=self._dir.path,
            push=self._use_inotify,
            poll_interval=poll,
            backstop=self.liveness_interval,
            agent=agent,
            key=key,
        )

    # -- reading (never writes) ------------------------------------------------------------

    def holder_record(self, filepath: str) -> HolderRecord | None:
        _key, name = self._locate(filepath)
        return self._read_holder(name)

    def holder(self, filepath: str) -> str | None:
        record = self.holder_record(filepath)
        return None if record is None else record.agent_id

    def is_locked(self, filepath: str) -> bool:
        try:
            return self.holder_record(filepath) is not None
        except CorruptRecordError:
            return True

    def waiters(self, filepath: str) -> list[WaiterRecord]:
        _key, name = self._locate(filepath)
        return [record for _entry, record in self.read_queue(name)]

    def list_locks(self) -> list[LockInfo]:
        """Every lock in the lock directory (all namespaces), with holder, age and waiters
        (see `reporting.list_locks`)."""
        return reporting.list_locks(self._dir, self.turn_timeout)

    def snapshot(self) -> StoreSnapshot:
        """Holds and live waits of the whole lock directory, for a wait-for graph."""
        return reporting.snapshot(self._dir, self.turn_timeout)

    def _read_holder(self, name: str) -> HolderRecord | None:
        return reading.read_holder(self._dir, name)

    def current_holder(self, name: str) -> HolderRecord | None:
        """The holder of lock `name`, or None when free or unreadable (never raises)."""
        return reading.current_holder(self._dir, name)

    def read_queue(self, name: str) -> list[tuple[str, WaiterRecord]]:
        return reading.read_queue(self._dir, name)

    # The queues' own operations (`queue.Queues`), for reclamation and tests.

    def drop_waiter(self, name: str, entry: str, token: str | None = None) -> None:
        self._queues.drop(name, entry, token)

    def turn_expired(self, name: str, entry: str) -> bool:
        return self._queues.turn_expired(name, entry)

    def pass_over(self, name: str, entry: str, record: WaiterRecord) -> None:
        self._queues.pass_over(name, entry, record)

    # -- cleaning up -----------------------------------------------------------------------

    def cleanup_agent_locks(self, agent_id: str, *, all_namespaces: bool = False) -> list[str]:
        """Release every lock `agent_id` holds (in this namespace, or in all); return the keys."""
        return reclamation.cleanup_agent_locks(self, agent_id, all_namespaces=all_namespaces)

    def reclaim_stale(self) -> list[Reclamation]:
        """Reclaim every lock whose holder is provably dead; drop dead waiters and debris."""
        return reclamation.reclaim_stale(self)

    def remove_unreadable(self) -> list[str]:
        """Remove every lock whose holder record cannot be read (an operator's decision);
        return the lock entries removed (see `reclamation.remove_unreadable`)."""
        return reclamation.remove_unreadable(self)

    def end_stalled_waits(self) -> list[WaiterRecord]:
        """Drop the first waiter of every free lock that left its turn untaken for longer
        than `turn_timeout` (stopped or stuck); return the waits ended."""
        return reclamation.end_stalled_waits(self)

    def end_waits(self, agent_id: str | None) -> list[WaiterRecord]:
        """Drop every queue entry of `agent_id` (of every agent: None), in all namespaces.

        A waiter that is still running finds its entry gone and queues again at the back.
        """
        return reclamation.end_waits(self, agent_id)
