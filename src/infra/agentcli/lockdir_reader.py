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
from typing import Any

from ..lockstore import (
    Checkout,
    CorruptRecordError,
    JournalRecord,
    Liveness,
    LockDir,
    append_once,
    current_process,
    liveness_of,
    lock_name,
    open_checkout,
    pending_reason,
)


class LockDirReader:
    """A read-only `GuardStore` over one lock directory and one repository."""

    def __init__(
        self,
        repo: str | os.PathLike[str],
        lock_dir: str | os.PathLike[str],
        namespace: str | None = None,
    ) -> None:
        self.checkout: Checkout = open_checkout(repo, namespace)
        self.namespace: str = self.checkout.namespace
        self.root: str = self.checkout.root
        self._dir = LockDir(lock_dir)
        self.lock_dir = lock_dir
        self._last_key: str | None = None
        """The key `canonicalize` returned last: the write guard asks for its holder next."""

    def journal_write(self, record: JournalRecord) -> None:
        """Append a record to the lock directory's journal: one open, one write, one close
        (a denied write, from this short process). Never raises."""
        if not record.session:
            me = current_process()
            record.session, record.pid, record.host = (
                f"{me.pid}.{me.start_time or 0}",
                me.pid,
                me.host,
            )
        append_once(self.lock_dir, record)

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
        key = self.canonicalize(filepath)
        reason = pending_reason(self.lock_dir, agent_id, key)
        if reason is None or self.holder(key) == agent_id:
            return None
        return f"revoked: {reason}"

    def grant_fence(self, filepath: str, agent_id: str) -> int | None:
        """None: a lock directory numbers no grants."""
        return None

    def holder(self, filepath: str) -> str | None:
        """The agent holding the lock of `filepath`; None when free or its holder is dead."""
        # The very key object canonicalize just returned is not resolved again (a path walk
        # of a few system calls, a tenth of a guard call); any other text is.
        key = filepath if filepath is self._last_key else self.canonicalize(filepath)
        found = self._dir.read_lock(lock_name(self.namespace, key))
        if found is None:
            return None
        token, text = found
        record = _parse(text, token)
        alive, _why = liveness_of(
            record["pid"],
            record["start_time"],
            record["host"],
            record["boot_id"],
            record.get("pid_ns"),
        )
        return None if alive is Liveness.DEAD else str(record["agent_id"])


class ReaderCache:
    """Readers of one lock directory kept open per repository for a few seconds, for a
    long-lived guard: a reader opens its checkout (a walk up to its git
    directory) and opens the lock directory, which would otherwise cost each call more than
    the check itself. Shared by threads."""

    def __init__(self, lock_dir: str | os.PathLike[str], seconds: float = 5.0) -> None:
        self.lock_dir = lock_dir
        self.seconds = seconds
        self._readers: dict[str, tuple[LockDirReader, float]] = {}
        self._guard = threading.Lock()

    def get(self, repo: str) -> LockDirReader:
        now = time.monotonic()
        with self._guard:
            found = self._readers.get(repo)
            if found is not None and now - found[1] < self.seconds:
                return found[0]
        reader = LockDirReader(repo, self.lock_dir)  # a stale one stays open for its users
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
