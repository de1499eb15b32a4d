"""Taking back what the dead and the stuck left behind, and the operator's clean-ups.

A lock is reclaimed only on proof that its holder is dead (see `liveness.py`), and always by
removing it under the token it was found with: exactly one reclaimer wins, and a fresh lock
taken after the dead one went is never touched. Records that cannot be read are never
judged here; only `remove_unreadable` (an operator's explicit decision) removes them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from typing import TYPE_CHECKING, Final

from ..errors import CorruptRecordError, LockDirError
from ..liveness import Liveness, current_process, liveness_of
from ..paths import validate_agent_id
from ..records import (
    CardProcess,
    HolderRecord,
    Reclamation,
    WaiterRecord,
    card_processes,
    decode_holder,
)
from .disk import BELL_MARK, LOCK_SUFFIX, QUEUE_SUFFIX, STAGING_MARK, LockDir
from .reading import names_with, read_holder, scan_queue

if TYPE_CHECKING:
    from .store import LockStore

log = logging.getLogger(__name__)

STALE_STAGING_SECONDS: Final = 60.0
"""Staging directories still without a record after this long are garbage."""


def provably_dead(holder: HolderRecord) -> bool:
    me = current_process()
    if holder.pid == me.pid and holder.start_time == me.start_time:
        return False  # our own process: no need to read /proc
    return holder.liveness()[0] is Liveness.DEAD


def reclaim_if_dead(store: LockStore, name: str, holder: HolderRecord, by_agent: str) -> bool:
    """True when the holder was provably dead (whoever removed its lock)."""
    if not provably_dead(holder):
        return False
    reclaim(store, name, holder, by_agent)
    return True


def reclaim(
    store: LockStore, name: str, holder: HolderRecord, by_agent: str | None
) -> Reclamation | None:
    """Remove lock `name` if `holder` is provably dead; the reclamation, reported to the
    store's `on_reclaim`, or None when it is not dead or another reclaimer won."""
    liveness, reason = holder.liveness()
    if liveness is not Liveness.DEAD:
        return None
    # Removal by the dead holder's token: exactly one reclaimer wins, and it can never
    # remove a fresh lock taken after the dead one was released.
    if not store._remove(name, holder.token):
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
    if store._on_reclaim is not None:
        store._on_reclaim(reclamation)
    return reclamation


def reclaim_stale(store: LockStore) -> list[Reclamation]:
    """Reclaim every lock whose holder is provably dead; drop dead waiters and debris."""
    directory = store._dir
    reclaimed = []
    for name in names_with(directory, LOCK_SUFFIX):
        try:
            holder = read_holder(directory, name)
        except (CorruptRecordError, LockDirError):
            continue  # not ours to judge: reported by list_locks, never removed
        if holder is not None:
            reclamation = reclaim(store, name, holder, None)
            if reclamation is not None:
                reclaimed.append(reclamation)
    for name in names_with(directory, QUEUE_SUFFIX):
        for entry, record in scan_queue(directory, name):
            if record.liveness()[0] is Liveness.DEAD:
                store._queues.end_wait(name, entry, record)
    remove_stale_staging(directory)
    remove_dead_cards(directory)
    return reclaimed


def cleanup_agent_locks(store: LockStore, agent_id: str, *, all_namespaces: bool) -> list[str]:
    """Release every lock `agent_id` holds (in the store's namespace, or in all); the keys."""
    agent = validate_agent_id(agent_id)
    directory = store._dir
    released = []
    for name in names_with(directory, LOCK_SUFFIX):
        try:
            holder = read_holder(directory, name)
        except (CorruptRecordError, LockDirError):
            continue  # not ours to judge: reported by list_locks, never removed
        if holder is None or holder.agent_id != agent:
            continue
        if not all_namespaces and holder.namespace != store.namespace:
            continue
        if store._remove(name, holder.token):
            released.append(holder.lock_path)
            store._released(holder.token, agent, holder.lock_path, holder.acquired_at,
                            holder.namespace)  # fmt: skip
        store._forget(name, agent)
    return sorted(released)


def remove_unreadable(store: LockStore) -> list[str]:
    """Remove every lock whose holder record cannot be read (an operator's decision: such a
    lock blocks its file for everyone, and nobody can tell whose it was). Each is removed by
    the token it was found under, so a lock taken since is never touched. Returns the lock
    entries removed."""
    directory = store._dir
    removed = []
    for name in names_with(directory, LOCK_SUFFIX):
        try:
            read_holder(directory, name)
            continue
        except CorruptRecordError:
            pass
        except LockDirError:
            continue  # not a directory the store wrote: reported, never removed here
        token = directory.grant_token(name)
        if token is not None and store._remove(name, token):
            removed.append(name + LOCK_SUFFIX)
    return removed


def end_stalled_waits(store: LockStore) -> list[WaiterRecord]:
    """Drop the first waiter of every free lock that left its turn untaken for longer than
    the store's `turn_timeout` (stopped or stuck); return the waits ended."""
    directory = store._dir
    ended = []
    for name in names_with(directory, QUEUE_SUFFIX):
        for entry, record in scan_queue(directory, name):
            if record.liveness()[0] is Liveness.DEAD:
                continue  # reclaim_stale drops those
            if store._queues.turn_expired(name, entry, record.token):
                store.pass_over(name, entry, record)
                ended.append(record)
            break  # only the first live waiter has a turn
    return ended


def end_waits(store: LockStore, agent_id: str | None) -> list[WaiterRecord]:
    """Drop every queue entry of `agent_id` (of every agent: None), in all namespaces.

    A waiter that is still running finds its entry gone and queues again at the back.
    """
    directory = store._dir
    ended = []
    for name in names_with(directory, QUEUE_SUFFIX):
        for entry, record in scan_queue(directory, name):
            if agent_id is None or record.agent_id == agent_id:
                store._queues.end_wait(name, entry, record)  # and a grant it never accepted
                ended.append(record)
    return ended


def remove_stale_staging(directory: LockDir) -> None:
    """Remove staging debris: a lock being published whose writer is provably dead, or one
    still without a record after STALE_STAGING_SECONDS (its writer died between `mkdir` and
    writing the record). A writer that is not provably dead keeps its staging whatever any
    clock says; removing a staging under a live writer would anyway only make its publish
    fail and be tried again, never break a lock."""
    now = time.time()
    for entry in directory.names():
        if BELL_MARK in entry:
            if directory.stale_doorbell(entry):  # its waiter died: nobody listens
                with contextlib.suppress(OSError):
                    os.unlink(entry, dir_fd=directory.fd)
            continue
        _base, mark, token = entry.partition(STAGING_MARK)
        if not mark:
            continue
        try:
            found = directory.staging_record(entry)
            age = now - os.lstat(entry, dir_fd=directory.fd).st_mtime
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
        directory.discard_staging(entry, token)


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
    for card in directory.cards():
        try:
            text = directory.read_card(card)
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
            named |= directory.cards_named_in(entry)
    for card in candidates:
        if card not in named:
            directory.remove_card(card)
