"""The wait queues of a lock directory: `<name>.q/<ticket>`, one entry per waiter, named in
arrival order by claiming the next ticket with an exclusive creation (`layout.py`)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import CorruptRecordError, LockDirError
from .layout import (
    DIR_FLAGS,
    NO_SPACE,
    PARTIAL_SUFFIX,
    QUEUE_SUFFIX,
    TICKET_DIGITS,
    read_record,
    write_record,
)

if TYPE_CHECKING:
    from ..records import WaiterRecord
    from .disk import LockDir


class QueueEntries:
    """The wait queues of a lock directory: `<name>.q/<ticket>`, one entry per waiter."""

    def __init__(self, directory: LockDir) -> None:
        self._dir = directory

    def queue_exists(self, name: str) -> bool:
        return os.access(name + QUEUE_SUFFIX, os.F_OK, dir_fd=self._dir.fd, follow_symlinks=False)

    def enqueue(self, name: str, record_for: Callable[[int], str]) -> str:
        """Add an entry to the queue of `name` and return its name (its ticket).

        The ticket is one more than the highest ticket in the queue, claimed by creating the
        entry under that name (creation fails if the name exists: then the next one is
        tried). So entries are numbered in the order they were created, whatever any
        process's clock says. `record_for(ticket)` gives the record to store.
        """
        queue = name + QUEUE_SUFFIX
        while True:
            self._dir.make_dir(queue)
            queue_fd = self._dir.open_own_dir(queue)
            if queue_fd is None:
                continue  # the last waiter removed the empty queue meanwhile: recreate it
            try:
                entry = _claim_ticket(queue_fd, record_for)
            except OSError as error:
                if error.errno not in NO_SPACE:
                    raise
                # Leave no empty queue behind (fails harmlessly if others queue there).
                with contextlib.suppress(OSError):
                    os.rmdir(queue, dir_fd=self._dir.fd)
                raise self._dir.full() from None
            finally:
                os.close(queue_fd)
            if entry is not None:
                return entry

    def dequeue(self, name: str, entry: str) -> bool:
        """Remove one queue entry (by its unique name) and the queue when it became empty."""
        queue = name + QUEUE_SUFFIX
        try:
            os.unlink(f"{queue}/{entry}", dir_fd=self._dir.fd)
        except (FileNotFoundError, NotADirectoryError):
            return False
        try:  # noqa: SIM105 (contextlib.suppress costs more, at every handoff)
            os.rmdir(queue, dir_fd=self._dir.fd)  # fails while others queue
        except OSError:
            pass
        return True

    def queued(self, name: str, entry: str) -> bool:
        """Whether queue entry `entry` of `name` exists (one `faccessat`)."""
        return os.access(
            f"{name}{QUEUE_SUFFIX}/{entry}", os.F_OK, dir_fd=self._dir.fd, follow_symlinks=False
        )

    def queue_record(self, name: str, entry: str) -> str | None:
        """The record of one queue entry, or None when there is no such entry (or what is
        there is not a record the store wrote)."""
        try:
            return read_record(self._dir.fd, f"{name}{QUEUE_SUFFIX}/{entry}")
        except (FileNotFoundError, NotADirectoryError, CorruptRecordError):
            return None

    def entry_token(self, name: str, entry: str) -> str | None:
        """The wait token in the record of queue entry `entry`; None when the entry is gone
        or holds no waiter's record.

        Read from the text as the store writes it (compact JSON) without decoding the whole
        record: this runs on every handoff. A quote inside a JSON string is escaped, so a
        `"token":"` found in the text is the key, not part of a value. Other spellings fall
        back to decoding the JSON. A record that names a token without being a whole
        waiter's record is harmless: a grant is handed over only to a staging of that token,
        which only a queued wait makes."""
        text = self.queue_record(name, entry)
        if text is None:
            return None
        at = text.find('"token":"')
        if at >= 0:
            at += 9
            until = text.find('"', at)
            token: object = text[at:until] if until >= 0 else None
        else:
            try:
                fields = json.loads(text)
            except ValueError:
                return None
            token = fields.get("token") if type(fields) is dict else None
        if type(token) is not str or not token or "/" in token or "\0" in token or "\\" in token:
            return None  # it names files of the lock directory (and a plain token has no escapes)
        return token

    def waiter(self, name: str, entry: str) -> WaiterRecord | None:
        """The record of queue entry `entry`, None when it is gone or no waiter's record."""
        text = self.queue_record(name, entry)
        if text is None:
            return None
        try:
            from ..records import decode_waiter  # pydantic: loaded when first needed

            return decode_waiter(text, f"{name}{QUEUE_SUFFIX}/{entry}")
        except CorruptRecordError:
            return None  # not a waiter's record: never obeyed

    def queue_order(self, name: str) -> list[str]:
        """The entry names of the queue of `name`, in arrival order (no records read)."""
        try:
            queue_fd = os.open(name + QUEUE_SUFFIX, DIR_FLAGS, dir_fd=self._dir.fd)
        except OSError:
            return []  # no queue; one that is not a directory is reported by queue_entries
        return _sorted_tickets(queue_fd)

    def checked_queue_order(self, name: str) -> list[str]:
        """`queue_order`; a queue that is not a directory of ours raises LockDirError (as
        `queue_entries` does) instead of reading as empty."""
        queue_fd = self._dir.open_own_dir(name + QUEUE_SUFFIX)
        return [] if queue_fd is None else _sorted_tickets(queue_fd)

    def stamp_turn(self, name: str, entry: str) -> bool:
        """Record now as the moment queue entry `entry` got its turn (the entry's mtime);
        False when there is no such entry (it left meanwhile: it needs no turn)."""
        # An explicit time: the kernel's own "now" is only as fine as a clock tick, so a stamp
        # soon after the entry was created could leave its mtime unchanged, and a waiter
        # learns from a changed mtime that it is first (see `line._in_line`).
        now = time.time_ns()
        try:
            os.utime(
                f"{name}{QUEUE_SUFFIX}/{entry}",
                ns=(now, now),
                dir_fd=self._dir.fd,
                follow_symlinks=False,
            )
        except OSError:
            return False
        return True

    def turn_stamp(self, name: str, entry: str) -> int | None:
        """The mtime of queue entry `entry` in nanoseconds, or None when it is gone."""
        try:
            return os.lstat(f"{name}{QUEUE_SUFFIX}/{entry}", dir_fd=self._dir.fd).st_mtime_ns
        except (FileNotFoundError, NotADirectoryError):
            return None

    def turn_started(self, name: str, entry: str) -> float | None:
        """When queue entry `entry` got its turn (or was queued), or None when it is gone."""
        try:
            return os.lstat(f"{name}{QUEUE_SUFFIX}/{entry}", dir_fd=self._dir.fd).st_mtime
        except (FileNotFoundError, NotADirectoryError):
            return None

    def queue_entries(self, name: str) -> list[tuple[str, str]]:
        """(entry name, record text) of the queue of `name`, in arrival order."""
        queue_fd = self._dir.open_own_dir(name + QUEUE_SUFFIX)
        if queue_fd is None:
            return []
        try:
            try:
                listed = os.listdir(queue_fd)
            except FileNotFoundError:
                return []  # the last waiter removed the queue after we opened it (FUSE)
            entries = []
            for entry in sorted(listed):
                if not _is_ticket(entry):
                    continue  # a partial record, or not the store's
                try:
                    entries.append((entry, read_record(queue_fd, entry)))
                except FileNotFoundError:
                    continue  # that waiter left while we were reading
                except CorruptRecordError:
                    continue  # a FIFO or another user's file: no waiter, never obeyed
            return entries
        finally:
            os.close(queue_fd)

    def read_queue(self, name: str) -> list[tuple[str, WaiterRecord]]:
        """(entry, record) of every waiter of lock `name`, in arrival order."""
        from ..records import decode_waiter  # pydantic: loaded when first needed

        entries = []
        for entry, text in self.queue_entries(name):
            try:
                entries.append((entry, decode_waiter(text, f"{name}{QUEUE_SUFFIX}/{entry}")))
            except CorruptRecordError:
                continue  # not written by a store: ignored, never obeyed
        return entries

    def scan_queue(self, name: str) -> list[tuple[str, WaiterRecord]]:
        """`read_queue` for whole-directory scans: an unsafe entry is skipped, not fatal."""
        try:
            return self.read_queue(name)
        except LockDirError:
            return []


def _claim_ticket(queue_fd: int, record_for: Callable[[int], str]) -> str | None:
    """Create the next ticket's entry in the open queue; None when the queue was removed."""
    while True:
        try:
            listed = os.listdir(queue_fd)
        except FileNotFoundError:
            return None  # removed after we opened it (FUSE says so): make it again
        tickets = [int(entry[:TICKET_DIGITS]) for entry in listed if _is_ticket(entry)]
        ticket = max(tickets, default=0) + 1
        entry = f"{ticket:0{TICKET_DIGITS}d}"
        try:
            write_record(queue_fd, entry, record_for(ticket))
        except FileExistsError:
            continue  # somebody took that ticket first: read the queue again
        except FileNotFoundError:
            return None  # the directory was removed (it was empty): make it again
        return entry


def _is_ticket(entry: str) -> bool:
    return entry[:TICKET_DIGITS].isdigit() and not entry.endswith(PARTIAL_SUFFIX)


def _sorted_tickets(queue_fd: int) -> list[str]:
    """The ticket entries of an open queue, sorted (the queue closed after)."""
    try:
        names = os.listdir(queue_fd)
    except FileNotFoundError:
        return []  # removed after we opened it (FUSE says so; local file systems: empty)
    finally:
        os.close(queue_fd)
    return sorted(entry for entry in names if _is_ticket(entry))
