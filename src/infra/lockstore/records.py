"""What the lock directory records, and what the store reports. All JSON-dumpable.

Records are written once, complete, before they become visible (see lockdir/disk.py), so a
reader sees a whole record or none.
"""

from __future__ import annotations

import functools
import json
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import CorruptRecordError
from .liveness import Liveness, ProcessIdentity, liveness_of

LivenessText = Literal["alive", "dead", "unknown"]


class _ProcessRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    agent_id: str
    token: str
    pid: int
    start_time: int | None
    host: str
    boot_id: str | None
    pid_ns: str | None = None
    lock_path: str
    """The lock key: repository-relative (`src/app.py`) or a literal `__name__`."""
    namespace: str
    checkout: str | None = None
    """The root of the checkout the agent works in (on `host`); None for a record that
    locks no file (an agent's claim on its id, `crossproc/agent_claims.py`)."""

    def liveness(self) -> tuple[Liveness, str]:
        return liveness_of(self.pid, self.start_time, self.host, self.boot_id, self.pid_ns)


class HolderRecord(_ProcessRecord):
    """Who holds a lock: agent, grant token, process (pid, start time, host, boot), when."""

    acquired_at: float
    """Wall-clock time of the grant (seconds since the epoch)."""
    mode: Literal["exclusive", "shared"] = "exclusive"
    """"shared": one of the readers holding the file together (lockdir/shared_holds.py), or
    a shared request holding a directory's line while it waits for the writes below it."""
    draining: bool = False
    """A directory or glob lock not granted yet: its holder (or reader) waits for the holds
    below it to go (`holds_graph.waits_below`). Set by the store's listing, never written."""
    fence: int | None = None
    """The grant's fencing number, where the backend issues them (PostgreSQL): it only grows
    per lock, so a write stamped with an older number is from a grant that was lost."""


class WaiterRecord(_ProcessRecord):
    """One queued waiter; `ticket` orders the queue (arrival order)."""

    ticket: int
    since: float
    """Wall-clock time the wait began."""


class LockInfo(BaseModel):
    """A lock as `list_locks` reports it.

    `holder` is None in two cases: the record is unreadable (`problem` says why), or the lock
    is free but reserved for its first live waiter (`liveness` is then that waiter's).
    """

    model_config = ConfigDict(frozen=True)

    lock_path: str
    namespace: str | None
    holder: HolderRecord | None
    age_seconds: float | None
    liveness: LivenessText
    liveness_reason: str
    waiters: tuple[WaiterRecord, ...] = ()
    problem: str | None = None
    """Set when the lock's record cannot be read; such a lock is reported, never removed."""
    shared_holders: tuple[HolderRecord, ...] = ()
    """The agents holding the file shared (readers). `holder`, if any, is then an agent
    waiting, with the lock, for them to leave (an exclusive grant or an upgrade)."""


def shared_node(lock_path: str, agent_id: str) -> str:
    """The wait-for graph's node of `agent_id`'s shared hold of `lock_path`: an exclusive
    grant waiting for the readers waits on each reader's node."""
    return f"{lock_path} (shared by {agent_id})"


class Reclamation(BaseModel):
    """A stale lock taken away from a provably dead holder."""

    model_config = ConfigDict(frozen=True)

    lock_path: str
    namespace: str
    holder: HolderRecord
    reason: str
    reclaimed_by_pid: int
    reclaimed_by_agent: str | None = None
    reclaimed_at: float = Field(default_factory=time.time)


class LostLock(BaseModel):
    """A lock an agent was granted and no longer holds without having released it (its
    backend session ended, or the lock was taken over). Reported to the agent once."""

    model_config = ConfigDict(frozen=True)

    filepath: str
    fence: int | None
    reason: str


class StoreSnapshot(BaseModel):
    """Holds and waits of a whole lock directory, for rebuilding a wait-for graph.

    `holds` maps lock key -> holding agent; `waits` lists (agent, lock key) in queue order.
    """

    model_config = ConfigDict(frozen=True)

    holds: dict[str, str]
    waits: tuple[tuple[str, str], ...]
    locks: tuple[LockInfo, ...]
    taken_at: float = Field(default_factory=time.time)


def encode_holder(
    me: ProcessIdentity,
    agent_id: str,
    token: str,
    key: str,
    namespace: str,
    checkout: str | None = None,
) -> str:
    # The record is built on every grant: only the token and the time change, so the rest is
    # serialised once per (process, agent, key). Tokens are hex, safe to splice into JSON.
    head = _holder_head(me, agent_id, key, namespace, checkout)
    return f'{head},"token":"{token}","acquired_at":{time.time()!r}}}'


@functools.lru_cache(maxsize=4096)
def _holder_head(
    me: ProcessIdentity, agent_id: str, key: str, namespace: str, checkout: str | None
) -> str:
    fields = _holder_fields(me, agent_id, key, namespace, checkout)
    return json.dumps(fields, separators=(",", ":"))[:-1]


def _holder_fields(
    me: ProcessIdentity, agent_id: str, key: str, namespace: str, checkout: str | None
) -> dict[str, object]:
    """A holder record's fields that name the holder (all but its token and time)."""
    return {
        "agent_id": agent_id,
        "pid": me.pid,
        "start_time": me.start_time,
        "host": me.host,
        "boot_id": me.boot_id,
        "pid_ns": me.pid_ns,
        "lock_path": key,
        "namespace": namespace,
        "checkout": checkout,
    }


def holder_card(
    me: ProcessIdentity,
    agent_id: str,
    key: str,
    namespace: str,
    checkout: str,
    writer: ProcessIdentity,
) -> str:
    """The text of a holder card (see lockdir/disk.py): a holder record without its token and
    time. `writer` is the process that publishes the grants (when it is not `me`, the
    holder named): a card is removed only once both are provably dead, so no grant that
    names it can still appear."""
    fields = _holder_fields(me, agent_id, key, namespace, checkout)
    if writer != me:
        fields["writer"] = {
            "pid": writer.pid,
            "start_time": writer.start_time,
            "host": writer.host,
            "boot_id": writer.boot_id,
            "pid_ns": writer.pid_ns,
        }
    return json.dumps(fields, separators=(",", ":"))


CardProcess = tuple[int, int | None, str, str | None, str | None]
"""(pid, start time, host, boot id, pid namespace): what `liveness_of` judges."""


def card_processes(text: str) -> list[CardProcess] | None:
    """The processes whose grants holder card `text` may name: the holder, and the process
    writing its grants when that is another one. None for a text that is no card."""
    try:
        holder = decode_holder(text[:-1] + ',"token":"0","acquired_at":0}', "a holder card")
        writer = json.loads(text).get("writer")
        processes = [(holder.pid, holder.start_time, holder.host, holder.boot_id, holder.pid_ns)]
        if writer is not None:
            processes.append(
                (
                    int(writer["pid"]),
                    None if writer["start_time"] is None else int(writer["start_time"]),
                    str(writer["host"]),
                    None if writer["boot_id"] is None else str(writer["boot_id"]),
                    None if writer["pid_ns"] is None else str(writer["pid_ns"]),
                )
            )
    except (ValueError, TypeError, KeyError, AttributeError, CorruptRecordError):
        return None
    return processes


def encode_waiter(
    me: ProcessIdentity,
    agent_id: str,
    token: str,
    ticket: int,
    key: str,
    namespace: str,
    checkout: str,
) -> str:
    """A queue entry's record: the holder's fields, its wait's token, ticket and start."""
    fields = _holder_fields(me, agent_id, key, namespace, checkout)
    fields.update(token=token, ticket=ticket, since=time.time())
    return json.dumps(fields, separators=(",", ":"))


# A record is written once under its grant token or ticket and never changes, and every
# waiter's re-check, `status` and the monitor read the same few again and again: each text is
# validated once (the models are frozen, so sharing one is safe). Failures are not remembered.
_holder_of = functools.lru_cache(maxsize=1024)(HolderRecord.model_validate_json)
_waiter_of = functools.lru_cache(maxsize=1024)(WaiterRecord.model_validate_json)


def decode_holder(text: str | bytes, where: str) -> HolderRecord:
    try:
        return _holder_of(text)
    except ValidationError as error:
        raise CorruptRecordError(
            f"unreadable holder record in {where}{_belongs_to(text)}: {_summary(error)}"
        ) from None


def _summary(error: ValidationError) -> str:
    """pydantic's errors on one line: `pid: Input should be a valid integer; token: missing`."""
    parts = []
    for detail in error.errors(include_url=False):
        field = ".".join(str(part) for part in detail["loc"]) or "record"
        parts.append(f"{field}: {detail['msg']}")
    return "; ".join(parts)


def _belongs_to(text: str | bytes) -> str:
    """` (for <file>)` when a damaged record still names its file, else nothing."""
    try:
        data = json.loads(text)
    except ValueError:
        return ""
    path = data.get("lock_path") if isinstance(data, dict) else None
    return f" (for {path})" if isinstance(path, str) else ""


def decode_waiter(text: str | bytes, where: str) -> WaiterRecord:
    try:
        return _waiter_of(text)
    except ValidationError as error:
        raise CorruptRecordError(
            f"unreadable waiter record in {where}: {_summary(error)}"
        ) from None
