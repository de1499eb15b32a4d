"""Reading holder and waiter records from the lock directory (never writes).

The taking, reporting and reclaiming code all read the directory through these, so each
judges a record by the same rules: a holder record must name the token it is filed under,
and a waiter record that does not decode is no waiter (ignored, never obeyed).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import CorruptRecordError, LockDirError
from ..records import HolderRecord, WaiterRecord, decode_holder, decode_waiter
from .disk import LOCK_SUFFIX, QUEUE_SUFFIX, LockDir


def read_holder(directory: LockDir, name: str) -> HolderRecord | None:
    """The holder of lock `name`, or None when free; CorruptRecordError when unreadable."""
    found = directory.read_lock(name)
    if found is None:
        return None
    token, text = found
    record = decode_holder(text, f"{name}{LOCK_SUFFIX}/{token}")
    if record.token != token:
        raise CorruptRecordError(f"{name}{LOCK_SUFFIX}/{token} records token {record.token}")
    return record


def current_holder(directory: LockDir, name: str) -> HolderRecord | None:
    """The holder of lock `name`, or None when free or unreadable (never raises)."""
    try:
        return read_holder(directory, name)
    except (CorruptRecordError, LockDirError):
        return None


def read_queue(directory: LockDir, name: str) -> list[tuple[str, WaiterRecord]]:
    """(entry, record) of every waiter of lock `name`, in arrival order."""
    entries = []
    for entry, text in directory.queue_entries(name):
        try:
            entries.append((entry, decode_waiter(text, f"{name}{QUEUE_SUFFIX}/{entry}")))
        except CorruptRecordError:
            continue  # not written by a store: ignored, never obeyed
    return entries


def scan_queue(directory: LockDir, name: str) -> list[tuple[str, WaiterRecord]]:
    """`read_queue` for whole-directory scans: an unsafe entry is skipped, not fatal."""
    try:
        return read_queue(directory, name)
    except LockDirError:
        return []


def names_with(directory: LockDir, suffix: str) -> Iterator[str]:
    """The lock names that have an entry ending in `suffix` (locks, or queues)."""
    for entry in directory.names():
        if entry.endswith(suffix):
            yield entry[: -len(suffix)]
