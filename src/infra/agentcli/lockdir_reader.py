"""Who holds a lock, read straight from the lock directory (standard library only).

The agent CLI hooks run as one short process per tool call; loading the whole store (its
pydantic records) would cost more than the check itself. This reader answers the guards'
one question, "who holds this file's lock?", with the store's own key and naming functions,
and counts a holder whose process is provably dead as no holder, as the store does.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..lockstore import (
    LOCK_SUFFIX,
    SHARED_SUFFIX,
    Checkout,
    CorruptRecordError,
    JournalFiles,
    JournalRecord,
    JournalSettingError,
    Liveness,
    LockDir,
    any_pending,
    append_once,
    current_process,
    globs_over,
    is_above,
    is_directory_key,
    is_glob_key,
    journal_files,
    liveness_of,
    lock_name,
    open_checkout,
    pending_reason,
    pending_requests,
    read_record,
)

if TYPE_CHECKING:
    from .holder_watch import HolderWatch


class LockDirReader:
    """A read-only `GuardStore` over one lock directory and one repository."""

    def __init__(
        self,
        repo: str | os.PathLike[str],
        lock_dir: str | os.PathLike[str],
        namespace: str | None = None,
        watch: HolderWatch | None = None,
        *,
        long_lived: bool = False,
    ) -> None:
        """`watch`: the holders kept by a long-lived guard for this lock directory (its
        reads go through it); None reads every holder afresh. `long_lived`: a reader of the
        guard server, which keeps its journal open."""
        self.checkout: Checkout = open_checkout(repo, namespace)
        self.namespace: str = self.checkout.namespace
        self.root: str = self.checkout.root
        self._dir = LockDir(lock_dir)
        self._watch = watch
        self._long_lived = long_lived
        self._journal: JournalFiles | Literal[False] | None = None
        """The long-lived reader's journal writer once looked up (False: the journal is off)."""
        self.lock_dir = lock_dir
        self._last_key: str | None = None
        """The key `canonicalize` returned last: the write guard asks for its holder next."""

    def journal_write(self, record: JournalRecord) -> None:
        """Append a record to the lock directory's journal (a denied write). Never raises.
        A short hook process opens, writes and closes; a reader of the long-lived guard
        (`ReaderCache`) writes through its process's one open journal writer."""
        if not record.session:
            me = current_process()
            record.session, record.pid, record.host = (
                f"{me.pid}.{me.start_time or 0}",
                me.pid,
                me.host,
            )
        if not self._long_lived:
            append_once(self.lock_dir, record)
            return
        if self._journal is None:
            try:
                self._journal = journal_files(self.lock_dir) or False
            except JournalSettingError:
                self._journal = False  # `lockyard serve` said so when it started
        if self._journal:
            self._journal.append(record)

    def close(self) -> None:
        self._dir.close()

    def canonicalize(self, filepath: str) -> str:
        key = self.checkout.key(filepath)
        self._last_key = key
        return key

    def stale_grant(self, filepath: str, agent_id: str) -> str | None:
        """`revoked: REASON` while the agent has not been told that the lock of `filepath`
        was revoked and does not hold it again (a grant here has no fencing number to fall
        behind otherwise); one failed `open` when nothing is pending."""
        key = self._key(filepath)
        reason = pending_reason(self.lock_dir, agent_id, key)
        if reason is None or self.holder(key) == agent_id:
            return None
        return f"revoked: {reason}"

    def holds_of(self, keys: Sequence[str]) -> dict[str, tuple[str | None, tuple[str, ...]]]:
        """Each key's holder and readers, looked at one by one (a system call or two each)."""
        return {key: (self.holder(key), self.readers(key)) for key in keys}

    def readers(self, filepath: str) -> tuple[str, ...]:
        """The agents holding the file shared, not provably dead (one `faccessat` when none)."""
        key = filepath if filepath is self._last_key else self.canonicalize(filepath)
        entry_fd = self._dir.open_own_dir(lock_name(self.namespace, key) + SHARED_SUFFIX)
        if entry_fd is None:
            return ()
        found = []
        try:
            for entry in os.listdir(entry_fd):
                try:
                    record = _parse_member(read_record(entry_fd, entry))
                except FileNotFoundError:
                    continue  # left between listing and reading
                if record_liveness(record) is not Liveness.DEAD:
                    found.append(str(record["agent_id"]))
        except FileNotFoundError:
            return ()  # the last reader left: the directory went
        finally:
            os.close(entry_fd)
        return tuple(found)

    def globs_over(self, key: str) -> tuple[str, ...]:
        """The globs locked in this lock directory that cover `key`: one `faccessat` when no
        glob was ever locked there."""
        return globs_over(self._dir.fd, self.namespace, key)

    def holder_below(self, key: str, agent_id: str) -> str | None:
        """An agent other than `agent_id`, not provably dead, holding or reading a lock
        below the directory or glob `key`: `agent_id`'s lock of it still waits for it. A
        scan of the lock directory's locks and reads, asked only for a write under the
        agent's own directory or glob lock. An unreadable record proves nothing either way
        and is passed over, as the draining lock's own look does."""
        scoped = self._key(key)
        if not (is_directory_key(scoped) or is_glob_key(scoped)):
            return None
        # Only while a request of the agent for it is under way is its lock not granted yet
        # (`pending_scopes.py`): one `faccessat` when none is.
        name = lock_name(self.namespace, scoped)
        if not any_pending(self._dir.fd) or agent_id not in pending_requests(self._dir, name).get(
            name, {}
        ):
            return None
        for entry in self._dir.names():
            if entry.endswith(LOCK_SUFFIX):
                try:
                    found = read_holder(self._dir, entry[: -len(LOCK_SUFFIX)])
                except (CorruptRecordError, FileNotFoundError):
                    continue
                records = [] if found is None else [found.record]
            elif entry.endswith(SHARED_SUFFIX):
                records = self._members(entry)
            else:
                continue
            for record in records:
                if self._below(record, scoped, agent_id):
                    return str(record["agent_id"])
        return None

    def _members(self, entry: str) -> list[dict[str, Any]]:
        """The readable member records of the readers' entry `entry` (`<name>.shared`)."""
        entry_fd = self._dir.open_own_dir(entry)
        if entry_fd is None:
            return []
        found = []
        try:
            for member in os.listdir(entry_fd):
                try:
                    found.append(_parse_member(read_record(entry_fd, member)))
                except (CorruptRecordError, FileNotFoundError):
                    continue
        except FileNotFoundError:
            return []  # the last reader left: the directory went
        finally:
            os.close(entry_fd)
        return found

    def _below(self, record: dict[str, Any], scoped: str, agent_id: str) -> bool:
        path = record.get("lock_path")
        return (
            record["agent_id"] != agent_id
            and record.get("namespace") == self.namespace
            and isinstance(path, str)
            and is_above(scoped, path)
            and record_liveness(record) is not Liveness.DEAD
        )

    def grant_fence(self, filepath: str, agent_id: str) -> int | None:
        """None: a lock directory numbers no grants."""
        return None

    def holder(self, filepath: str) -> str | None:
        """The agent holding the lock of `filepath`; None when free or its holder is dead."""
        name = lock_name(self.namespace, self._key(filepath))
        if self._watch is not None:
            try:
                return self._watch.holder(name)
            except WatchEndedError:
                self._watch = None  # its directory went: read this reader's own afresh
        found = read_holder(self._dir, name)
        return None if found is None else holder_of(found, record_liveness(found.record))

    def _key(self, filepath: str) -> str:
        # The very key object canonicalize just returned is not resolved again (a path walk
        # of a few system calls, a tenth of a guard call); any other text is.
        return filepath if filepath is self._last_key else self.canonicalize(filepath)


class WatchEndedError(Exception):
    """The `HolderWatch` no longer watches its directory (removed or moved)."""


@dataclass(frozen=True)
class HolderFound:
    """The grant of a lock as read from its entry: its token and its parsed record."""

    token: str
    record: dict[str, Any]


def read_holder(directory: LockDir, name: str) -> HolderFound | None:
    """Lock `name`'s grant (None: free); CorruptRecordError when its record is unreadable."""
    found = directory.read_lock(name)
    if found is None:
        return None
    token, text = found
    return HolderFound(token, _parse(text, token))


def record_liveness(record: dict[str, Any]) -> Liveness:
    """Whether the process a holder record names is alive, dead or unknown (`liveness_of`)."""
    alive, _why = liveness_of(
        record["pid"],
        record["start_time"],
        record["host"],
        record["boot_id"],
        record.get("pid_ns"),
    )
    return alive


def holder_of(found: HolderFound, alive: Liveness) -> str | None:
    """The holder a grant counts for: its agent, or nobody when its process is provably dead.
    The one rule both ways of reading (afresh, or kept by `HolderWatch`) apply."""
    return None if alive is Liveness.DEAD else str(found.record["agent_id"])


class ReaderCache:
    """Readers of one lock directory kept open per repository for a few seconds, for a
    long-lived guard: a reader opens its checkout (a walk up to its git
    directory) and opens the lock directory, which would otherwise cost each call more than
    the check itself. They share one `HolderWatch` (holders kept until inotify or a pidfd
    says they changed) unless `watch_holders` is False or inotify is unavailable. Shared by
    threads."""

    def __init__(
        self, lock_dir: str | os.PathLike[str], seconds: float = 5.0, *, watch_holders: bool = True
    ) -> None:
        self.lock_dir = lock_dir
        self.seconds = seconds
        self._readers: dict[str, tuple[LockDirReader, float]] = {}
        self._guard = threading.Lock()
        self.watch: HolderWatch | None = None
        if watch_holders:
            from .holder_watch import HolderWatch  # inotify: for the long-lived guard only

            self.watch = HolderWatch.open(lock_dir)

    def get(self, repo: str) -> LockDirReader:
        now = time.monotonic()
        with self._guard:
            found = self._readers.get(repo)
            if found is not None and now - found[1] < self.seconds:
                return found[0]
        # A stale reader stays open for its users.
        reader = LockDirReader(repo, self.lock_dir, watch=self.watch, long_lived=True)
        with self._guard:
            self._readers[repo] = (reader, now)
        return reader


def _parse(text: str, token: str) -> dict[str, Any]:
    try:
        record: Any = json.loads(text)
    except ValueError:
        raise CorruptRecordError("the lock record is not JSON") from None
    ok = (
        isinstance(record, dict)
        and isinstance(record.get("agent_id"), str)
        and type(record.get("pid")) is int
        and isinstance(record.get("host"), str)
        and record.get("token") == token
    )
    if not ok:
        raise CorruptRecordError("the lock record lacks its agent, process or token")
    return dict(record)


def _parse_member(text: str) -> dict[str, Any]:
    try:
        record: Any = json.loads(text)
    except ValueError:
        raise CorruptRecordError("a shared hold's record is not JSON") from None
    if not (
        isinstance(record, dict)
        and isinstance(record.get("agent_id"), str)
        and type(record.get("pid")) is int
        and isinstance(record.get("host"), str)
    ):
        raise CorruptRecordError("a shared hold's record lacks its agent or process")
    return record
