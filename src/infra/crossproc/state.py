"""Who holds and who waits, read from a lock store alone (any process, any namespace): the
wait-for graph's facts, the same for both backends (a lock directory, or PostgreSQL).

Holds are the lock records, waits the queue entries; both name the agent and its process.
Entries of provably dead processes are left out of the waits: a dead waiter waits for
nothing, and the store skips and removes its entry anyway. Two waits have no queue entry and
are named by the waiting grant's token: an exclusive holder's wait for a lock's readers, and
a directory or glob lock's wait for the holds below it (`lockstore.waits_below`): without
that one, a deadlock through a directory lock still draining would wait to its timeouts.

Agent ages for the victim policy: an agent's start time is taken to be the grant time of the
oldest lock it holds now (`acquired_at` in its lock records). Lock counts are the number of
lock records naming it. Both are facts of the shared lock directory, so every monitor reading
it (in any process) computes the same numbers.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...core.deadlock_info import DeadlockInfo
from ..lockstore import (
    Liveness,
    LockBackend,
    LockInfo,
    LockStore,
    StoreSnapshot,
    default_lock_dir,
    shared_node,
    waits_below,
    waits_for_reader,
)
from .deadlock_text import NODE_SEPARATOR
from .notices import VictimNotice


@dataclass(frozen=True, slots=True)
class Hold:
    lock_key: str
    agent_id: str
    acquired_at: float


@dataclass(frozen=True, slots=True)
class Wait:
    agent_id: str
    lock_key: str
    wait_id: str
    """The queue entry's grant token: one wait, never a later one on the same lock."""
    since: float


@dataclass(frozen=True)
class WaitForSnapshot:
    """Holds and live waits of one lock store at one moment."""

    holds: Mapping[str, Hold]
    waits: tuple[Wait, ...]

    @classmethod
    def from_store_snapshot(cls, snapshot: StoreSnapshot) -> WaitForSnapshot:
        holds: dict[str, Hold] = {}
        waits: list[Wait] = []
        for info in snapshot.locks:
            holder = info.holder
            for member in info.shared_holders:  # a reader's hold, waited on by the holder
                shared = node_key(member.namespace, shared_node(info.lock_path, member.agent_id))
                holds[shared] = Hold(shared, member.agent_id, member.acquired_at)
                if holder is not None and waits_for_reader(holder, member):
                    waits.append(Wait(holder.agent_id, shared, holder.token, holder.acquired_at))
            if holder is None:
                continue  # unreadable or free: no hold, and waits on it are no edges
            node = node_key(holder.namespace, info.lock_path)
            holds[node] = Hold(node, holder.agent_id, holder.acquired_at)
            waits.extend(_live_waits(info, node))
        # A directory or glob lock still draining waits on the holds below it, a wait with no
        # queue entry: its grant's token names it, as a holder waiting for readers.
        for directory, below in waits_below(list(snapshot.locks)):
            node = node_key(directory.namespace, below)
            waits.append(Wait(directory.agent_id, node, directory.token, directory.acquired_at))
        return cls(holds=holds, waits=tuple(waits))

    def holders(self) -> dict[str, str]:
        return {key: hold.agent_id for key, hold in self.holds.items()}

    def wait_pairs(self) -> list[tuple[str, str]]:
        return [(wait.agent_id, wait.lock_key) for wait in self.waits]

    def agent_start_times(self) -> dict[str, float]:
        """Each holding agent's age proxy: the grant time of its oldest current lock."""
        starts: dict[str, float] = {}
        for hold in self.holds.values():
            known = starts.get(hold.agent_id)
            if known is None or hold.acquired_at < known:
                starts[hold.agent_id] = hold.acquired_at
        return starts

    def wait_id(self, agent_id: str, lock_key: str) -> str | None:
        for wait in self.waits:
            if wait.agent_id == agent_id and wait.lock_key == lock_key:
                return wait.wait_id
        return None

    def has_wait(self, agent_id: str, lock_key: str, wait_id: str | None) -> bool:
        """Is this wait (this very queue entry, when `wait_id` is given) still there?"""
        return any(
            wait.agent_id == agent_id
            and wait.lock_key == lock_key
            and (wait_id is None or wait.wait_id == wait_id)
            for wait in self.waits
        )

    def has_cycle(self, info: DeadlockInfo) -> bool:
        """Does every step of `info` still hold: its agent waits on the lock its holder holds?"""
        for step in info.cycle:
            hold = self.holds.get(step.lock_path)
            if hold is None or hold.agent_id != step.held_by:
                return False
            if not self.has_wait(step.agent_id, step.lock_path, None):
                return False
        return True


def node_key(namespace: str, lock_key: str) -> str:
    """The lock's node in the wait-for graph: its key qualified with its namespace
    (`proj-3f2a9c1b7e40::src/app.py`), since a lock is the pair (namespace, key): two
    repositories' `src/app.py` (or `__db__`) are two locks, two worktrees' one lock."""
    return f"{namespace}{NODE_SEPARATOR}{lock_key}"


def _live_waits(info: LockInfo, node: str) -> list[Wait]:
    waits = []
    for waiter in info.waiters:
        liveness, _reason = waiter.liveness()
        if liveness is Liveness.DEAD:
            continue
        waits.append(Wait(waiter.agent_id, node, waiter.token, waiter.since))
    return waits


class WaitForReader:
    """Reads a lock store's holds and waits (reading never writes); `open` for a lock directory.

    Waits are taken from the queues of held locks: a wait on a free lock is about to be
    granted and is no edge of the wait-for graph.
    """

    def __init__(self, store: LockBackend) -> None:
        self.store = store

    @classmethod
    def open(cls, lock_dir: Path, *, read_only: bool = False) -> WaitForReader:
        """`read_only`: the lock directory must exist and is left exactly as it is."""
        return cls(LockStore(lock_dir=lock_dir, read_only=read_only))

    def read(self) -> WaitForSnapshot:
        return WaitForSnapshot.from_store_snapshot(self.store.snapshot())

    def still_waiting(self, notice: VictimNotice) -> bool:
        """The check `FileVictimNotices` applies: is the noticed wait still there?"""
        return self.read().has_wait(notice.agent_id, notice.waits_on, notice.wait_id)


class LockDirUnreadableError(Exception):
    """The lock directory to read is missing or unusable; `hint` says what to do."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def resolve_lock_dir(explicit: Path | None) -> Path:
    """The lock directory to read (`explicit`, else LOCKYARD_LOCK_DIR, else the per-user
    default), checked without creating or changing anything."""
    directory = Path(explicit) if explicit is not None else default_lock_dir()
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        raise LockDirUnreadableError(
            f"lock directory {directory} does not exist",
            "pass --lock-dir (or set LOCKYARD_LOCK_DIR) to the directory your agents use",
        ) from None
    except OSError as exc:
        raise LockDirUnreadableError(
            f"cannot read lock directory {directory}: {exc.strerror}", "check its permissions"
        ) from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise LockDirUnreadableError(
            f"lock directory {directory} is not a directory (or is a symlink)",
            "point --lock-dir at the real lock directory",
        )
    if not os.access(directory, os.R_OK | os.W_OK | os.X_OK):
        raise LockDirUnreadableError(
            f"lock directory {directory} is not readable and writable by you",
            "run as the user who owns it",
        )
    return directory
