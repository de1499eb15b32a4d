"""`LockStore`: file locks in one private lock directory, for one checkout of a repository.

The public face of the lock directory backend. A lock is (namespace, repository-relative key)
(see `checkout.py`): stores opened on two worktrees of one clone, or on two checkouts given
one explicit namespace, share their locks. Each operation turns a file path into its lock's
name here, and runs the line's decision (`line.py`) on the directory (`operations.py`):
mutual exclusion holds under any interleaving of acquire, release, cleanup and stale-lock
breaking; docs/lock-store.md walks through the interleavings.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from ..checkout import Checkout, open_checkout
from ..errors import CorruptRecordError
from ..journal.files import JournalFiles, journal_files
from ..journal.record import JournalRecord, process_session
from ..limits import validate_poll_interval, validate_timeout
from ..liveness import ProcessIdentity, current_process
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
from . import line, reclamation, reporting
from .activity import last_active, stamp_activity
from .disk import CARD_MARK, LockDir, default_lock_dir
from .lock_journal import LockJournal
from .operations import DiskOperations, OnReclaim, run, wait, wait_async
from .plain_paths import is_plain_file, resolve_plain_entry
from .revocations import post_revocation, take_revocations
from .sleep import Sleeper

TURN_TIMEOUT_SECONDS: Final = 5.0
"""How long the first waiter may leave a free lock untaken before others pass it over. A
running waiter takes its turn within milliseconds (pushed) or one poll interval; one that
does not is stopped or stuck, and must not block a free file for everyone."""

_MAX_GRANTED_SPELLINGS: Final = 4096
_MAX_PLAIN_FILES: Final = 4096


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
        self._read_only = read_only
        self.checkout: Checkout = open_checkout(repo_namespace, namespace)
        self.namespace: str = self.checkout.namespace
        self.root: str = self.checkout.root
        """This checkout's root: lock keys are relative to it."""
        self.allow_outside_repo = allow_outside_repo
        self.directory = LockDir(
            lock_dir if lock_dir is not None else default_lock_dir(), read_only=read_only
        )
        """The lock directory's atomic operations (`disk.py`)."""
        self.lock_dir: Path = Path(self.directory.path)
        self._journal: JournalFiles | None = None if read_only else journal_files(self.lock_dir)
        """The journal's writer (journal/files.py), shared by the stores of this process;
        None when it is off (LOCKYARD_JOURNAL=off) or the store only reads."""
        self._use_inotify = use_inotify
        self.liveness_interval = liveness_interval
        self.turn_timeout = turn_timeout
        self._lock_journal = (
            None
            if self._journal is None
            else LockJournal(self._journal, self.namespace, turn_timeout)
        )
        """The records of this store's own lock changes (`lock_journal.py`); None when off."""
        self.operations = DiskOperations(
            self.directory,
            turn_timeout=turn_timeout,
            on_reclaim=on_reclaim,
            journal=self._lock_journal,
        )
        """The line's operations on that directory (`operations.py`)."""
        self._grants: dict[tuple[str, str], str] = {}  # (lock name, agent) -> grant token
        self._granted: dict[tuple[str, str], tuple[str, str]] = {}
        """(lock key, agent) -> (lock name, agent) of the grants made here: `release` of a
        key this store granted skips canonicalising it (see release)."""
        self._successors: dict[str, tuple[str, str]] = {}
        """lock name -> (entry, wait token) of the waiter that was next when a wait here took
        the lock from the queue: where its release looks for the first waiter first."""
        self._grants_guard = threading.Lock()
        self._cards: dict[tuple[str, str], tuple[ProcessIdentity, str]] = {}
        """(agent, key) -> (this process, the holder card its grants name)."""
        self._plain_files: dict[str, tuple[bytes, str, str]] = {}
        """filepath -> (the absolute path resolved, key, lock name) of paths that named an
        existing file reached without symlinks: while the kernel still walks that path
        without meeting a symlink to a file that is not a directory, the key is the same
        (see _locate)."""

    def __repr__(self) -> str:
        return (
            f"LockStore(namespace={self.namespace!r}, root={self.root!r}, "
            f"lock_dir={str(self.lock_dir)!r})"
        )

    def close(self) -> None:
        """Close the lock directory handle (also done when the store is garbage-collected)."""
        self.directory.close()

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

    # A lock directory issues no fencing numbers, and a grant is lost only by release or
    # proof of death, which the holder's own calls see: nothing to report.
    def grant_fence(self, filepath: str, agent_id: str) -> int | None:
        return None

    def stale_grant(self, filepath: str, agent_id: str) -> str | None:
        return None

    def take_lost_locks(self, agent_id: str) -> list[LostLock]:
        """The locks an operator revoked from `agent_id` since it last asked, with why
        (revocations.py); one failed `rename` when there are none."""
        if self._read_only:
            return []
        return [
            LostLock(filepath=str(notice["filepath"]), fence=None, reason=str(notice["reason"]))
            for notice in take_revocations(self.lock_dir, agent_id)
        ]

    def revoke(self, agent_id: str, reason: str) -> list[str]:
        """Release every lock `agent_id` holds (all namespaces; its waiters get them in
        turn), and tell it why on its next lock call. For an operator: wrap it in
        `journal.causes.operator_release(who)` so the journal names who did it."""
        released = self.cleanup_agent_locks(agent_id, all_namespaces=True)
        post_revocation(self.lock_dir, agent_id, released, reason)
        return released

    # -- activity: when each agent last did anything (activity.py) ----------------------------

    def stamp_activity(self, agent_id: str) -> None:
        """`agent_id` did something now: a heartbeat (one system call; never raises)."""
        if not self._read_only:
            stamp_activity(self.lock_dir, agent_id)

    def last_active(self, agent_id: str) -> float | None:
        """When `agent_id` last did anything, by its heartbeats; None: none seen here."""
        return last_active(self.lock_dir, agent_id)

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

    # -- taking and giving back --------------------------------------------------------------

    def try_lock(self, filepath: str, agent_id: str) -> bool:
        """Take the lock now if it is free and nobody alive queues for it (or you hold it)."""
        agent = validate_agent_id(agent_id)
        key, name = self._locate(filepath)
        return self._take(name, key, agent)

    def _take(self, name: str, key: str, agent: str) -> bool:
        taken = run(line.take(self.operations, name, agent, self._grant_record(agent, key)))
        if taken is None:
            return False
        token, new = taken
        self._remember(name, agent, token, key)
        if new and self._lock_journal is not None:
            self._lock_journal.granted(token, agent, key)
        return True

    def _grant_record(self, agent: str, key: str) -> Callable[[], str]:
        """The record of `agent`'s grants of `key`, made when a grant is: it names the holder
        card (written once per agent and key), so it is short enough to live in the
        symlink's inode (see disk.py)."""
        return lambda: f"{CARD_MARK}{self._card(agent, key)}:{time.time()!r}"

    def _card(self, agent: str, key: str) -> str:
        """The holder card of `agent`'s grants of `key` made by this process."""
        me = current_process()
        known = self._cards.get((agent, key))
        if known is not None and known[0] is me:  # a forked child is another writer
            return known[1]
        text = holder_card(self._owner or me, agent, key, self.namespace, self.root, me)
        card = self.directory.cards.write(text)
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
            if (
                granted is not None
                and token is not None
                and self._release(granted[0], token, agent_id, filepath)
            ):
                return True
        agent = validate_agent_id(agent_id)
        key, name = self._locate(filepath)
        with self._grants_guard:
            token = self._grants.pop((name, agent), None)
        if token is not None and self._release(name, token, agent, key):
            return True
        try:
            holder = self.directory.read_holder(name)
        except CorruptRecordError:
            return False
        if holder is None or holder.agent_id != agent:
            return False
        return self._release(name, holder.token, agent, key, holder.acquired_at)

    def _release(
        self, name: str, token: str, agent: str, key: str, acquired_at: float | None = None
    ) -> bool:
        # Hands the lock over to the queue's head when it staged its grant (`line.release`).
        hint = self._successors.pop(name, None) if self._successors else None
        if self._lock_journal is None:
            return run(line.release(self.operations, name, token, hint))
        # Journalled when the grant is dropped, before the hand-over (operations.py).
        releases = self.operations.releases
        releases[token] = (agent, key, acquired_at)
        try:
            return run(line.release(self.operations, name, token, hint))
        finally:
            releases.pop(token, None)

    def _remember(self, name: str, agent: str, token: str, key: str) -> None:
        with self._grants_guard:
            self._grants[(name, agent)] = token
            if len(self._granted) >= _MAX_GRANTED_SPELLINGS:
                self._granted.clear()  # a hint only: dropping it costs a canonicalisation
            self._granted[(key, agent)] = (name, agent)

    def forget(self, name: str, agent: str) -> None:
        """Forget the grant of lock `name` remembered for `agent` (it was released elsewhere)."""
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
        place, sleeper, timeout, began = begun
        try:
            got = await wait_async(line.wait(self.operations, place), sleeper, timeout)
        except BaseException:
            self._wait_interrupted(place, began)
            raise
        return self.record_wait(place, got, began)

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
        place, sleeper, timeout, began = begun
        try:
            got = wait(line.wait(self.operations, place), sleeper, timeout)
        except BaseException:
            self._wait_interrupted(place, began)
            raise
        return self.record_wait(place, got, began)

    def _begin_wait(
        self, filepath: str, agent_id: str, timeout_seconds: float, poll_interval_ms: float
    ) -> bool | tuple[line.Place, Sleeper, float, float]:
        """What both waits do first: check the arguments and try the lock. True: taken;
        False: not, and no time to wait; else the place in line, how it sleeps, for how long
        at most, and when the wait began (journalled)."""
        agent = validate_agent_id(agent_id)
        timeout = validate_timeout(timeout_seconds)
        poll = validate_poll_interval(poll_interval_ms)
        key, name = self._locate(filepath)
        if self._take(name, key, agent):
            return True
        if timeout == 0:
            return False
        journal = self._lock_journal
        began = time.time() if journal is None else journal.wait_began(agent, key)
        return (*self.line_up(name, key, agent, poll), timeout, began)

    def line_up(self, name: str, key: str, agent: str, poll: float) -> tuple[line.Place, Sleeper]:
        """A wait for lock `name` (`key`) by `agent`, not begun: its place in line (the line's
        `wait` recipe queues it) and how it sleeps (polling every `poll` seconds without
        push wake-ups). The tests drive one look at a time with these."""
        me = current_process()  # the waiting is done here, whoever the store's owner is

        def record_for(ticket: int, token: str) -> str:
            return encode_waiter(me, agent, token, ticket, key, self.namespace, self.root)

        place = line.Place(name, key, agent, record_for, self._grant_record(agent, key))
        sleeper = Sleeper(
            self.directory,
            name,
            push=self._use_inotify,
            poll_interval=poll,
            backstop=self.liveness_interval,
        )
        return place, sleeper

    def record_wait(self, place: line.Place, got: bool, began: float | None = None) -> bool:
        """Keep what a wait that ended with the lock (`got`) leaves for the release: its
        grant's token, and the waiter that was next; journal how a wait begun at `began`
        ended. Returns `got`."""
        if began is not None and self._lock_journal is not None:
            self._lock_journal.wait_ended(place.agent, place.key, began, got, place.held)
        if got:
            self._remember(place.name, place.agent, place.held, place.key)
            if place.successor is not None:
                if len(self._successors) >= _MAX_GRANTED_SPELLINGS:
                    self._successors.clear()  # a hint only: dropping it costs a listing
                self._successors[place.name] = place.successor
        return got

    def _wait_interrupted(self, place: line.Place, began: float) -> None:
        """Journal a wait that ended by an interruption (cancelled, given way)."""
        if self._lock_journal is not None:
            self._lock_journal.wait_ended(place.agent, place.key, began, None)

    # -- reading (never writes) ------------------------------------------------------------

    def holder_record(self, filepath: str) -> HolderRecord | None:
        _key, name = self._locate(filepath)
        return self.directory.read_holder(name)

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
        return [record for _entry, record in self.directory.queues.read_queue(name)]

    def list_locks(self) -> list[LockInfo]:
        """Every lock in the lock directory (all namespaces), with holder, age and waiters
        (see `reporting.list_locks`)."""
        return reporting.list_locks(self.directory, self.turn_timeout)

    def snapshot(self) -> StoreSnapshot:
        """Holds and live waits of the whole lock directory, for a wait-for graph."""
        return reporting.snapshot(self.directory, self.turn_timeout)

    # -- cleaning up -----------------------------------------------------------------------

    def cleanup_agent_locks(self, agent_id: str, *, all_namespaces: bool = False) -> list[str]:
        """Release every lock `agent_id` holds (in this namespace, or in all); return the keys."""
        agent = validate_agent_id(agent_id)
        namespace = None if all_namespaces else self.namespace
        released = reclamation.release_all(self.operations, self.directory, agent, namespace)
        for name, holder in released.items():
            self.forget(name, agent)
            if self._lock_journal is not None:
                self._lock_journal.released(
                    holder.token, agent, holder.lock_path, holder.acquired_at, holder.namespace
                )
        return sorted(holder.lock_path for holder in released.values())

    def reclaim_stale(self) -> list[Reclamation]:
        """Reclaim every lock whose holder is provably dead; drop dead waiters and debris."""
        return reclamation.reclaim_stale(self.operations, self.directory)

    def remove_unreadable(self) -> list[str]:
        """Remove every lock whose holder record cannot be read (an operator's decision);
        return the lock entries removed (see `reclamation.remove_unreadable`)."""
        return reclamation.remove_unreadable(self.operations, self.directory)

    def end_stalled_waits(self) -> list[WaiterRecord]:
        """Drop the first waiter of every free lock that left its turn untaken for longer
        than `turn_timeout` (stopped or stuck); return the waits ended."""
        return reclamation.end_stalled_waits(self.operations, self.directory)

    def end_waits(self, agent_id: str | None) -> list[WaiterRecord]:
        """Drop every queue entry of `agent_id` (of every agent: None), in all namespaces.

        A waiter that is still running finds its entry gone and queues again at the back.
        """
        return reclamation.end_waits(self.operations, self.directory, agent_id)
