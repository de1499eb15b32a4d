"""Taking back what the dead and the stuck left behind, and the operator's clean-ups.

A lock is reclaimed only on proof that its holder is dead (see `liveness.py`), and always by
releasing it under the token it was found with (`line.reclaim`): exactly one reclaimer wins,
and a fresh lock taken after the dead one went is never touched. Records that cannot be read
are never judged here; only `remove_unreadable` (an operator's explicit decision) removes them.
Every removal of a lock or an entry is the line's own (`line.py`), so a waiter's grant is
handed over, and turns are stamped, as on any release.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Final

from ..errors import CorruptRecordError, LockDirError
from ..liveness import Liveness, liveness_of
from ..records import (
    CardProcess,
    HolderRecord,
    Reclamation,
    WaiterRecord,
    card_processes,
    decode_holder,
    decode_waiter,
)
from . import line
from .disk import BELL_MARK, LOCK_SUFFIX, QUEUE_SUFFIX, STAGING_MARK, LockDir
from .operations import DiskOperations, run
from .sleep import stale_doorbell

STALE_STAGING_SECONDS: Final = 60.0
"""Staging directories still without a record after this long are garbage."""


def reclaim_stale(ops: DiskOperations, directory: LockDir) -> list[Reclamation]:
    """Reclaim every lock whose holder is provably dead; drop dead waiters and debris."""
    reclaimed = []
    for name in directory.names_with(LOCK_SUFFIX):
        try:
            holder = directory.read_holder(name)
        except (CorruptRecordError, LockDirError):
            continue  # not ours to judge: reported by list_locks, never removed
        if holder is not None and holder.liveness()[0] is Liveness.DEAD:
            reclamation = run(line.reclaim(ops, name, holder))
            if isinstance(reclamation, Reclamation):
                reclaimed.append(reclamation)
    for name in directory.names_with(QUEUE_SUFFIX):
        for entry, waiter in directory.queues.scan_queue(name):
            if waiter.liveness()[0] is Liveness.DEAD:
                run(line.end_wait(ops, name, entry, waiter))
        remove_queue_debris(directory, name)
    remove_stale_staging(directory)
    remove_dead_cards(directory)
    return reclaimed


def release_all(
    ops: DiskOperations, directory: LockDir, agent: str, namespace: str | None
) -> dict[str, HolderRecord]:
    """Release every lock `agent` holds (in `namespace`, or in all: None), each journalled
    the moment its grant is dropped, before it is handed on (`DiskOperations.releases`);
    lock name -> the grant released."""
    released = {}
    for name in directory.names_with(LOCK_SUFFIX):
        try:
            holder = directory.read_holder(name)
        except (CorruptRecordError, LockDirError):
            continue  # not ours to judge: reported by list_locks, never removed
        if holder is None or holder.agent_id != agent:
            continue
        if namespace is not None and holder.namespace != namespace:
            continue
        token = holder.token
        ops.releases[token] = (agent, holder.lock_path, holder.acquired_at, holder.namespace)
        try:
            if run(line.release(ops, name, token)):
                released[name] = holder
        finally:
            ops.releases.pop(token, None)
    return released


def remove_unreadable(ops: DiskOperations, directory: LockDir) -> list[str]:
    """Remove every lock whose holder record cannot be read (an operator's decision: such a
    lock blocks its file for everyone, and nobody can tell whose it was). Each is removed by
    the token it was found under, so a lock taken since is never touched. Returns the lock
    entries removed."""
    removed = []
    for name in directory.names_with(LOCK_SUFFIX):
        try:
            directory.read_holder(name)
            continue
        except CorruptRecordError:
            pass
        except LockDirError:
            continue  # not a directory the store wrote: reported, never removed here
        token = directory.grant_token(name)
        if token is not None and run(line.release(ops, name, token)):
            removed.append(name + LOCK_SUFFIX)
    return removed


def end_stalled_waits(ops: DiskOperations, directory: LockDir) -> list[WaiterRecord]:
    """Pass over the first waiter of every lock that left its turn untaken for longer than
    a turn (stopped or stuck); return the waits ended."""
    ended = []
    for name in directory.names_with(QUEUE_SUFFIX):
        with contextlib.suppress(LockDirError):
            waiter = run(line.pass_over_stalled(ops, name))
            if isinstance(waiter, WaiterRecord):
                ended.append(waiter)
    return ended


def end_waits(ops: DiskOperations, directory: LockDir, agent_id: str | None) -> list[WaiterRecord]:
    """Drop every queue entry of `agent_id` (of every agent: None), in all namespaces.

    A waiter that is still running finds its entry gone and queues again at the back.
    """
    ended = []
    for name in directory.names_with(QUEUE_SUFFIX):
        for entry, waiter in directory.queues.scan_queue(name):
            if agent_id is None or waiter.agent_id == agent_id:
                run(line.end_wait(ops, name, entry, waiter))  # and a grant it never accepted
                ended.append(waiter)
    return ended


def remove_stale_staging(directory: LockDir) -> None:
    """Remove staging debris: a lock being published whose writer is provably dead, or one
    still without a record after STALE_STAGING_SECONDS (its writer died between `mkdir` and
    writing the record); and doorbells nobody listens to any more (`sleep.stale_doorbell`).
    A writer that is not provably dead keeps its staging whatever any clock says; removing a
    staging under a live writer would anyway only make its publish fail and be tried again,
    never break a lock."""
    now = time.time()
    for entry in directory.names():
        if BELL_MARK in entry:
            if stale_doorbell(directory, entry):  # its waiter died: nobody listens
                with contextlib.suppress(OSError):
                    os.unlink(entry, dir_fd=directory.fd)
            continue
        _base, mark, token = entry.partition(STAGING_MARK)
        if not mark:
            continue
        if _abandoned(directory, entry, decode_holder, now):
            directory.stagings.discard_staging(entry, token)


def remove_queue_debris(directory: LockDir, name: str) -> None:
    """Remove what dead waiters left in the queue of lock `name`: an entry being built
    whose waiter is provably dead, or still without a record after STALE_STAGING_SECONDS
    (as a staging); an entry emptied by a remover that died before removing it; and the
    queue, once empty. A waiter not provably dead keeps the entry it builds."""
    now = time.time()
    for entry, token in directory.queues.unfinished(name):
        if _abandoned(directory, entry, decode_waiter, now):
            directory.stagings.discard_staging(entry, token)
    directory.queues.remove_emptied(name)


Decode = Callable[[str | bytes, str], HolderRecord | WaiterRecord]


def _abandoned(directory: LockDir, entry: str, decode: Decode, now: float) -> bool:
    """Whether a directory being built (a staging, a queue entry) was left by its writer:
    its record names a provably dead process, or it has none after STALE_STAGING_SECONDS.
    One the store did not write, or whose record does not read, is a stray: left alone."""
    try:
        found = directory.stagings.staging_record(entry)
        age = now - os.lstat(entry, dir_fd=directory.fd).st_mtime
    except (OSError, CorruptRecordError, LockDirError):
        return False
    if found is None:
        return age >= STALE_STAGING_SECONDS
    try:
        return decode(found[1], entry).liveness()[0] is Liveness.DEAD
    except CorruptRecordError:
        return False


def remove_dead_cards(directory: LockDir) -> None:
    """Remove the holder cards whose holder and writer are provably dead and that no lock or
    staging names. A dead writer publishes nothing more, so no grant naming such a card can
    appear after the look; a card of anyone alive stays (its grants may come at any time).
    Each process is judged once, however many cards name it."""
    judged: dict[CardProcess, Liveness] = {}

    def dead(process: CardProcess) -> bool:
        if process not in judged:
            judged[process] = liveness_of(*process)[0]
        return judged[process] is Liveness.DEAD

    candidates = []
    for card in directory.cards.names():
        try:
            text = directory.cards.read(card)
        except CorruptRecordError:
            continue  # not a card the store wrote: a stray, left alone
        processes = None if text is None else card_processes(text)
        if processes is not None and all(dead(process) for process in processes):
            candidates.append(card)
    if not candidates:
        return
    named: set[str] = set()
    for entry in directory.names():
        if entry.endswith(LOCK_SUFFIX) or STAGING_MARK in entry:
            named |= directory.cards.named_in(entry)
    for card in candidates:
        if card not in named:
            directory.cards.remove(card)
