"""Shared holds: many agents hold a file together, for reading; an exclusive hold excludes them.

The lock of a file (its line, `line.py`) is the file's turnstile. A shared hold is a member
record `<name>.shared/<agent hash>` (the holder record, `"mode":"shared"`), written while its
agent holds the lock, which it then releases at once (the release hands the lock to the next
in line). An exclusive grant takes the lock as always and then waits, holding it, until the
file has no live member but its own (an upgrade: that member is then dropped). So:

- while the lock is held nobody adds a member, so an exclusive holder that saw no member
  excludes every shared one;
- a queued exclusive request stops new shared grants behind it: they queue in the same line
  (FIFO without writer starvation);
- an upgrade that waits holds the lock while the other members hold their shared holds: two
  upgraders wait for each other, a cycle of the wait-for graph (`reporting.py` shows each
  member as a hold and the waiting holder as waiting on it);
- a member whose process is provably dead is removed by whoever looks (as a dead holder's
  lock is reclaimed), so a SIGKILLed reader leaves nothing behind.

The plain exclusive lock pays one `faccessat` for all this (`present`) when no file of the
lock directory is held shared.
"""

from __future__ import annotations

import contextlib
import os

from ..errors import CorruptRecordError
from ..liveness import Liveness, current_process
from ..records import HolderRecord, decode_holder, encode_holder
from . import line
from .disk import (
    SHARED_SUFFIX,
    LockDir,
    member_entry,
    read_record,
    shared_entry_exists,
    shared_member_exists,
    write_record,
)
from .lock_journal import LockJournal
from .operations import DiskOperations, GrantRecords, run


def read_members(directory: LockDir, name: str) -> list[HolderRecord]:
    """The members of lock `name` (CorruptRecordError when one cannot be read)."""
    entry_fd = directory.open_own_dir(name + SHARED_SUFFIX)
    if entry_fd is None:
        return []
    try:
        found = []
        try:
            listed = os.listdir(entry_fd)
        except FileNotFoundError:
            return []
        for entry in listed:
            try:
                text = read_record(entry_fd, entry)
            except FileNotFoundError:
                continue  # released between listing and reading
            found.append(decode_holder(text, f"{name}{SHARED_SUFFIX}/{entry}"))
        return found
    finally:
        os.close(entry_fd)


class SharedHolds:
    """The shared holds of one store's locks in `directory`: members are written naming
    whom the store's grants name (`records`: their owner, namespace and checkout)."""

    def __init__(
        self,
        directory: LockDir,
        operations: DiskOperations,
        journal: LockJournal | None,
        records: GrantRecords,
    ) -> None:
        self._directory, self._operations, self._journal = directory, operations, journal
        self._owner, self._namespace, self._root = records.owner, records.namespace, records.root

    # -- the member records ------------------------------------------------------------------

    def present(self, name: str) -> bool:
        """Lock `name` may have members (one `faccessat`)."""
        return shared_entry_exists(self._directory.fd, name)

    def holds_shared(self, name: str, agent: str) -> bool:
        return shared_member_exists(self._directory.fd, name, agent)

    def members(self, name: str) -> list[HolderRecord]:
        """The members of lock `name` (CorruptRecordError when one cannot be read)."""
        return read_members(self._directory, name)

    def _add(self, name: str, key: str, agent: str, token: str) -> None:
        me = current_process()
        record = encode_holder(self._owner or me, agent, token, key, self._namespace, self._root)
        record = record[:-1] + ',"mode":"shared"}'
        entry = f"{name}{SHARED_SUFFIX}/{member_entry(agent)}"
        for _attempt in range(8):
            self._directory.make_dir(name + SHARED_SUFFIX)
            try:
                write_record(self._directory.fd, entry, record)
                return
            except FileExistsError:
                return  # a member already (two stores of one agent raced)
            except FileNotFoundError:
                continue  # the last member left and removed the directory: make it again
        raise CorruptRecordError(f"cannot add a member to {name}{SHARED_SUFFIX}: it keeps going")

    def remove(
        self, name: str, agent: str, token: str | None = None, *,
        release: HolderRecord | None = None,
    ) -> bool:  # fmt: skip
        """Remove `agent`'s member of lock `name` (only the one of grant `token`, if given);
        True when it was there. `release`: the member as read, whose release is journalled
        before it goes, so that a writer its going wakes (in any process) journals its
        grant after it (two removers of one member at one moment may both journal it)."""
        entry = f"{name}{SHARED_SUFFIX}/{member_entry(agent)}"
        fd = self._directory.fd
        if token is not None:
            try:
                found = decode_holder(read_record(fd, entry), entry)
            except (FileNotFoundError, CorruptRecordError):
                return False
            if found.token != token:
                return False  # a newer member of the same agent: not the one judged
        if release is not None and self._journal is not None:
            self._journal.released(
                release.token, release.agent_id, release.lock_path, release.acquired_at,
                release.namespace,
            )  # fmt: skip
        try:
            os.unlink(entry, dir_fd=fd)
        except FileNotFoundError:
            return False
        last = False
        with contextlib.suppress(OSError):  # not empty: other members stay
            os.rmdir(name + SHARED_SUFFIX, dir_fd=fd)
            last = True
        self._operations.member_gone(name, entry.rpartition("/")[2], last=last)
        return True

    def readers(self, name: str) -> tuple[str, ...]:
        """The agents of the members of lock `name` not provably dead (read only)."""
        if not self.present(name):
            return ()
        return tuple(
            member.agent_id
            for member in self.members(name)
            if member.liveness()[0] is not Liveness.DEAD
        )

    def leave(self, name: str, agent: str) -> bool:
        """Give back `agent`'s shared hold of lock `name`; False when it has none."""
        entry = f"{name}{SHARED_SUFFIX}/{member_entry(agent)}"
        try:
            member = decode_holder(read_record(self._directory.fd, entry), entry)
        except FileNotFoundError:
            return False
        return self.remove(name, agent, member.token, release=member)

    def others_alive(self, name: str, agent: str) -> bool:
        """Whether lock `name` has a member other than `agent`'s that is not provably dead;
        the provably dead ones are removed on the way (proof of death, as for a lock)."""
        alive = False
        for member in self.members(name):
            if member.agent_id == agent:
                continue
            if member.liveness()[0] is Liveness.DEAD:
                self.remove(name, member.agent_id, member.token, release=member)
                continue
            alive = True
        return alive

    # -- taking a shared hold ----------------------------------------------------------------

    def join(self, name: str, key: str, agent: str, token: str) -> None:
        """`agent`, holding lock `name` under grant `token`, becomes a member and releases
        the lock (handing it to the next in line): the caller journals the shared grant."""
        try:
            self._add(name, key, agent, token)
        finally:
            run(line.release(self._operations, name, token, None))

    # -- an exclusive grant waits for the members ------------------------------------------

    def settle(self, name: str, agent: str) -> HolderRecord | None:
        """`agent` holds lock `name` exclusively and no other member is left: its own shared
        hold, if any (an upgrade), is now part of the exclusive one; that read, if it was
        there and readable (its grant's time goes on in the exclusive hold's journal)."""
        entry = f"{name}{SHARED_SUFFIX}/{member_entry(agent)}"
        try:
            read: HolderRecord | None = decode_holder(read_record(self._directory.fd, entry), entry)
        except (FileNotFoundError, CorruptRecordError):
            read = None
        return read if self.remove(name, agent) else None

    def release_all(self, agent: str, namespace: str | None) -> list[HolderRecord]:
        """Remove every member of `agent` (in `namespace`, or in all: None), each journalled
        as it goes (`remove`); those removed."""
        removed = []
        for entry in self._directory.names():
            if not entry.endswith(SHARED_SUFFIX):
                continue
            name = entry[: -len(SHARED_SUFFIX)]
            with contextlib.suppress(CorruptRecordError):
                for member in self.members(name):
                    if member.agent_id != agent:
                        continue
                    if namespace is not None and member.namespace != namespace:
                        continue
                    if self.remove(name, agent, member.token, release=member):
                        removed.append(member)
        return removed

    def remove_dead(self) -> None:
        """Remove every member whose process is provably dead."""
        for entry in self._directory.names():
            if entry.endswith(SHARED_SUFFIX):
                with contextlib.suppress(CorruptRecordError):
                    self.others_alive(entry[: -len(SHARED_SUFFIX)], "")
