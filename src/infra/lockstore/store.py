"""`LockStore`: file locks in one private lock directory, for one checkout of a repository.

A lock is (namespace, repository-relative key) (see `identity.py`): stores opened on two
worktrees of one clone, or on two checkouts given one explicit namespace, share their locks.

The operations are built from the atomic steps of `lockdir.py` (publish by rename, remove by
token) so that mutual exclusion holds under any interleaving of acquire, release, cleanup
and stale-lock breaking; docs/lock-store.md walks through the interleavings.
Waiters queue in arrival order (`queue.py`) and are woken by push (`wakeup.py`).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

from .errors import CorruptRecordError, InvalidTimeoutError, LockDirError
from .identity import RepoIdentity, identity_of, resolve_identity
from .liveness import Liveness, ProcessIdentity, current_process, new_token
from .lockdir import LOCK_SUFFIX, QUEUE_SUFFIX, STAGING_MARK, LockDir, default_lock_dir
from .paths import lock_name, validate_agent_id
from .queue import Wait
from .records import (
    HolderRecord,
    LockInfo,
    LostLock,
    Reclamation,
    StoreSnapshot,
    WaiterRecord,
    decode_holder,
    decode_waiter,
    encode_holder,
)
from .wakeup import WakeHub, process_hub

log = logging.getLogger(__name__)

MAX_TIMEOUT_SECONDS: Final = 3600
"""An hour, for every wait (the store's and the lock tools'): longer is almost certainly a unit
mistake (milliseconds passed as seconds), and a wait that long should be a retry loop."""
MIN_POLL_INTERVAL_MS: Final = 1
MAX_POLL_INTERVAL_MS: Final = 60_000
STALE_STAGING_SECONDS: Final = 60.0
"""Staging directories still without a record after this long are garbage."""
TURN_TIMEOUT_SECONDS: Final = 5.0
"""How long the first waiter may leave a free lock untaken before others pass it over. A
running waiter takes its turn within milliseconds (pushed) or one poll interval; one that
does not is stopped or stuck, and must not block a free file for everyone."""

OnReclaim = Callable[[Reclamation], None]


def validate_timeout(timeout_seconds: object) -> float:
    if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, int | float):
        raise InvalidTimeoutError(
            f"timeout_seconds must be a number of seconds, got {type(timeout_seconds).__name__}"
        )
    value = float(timeout_seconds)
    if not math.isfinite(value) or value < 0 or value > MAX_TIMEOUT_SECONDS:
        raise InvalidTimeoutError(
            f"timeout_seconds={timeout_seconds!r} is out of range; "
            f"use 0 (do not wait) up to {MAX_TIMEOUT_SECONDS:g} seconds"
        )
    return value


def validate_poll_interval(poll_interval_ms: object) -> float:
    if isinstance(poll_interval_ms, bool) or not isinstance(poll_interval_ms, int | float):
        raise InvalidTimeoutError(
            f"poll_interval_ms must be a number of milliseconds, "
            f"got {type(poll_interval_ms).__name__}"
        )
    value = float(poll_interval_ms)
    if not math.isfinite(value) or not MIN_POLL_INTERVAL_MS <= value <= MAX_POLL_INTERVAL_MS:
        raise InvalidTimeoutError(
            f"poll_interval_ms={poll_interval_ms!r} is out of range; "
            f"use {MIN_POLL_INTERVAL_MS} to {MAX_POLL_INTERVAL_MS} milliseconds"
        )
    return value / 1000.0


class LockStore:
    """Locks on files of one repository, kept in one lock directory shared by processes.

    `repo_namespace` is a directory of the checkout (default: the working directory);
    relative file paths are resolved in the checkout's root. `namespace` names the repository
    explicitly (default: `LOCKYARD_NAMESPACE`, else the repository's own identity; see
    `identity.py`).

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
        self.identity: RepoIdentity = resolve_identity(repo_namespace, namespace)
        self.namespace: str = self.identity.namespace
        self.root: str = self.identity.root
        """This checkout's root: lock keys are relative to it."""
        self.allow_outside_repo = allow_outside_repo
        self._dir = LockDir(
            lock_dir if lock_dir is not None else default_lock_dir(), read_only=read_only
        )
        self.lock_dir: Path = Path(self._dir.path)
        self._use_inotify = use_inotify
        self.liveness_interval = liveness_interval
        self.turn_timeout = turn_timeout
        self._on_reclaim = on_reclaim
        self._grants: dict[tuple[str, str], str] = {}  # (lock name, agent) -> grant token
        self._grants_guard = threading.Lock()
        self._earlier: dict[str, str] = self._find_earlier_locks()
        """lock name -> name of a lock an earlier lockyard version holds on the same file."""

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
        return self.identity.key(filepath, allow_outside_repo=self.allow_outside_repo)

    def _locate(self, filepath: str) -> tuple[str, str]:
        key = self.canonicalize(filepath)
        return key, lock_name(self.namespace, key)

    def lock_topic(self, name: str) -> str:
        return f"{self._dir.path}/{name}{LOCK_SUFFIX}"

    # -- taking and giving back --------------------------------------------------------------

    def try_lock(self, filepath: str, agent_id: str) -> bool:
        """Take the lock now if it is free and nobody alive queues for it (or you hold it)."""
        agent = validate_agent_id(agent_id)
        key, name = self._locate(filepath)
        return self.take(name, key, agent, respect_queue=True)

    # The methods that take a lock `name` (the hashed file-system name, not a path) are the
    # building blocks `queue.Wait` uses; callers outside the lock store use the path API.

    def take(self, name: str, key: str, agent: str, *, respect_queue: bool) -> bool:
        """One attempt at lock `name`; reclaims it first when its holder is provably dead."""
        if self._earlier and self._held_by_earlier_version(name, agent):
            return False
        for _attempt in range(8):
            if self._dir.exists(name + LOCK_SUFFIX):
                try:
                    holder = self._read_holder(name)
                except CorruptRecordError:
                    return False  # held by something unreadable: never guess, never break
                if holder is not None:
                    if holder.agent_id == agent and not self._provably_dead(holder):
                        # Held by this agent id (this process, or another live one: the lock
                        # belongs to the agent id, see Limits): keep the existing grant.
                        self._remember(name, agent, holder.token)
                        return True
                    # A dead holder's grant is reclaimed, even one of this very agent id: a
                    # restarted agent must not inherit a lock whose liveness still follows
                    # its dead predecessor (anyone could reclaim it from under the new one).
                    if not self._reclaim_if_dead(name, holder, agent):
                        return False
                    continue
            if respect_queue and self._has_live_waiters(name):
                return False
            token = new_token()
            record = encode_holder(
                self._owner or current_process(), agent, token, key, self.namespace, self.root
            )
            if self._dir.publish(name, token, record):
                self._remember(name, agent, token)
                return True
        return False

    def release(self, filepath: str, agent_id: str) -> bool:
        """Give back your lock; False, touching nothing, when `agent_id` does not hold it."""
        agent = validate_agent_id(agent_id)
        _key, name = self._locate(filepath)
        with self._grants_guard:
            token = self._grants.pop((name, agent), None)
        if token is not None and self._remove(name, token):
            return True
        try:
            holder = self._read_holder(name)
        except CorruptRecordError:
            return False
        if holder is None or holder.agent_id != agent:
            return False
        return self._remove(name, holder.token)

    def _remove(self, name: str, token: str) -> bool:
        # The first waiter's turn starts before the lock goes: no one can see the lock free
        # while that waiter's turn looks old (see turn_expired).
        if self._dir.exists(name + QUEUE_SUFFIX):
            self._start_turn(name, after=None)
        if not self._dir.remove_lock(name, token):
            return False
        self._hub.notify(self.lock_topic(name))
        return True

    def _remember(self, name: str, agent: str, token: str) -> None:
        with self._grants_guard:
            self._grants[(name, agent)] = token

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
        agent = validate_agent_id(agent_id)
        timeout = validate_timeout(timeout_seconds)
        poll = validate_poll_interval(poll_interval_ms)
        key, name = self._locate(filepath)
        if self.take(name, key, agent, respect_queue=True):
            return True
        if timeout == 0:
            return False
        deadline = time.monotonic() + timeout
        with self._wait(name, key, agent, poll) as wait:
            while True:
                if wait.advance():
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                await wait.waker.wait_async(min(remaining, wait.interval))

    def acquire(
        self,
        filepath: str,
        agent_id: str,
        timeout_seconds: float = 30.0,
        poll_interval_ms: float = 100,
    ) -> bool:
        """The blocking twin of `acquire_async`, for threads and scripts."""
        agent = validate_agent_id(agent_id)
        timeout = validate_timeout(timeout_seconds)
        poll = validate_poll_interval(poll_interval_ms)
        key, name = self._locate(filepath)
        if self.take(name, key, agent, respect_queue=True):
            return True
        if timeout == 0:
            return False
        deadline = time.monotonic() + timeout
        with self._wait(name, key, agent, poll) as wait:
            while True:
                if wait.advance():
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                wait.waker.wait(min(remaining, wait.interval))

    def _wait(self, name: str, key: str, agent: str, poll: float) -> Wait:
        return Wait(
            store=self,
            directory=self._dir,
            hub=self._hub,
            name=name,
            key=key,
            agent=agent,
            push=self._use_inotify,
            poll_interval=poll,
        )

    # -- reading (never writes) ------------------------------------------------------------

    def holder_record(self, filepath: str) -> HolderRecord | None:
        _key, name = self._locate(filepath)
        record = self._read_holder(name)
        if record is None and self._earlier and name in self._earlier:
            return self._read_holder(self._earlier[name])
        return record

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
        """Every lock in the lock directory (all namespaces), with holder, age and waiters.

        A free lock with live waiters is listed too (holder None, reserved for its first
        live waiter): `try_lock` refuses it, so whoever asks why must be able to see it.
        """
        now = time.time()
        locks = []
        names = dict.fromkeys(self._names_with(LOCK_SUFFIX))
        names.update(dict.fromkeys(self._names_with(QUEUE_SUFFIX)))
        for name in names:
            queue = self._scan_queue(name)
            waiters = tuple(record for _entry, record in queue)
            try:
                holder = self._read_holder(name)
            except (CorruptRecordError, LockDirError) as error:
                locks.append(
                    LockInfo(
                        lock_path=name + LOCK_SUFFIX,
                        namespace=None,
                        holder=None,
                        age_seconds=None,
                        liveness="unknown",
                        liveness_reason="the holder record is unreadable",
                        waiters=waiters,
                        problem=str(error),
                    )
                )
                continue
            if holder is None:
                reserved = self._reserved(name, queue, now)
                if reserved is not None:
                    locks.append(reserved)
                continue
            liveness, reason = holder.liveness()
            locks.append(
                LockInfo(
                    lock_path=holder.lock_path,
                    namespace=holder.namespace,
                    holder=holder,
                    age_seconds=max(0.0, now - holder.acquired_at),
                    liveness=liveness.value,
                    liveness_reason=reason,
                    waiters=waiters,
                    earlier_format=holder.earlier_format,
                )
            )
        return sorted(locks, key=lambda info: (info.namespace or "", info.lock_path))

    def snapshot(self) -> StoreSnapshot:
        """Holds and live waits of the whole lock directory, for a wait-for graph.

        One pass over the directory: the waits are those `list_locks` read with each lock (a
        queue whose every waiter is dead is not listed, and has no live wait anyway)."""
        locks = self.list_locks()
        holds = {info.lock_path: info.holder.agent_id for info in locks if info.holder is not None}
        waits = tuple(
            (waiter.agent_id, waiter.lock_path)
            for info in locks
            for waiter in info.waiters
            if waiter.liveness()[0] is not Liveness.DEAD
        )
        return StoreSnapshot(holds=holds, waits=waits, locks=tuple(locks))

    def _read_holder(self, name: str) -> HolderRecord | None:
        found = self._dir.read_lock(name)
        if found is None:
            return None
        token, text = found
        record = decode_holder(text, f"{name}{LOCK_SUFFIX}/{token}")
        if record.token != token:
            raise CorruptRecordError(f"{name}{LOCK_SUFFIX}/{token} records token {record.token}")
        return record

    def current_holder(self, name: str) -> HolderRecord | None:
        """The holder of lock `name`, or None when free or unreadable (never raises)."""
        try:
            return self._read_holder(name)
        except (CorruptRecordError, LockDirError):
            return None

    def read_queue(self, name: str) -> list[tuple[str, WaiterRecord]]:
        entries = []
        for entry, text in self._dir.queue_entries(name):
            try:
                entries.append((entry, decode_waiter(text, f"{name}{QUEUE_SUFFIX}/{entry}")))
            except CorruptRecordError:
                continue  # not written by a store: ignored, never obeyed
        return entries

    def _scan_queue(self, name: str) -> list[tuple[str, WaiterRecord]]:
        """`read_queue` for whole-directory scans: an unsafe entry is skipped, not fatal."""
        try:
            return self.read_queue(name)
        except LockDirError:
            return []

    def _names_with(self, suffix: str) -> Iterator[str]:
        for entry in self._dir.names():
            if entry.endswith(suffix):
                yield entry[: -len(suffix)]

    def _has_live_waiters(self, name: str) -> bool:
        """Whether a waiter has the turn of free lock `name`; drops dead and stalled ones."""
        if not self._dir.exists(name + QUEUE_SUFFIX):
            return False
        for entry, record in self.read_queue(name):
            if record.liveness()[0] is Liveness.DEAD:
                self.drop_waiter(name, entry)
                continue
            if self.turn_expired(name, entry):
                self.pass_over(name, entry, record)
                continue
            return True
        return False

    def drop_waiter(self, name: str, entry: str, token: str | None = None) -> None:
        """Remove a queue entry and wake whoever watches it (its successor). With `token`,
        only while the entry is still that waiter's: tickets are reused once a queue empties,
        so a waiter whose entry was ended by others must not remove a newcomer's."""
        if token is not None and not self.owns_entry(name, entry, token):
            return
        self._start_turn(name, after=entry)
        if self._dir.dequeue(name, entry):
            self._hub.notify(f"{self._dir.path}/{name}{QUEUE_SUFFIX}/{entry}")

    def owns_entry(self, name: str, entry: str, token: str) -> bool:
        """Whether queue entry `entry` of `name` exists and is the wait with `token`."""
        text = self._dir.queue_record(name, entry)
        if text is None:
            return False
        try:
            return decode_waiter(text, f"{name}{QUEUE_SUFFIX}/{entry}").token == token
        except CorruptRecordError:
            return False

    def _start_turn(self, name: str, *, after: str | None) -> None:
        """Stamp the start of the turn of the first waiter of `name` (with `after` given:
        of its successor, when `after` is the first and about to leave)."""
        order = self._dir.queue_order(name)
        if after is not None:
            if not order or order[0] != after:
                return  # not the first leaving: nobody's turn starts
            order = order[1:]
        if order:
            self._dir.stamp_turn(name, order[0])

    def turn_expired(self, name: str, entry: str) -> bool:
        """True when waiter `entry` has had its turn at free lock `name` for longer than
        `turn_timeout` without taking it."""
        started = self._dir.turn_started(name, entry)
        if started is None or time.time() - started < self.turn_timeout:
            return False
        return not self._dir.exists(name + LOCK_SUFFIX)

    def pass_over(self, name: str, entry: str, record: WaiterRecord) -> None:
        """Drop the queue entry of a first waiter that did not take its turn in time.

        If its process resumes, it finds its entry gone and queues again at the back.
        """
        log.warning(
            "passed over waiter %s (pid %d) on %s: it left the free lock untaken for over %gs",
            record.agent_id,
            record.pid,
            record.lock_path,
            self.turn_timeout,
        )
        self.drop_waiter(name, entry)

    # -- locks of an earlier lockyard version ------------------------------------------------

    # A version before repository-relative keys named a lock by (repository directory,
    # absolute path): another lock name for the same file. Its live locks are found when the
    # store opens, translated to this store's keys, and honoured until released or their
    # holder is provably dead; they are never treated as free. (A lock such a version takes
    # after this store opened is not seen: stop the earlier version's agents before starting
    # this one's; `lockyard status` lists what they still hold.)

    def _find_earlier_locks(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for name in self._names_with(LOCK_SUFFIX):
            try:
                holder = self._read_holder(name)
            except (CorruptRecordError, LockDirError):
                continue
            if holder is None or not holder.earlier_format:
                continue
            key = self._key_of_earlier(holder)
            if key is not None:
                found[lock_name(self.namespace, key)] = name
        if found:
            log.warning(
                "%d lock(s) in %s were taken by an earlier lockyard version; their files stay "
                "locked until released (`lockyard status` lists them)",
                len(found),
                self._dir.path,
            )
        return found

    def _key_of_earlier(self, holder: HolderRecord) -> str | None:
        """This store's key for the file an earlier-format record locks, or None when that
        record is about another repository (or one this host cannot see)."""
        try:
            theirs = identity_of(os.path.realpath(holder.namespace), None)
            ours = identity_of(self.root, None)
        except (OSError, ValueError):
            return None
        if theirs.namespace != ours.namespace:
            return None
        path = holder.lock_path
        if path.startswith("/") and theirs.contains(path) and path != theirs.root:
            return path[len(theirs.root.rstrip("/")) + 1 :]
        return path  # a literal key, or a file outside the repository

    def _held_by_earlier_version(self, name: str, agent: str) -> bool:
        earlier = self._earlier.get(name)
        if earlier is None:
            return False
        try:
            holder = self._read_holder(earlier)
        except CorruptRecordError:
            return True  # never guess
        if holder is not None and self._reclaim_if_dead(earlier, holder, agent):
            holder = None
        if holder is None:
            self._earlier.pop(name, None)
            return False
        return True

    # -- cleaning up -----------------------------------------------------------------------

    def cleanup_agent_locks(self, agent_id: str, *, all_namespaces: bool = False) -> list[str]:
        """Release every lock `agent_id` holds (in this namespace, or in all); return the keys."""
        agent = validate_agent_id(agent_id)
        released = []
        for name in self._names_with(LOCK_SUFFIX):
            try:
                holder = self._read_holder(name)
            except (CorruptRecordError, LockDirError):
                continue  # not ours to judge: reported by list_locks, never removed
            if holder is None or holder.agent_id != agent:
                continue
            if not all_namespaces and holder.namespace != self.namespace:
                continue
            if self._remove(name, holder.token):
                released.append(holder.lock_path)
            with self._grants_guard:
                self._grants.pop((name, agent), None)
        return sorted(released)

    def reclaim_stale(self) -> list[Reclamation]:
        """Reclaim every lock whose holder is provably dead; drop dead waiters and debris."""
        reclaimed = []
        for name in self._names_with(LOCK_SUFFIX):
            try:
                holder = self._read_holder(name)
            except (CorruptRecordError, LockDirError):
                continue  # not ours to judge: reported by list_locks, never removed
            if holder is not None:
                reclamation = self._reclaim(name, holder, None)
                if reclamation is not None:
                    reclaimed.append(reclamation)
        for name in self._names_with(QUEUE_SUFFIX):
            for entry, record in self._scan_queue(name):
                if record.liveness()[0] is Liveness.DEAD:
                    self.drop_waiter(name, entry)
        self._remove_stale_staging()
        return reclaimed

    def remove_unreadable(self) -> list[str]:
        """Remove every lock whose holder record cannot be read (an operator's decision:
        such a lock blocks its file for everyone, and nobody can tell whose it was). Each is
        removed by the token it was found under, so a lock taken since is never touched.
        Returns the lock entries removed."""
        removed = []
        for name in self._names_with(LOCK_SUFFIX):
            try:
                self._read_holder(name)
                continue
            except CorruptRecordError:
                pass
            except LockDirError:
                continue  # not a directory the store wrote: reported, never removed here
            found = self._dir.read_lock(name)
            if found is not None and self._remove(name, found[0]):
                removed.append(name + LOCK_SUFFIX)
        return removed

    def end_stalled_waits(self) -> list[WaiterRecord]:
        """Drop the first waiter of every free lock that left its turn untaken for longer
        than `turn_timeout` (stopped or stuck); return the waits ended."""
        ended = []
        for name in self._names_with(QUEUE_SUFFIX):
            for entry, record in self._scan_queue(name):
                if record.liveness()[0] is Liveness.DEAD:
                    continue  # reclaim_stale drops those
                if self.turn_expired(name, entry):
                    self.pass_over(name, entry, record)
                    ended.append(record)
                break  # only the first live waiter has a turn
        return ended

    def end_waits(self, agent_id: str | None) -> list[WaiterRecord]:
        """Drop every queue entry of `agent_id` (of every agent: None), in all namespaces.

        A waiter that is still running finds its entry gone and queues again at the back.
        """
        ended = []
        for name in self._names_with(QUEUE_SUFFIX):
            for entry, record in self._scan_queue(name):
                if agent_id is None or record.agent_id == agent_id:
                    self.drop_waiter(name, entry)
                    ended.append(record)
        return ended

    @staticmethod
    def _provably_dead(holder: HolderRecord) -> bool:
        me = current_process()
        if holder.pid == me.pid and holder.start_time == me.start_time:
            return False  # our own process: no need to read /proc
        return holder.liveness()[0] is Liveness.DEAD

    def _reclaim_if_dead(self, name: str, holder: HolderRecord, by_agent: str) -> bool:
        """True when the holder was provably dead (whoever removed its lock)."""
        if holder.liveness()[0] is not Liveness.DEAD:
            return False
        self._reclaim(name, holder, by_agent)
        return True

    def _reclaim(self, name: str, holder: HolderRecord, by_agent: str | None) -> Reclamation | None:
        liveness, reason = holder.liveness()
        if liveness is not Liveness.DEAD:
            return None
        # Removal by the dead holder's token: exactly one reclaimer wins, and it can never
        # remove a fresh lock taken after the dead one was released.
        if not self._remove(name, holder.token):
            return None
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
        if self._on_reclaim is not None:
            self._on_reclaim(reclamation)
        return reclamation

    def _remove_stale_staging(self) -> None:
        """Remove staging debris: a lock being published whose writer is provably dead, or
        one still without a record after STALE_STAGING_SECONDS (its writer died between
        `mkdir` and writing the record). A writer that is not provably dead keeps its staging
        whatever any clock says; removing a staging under a live writer would anyway only
        make its publish fail and be tried again, never break a lock."""
        now = time.time()
        for entry in self._dir.names():
            _base, mark, token = entry.partition(STAGING_MARK)
            if not mark:
                continue
            try:
                found = self._dir.staging_record(entry)
                age = now - os.lstat(entry, dir_fd=self._dir.fd).st_mtime
            except (OSError, CorruptRecordError, LockDirError):
                continue  # not a staging directory the store wrote: a stray, left alone
            if found is not None:
                try:
                    record = decode_holder(found[1], entry)
                except CorruptRecordError:
                    continue
                if record.liveness()[0] is not Liveness.DEAD:
                    continue
            elif age < STALE_STAGING_SECONDS:
                continue
            self._dir.discard_staging(entry, token)

    def _reserved(
        self, name: str, queue: list[tuple[str, WaiterRecord]], now: float
    ) -> LockInfo | None:
        """A free lock as seen by its queue: reserved for the first waiter not provably dead
        (its liveness is the lock's; `age_seconds` is how long its turn has lasted), or None
        when no such waiter is left."""
        for entry, waiter in queue:
            liveness, reason = waiter.liveness()
            if liveness is Liveness.DEAD:
                continue
            started = self._dir.turn_started(name, entry)
            turn = None if started is None else max(0.0, now - started)
            text = f"free, reserved for the first waiter {waiter.agent_id}: {reason}"
            if turn is not None and turn >= self.turn_timeout:
                text += (
                    f"; it has not taken its turn for {turn:.0f}s, so the next agent that "
                    "asks passes it over (`lockyard clean` ends that wait now)"
                )
            return LockInfo(
                lock_path=waiter.lock_path,
                namespace=waiter.namespace,
                holder=None,
                age_seconds=turn,
                liveness="alive" if liveness is Liveness.ALIVE else "unknown",
                liveness_reason=text,
                waiters=tuple(record for _entry, record in queue),
            )
        return None
