"""What a waiter sees of the locks it waits for: who holds each, since when, its place in line.

Read from the store alone (holder records and queue entries), so it is the same for an agent's
`lock_acquire`, a person's `lockyard lock` and `lock_status`, on either backend. A lock may
have several holders (shared holds) and a waiter may not be in line yet: the view keeps both
cases instead of assuming one exclusive holder. A file may be held through a directory lock
above it or a glob lock over it (its own lock is free meanwhile, and its waiter stands in
that lock's line): the view names those holders, with the lock they hold.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..lockstore import HolderRecord, WaiterRecord, directory_ancestors, is_directory_key


class LineReader(Protocol):
    """The reads a view needs (every `LockBackend` has them)."""

    def holder_record(self, filepath: str) -> HolderRecord | None: ...
    def waiters(self, filepath: str) -> list[WaiterRecord]: ...
    def readers(self, filepath: str) -> tuple[str, ...]: ...
    def globs_over(self, key: str) -> tuple[str, ...]: ...
    def last_active(self, agent_id: str) -> float | None: ...


@dataclass(frozen=True, slots=True)
class Holding:
    """One holder of a lock."""

    agent_id: str
    since: float | None
    shared: bool = False
    """A reader's hold (mode "shared")."""
    through: str | None = None
    """The directory or glob lock it holds over the file, when not the file's own lock."""

    def describe(self, now: float) -> str:
        """`bob for 3 s (shared)`, `ann for 1 s (src/api/)`."""
        text = (
            self.agent_id
            if self.since is None
            else f"{self.agent_id} for {_span(now - self.since)}"
        )
        notes = [note for note in ("shared" if self.shared else "", self.through or "") if note]
        return text + (f" ({', '.join(notes)})" if notes else "")


@dataclass(frozen=True, slots=True)
class LineView:
    """One lock as `agent_id` sees it while it waits for it."""

    key: str
    holders: tuple[Holding, ...]
    ahead: int
    """Waiters before `agent_id` in this lock's queue (all of them when it is not in line)."""
    in_line: bool
    """Whether `agent_id` stands in this lock's queue now."""

    def describe(self, now: float | None = None) -> str:
        """`src/a.py: held by bob for 12 s, 1 ahead of you in line` (one short clause)."""
        moment = time.time() if now is None else now
        if self.holders:
            held = "held by " + ", ".join(h.describe(moment) for h in self.holders)
        else:
            held = "being handed over"
        if self.in_line:
            place = "you are next" if self.ahead == 0 else f"{self.ahead} ahead of you in line"
        else:
            place = "nobody else waiting" if self.ahead == 0 else f"{self.ahead} waiting"
        return f"{self.key}: {held}, {place}"

    def to_dict(self, now: float | None = None) -> dict[str, object]:
        """Plain JSON for tool results and progress."""
        moment = time.time() if now is None else now
        return {
            "filepath": self.key,
            "held_by": [
                {
                    "agent": h.agent_id,
                    "for_seconds": None if h.since is None else round(max(0.0, moment - h.since)),
                    **({"shared": True} if h.shared else {}),
                    **({} if h.through is None else {"through": h.through}),
                }
                for h in self.holders
            ],
            "ahead_of_you": self.ahead,
            "in_line": self.in_line,
        }


def line_view(store: LineReader, agent_id: str, key: str) -> LineView:
    """`key` as `agent_id` sees it now (three reads, and three per directory or glob lock
    over a file; a record that vanished between them is simply not shown). Its readers
    (shared holds) are holders too: an exclusive request waits for them, and the line's own
    holder may be waiting for them as well."""
    holders, own = _holders(store, agent_id, key)
    queue = store.waiters(key)
    mine = [index for index, waiter in enumerate(queue) if waiter.agent_id == agent_id]
    ahead = mine[0] if mine else len(queue)
    if holders or mine or own:
        return LineView(key, holders, ahead, bool(mine) or own)
    # Free itself: a file under a directory or glob lock waits in that lock's line.
    for scope in _scopes_over(store, key):
        others, own = _holders(store, agent_id, scope)
        held = tuple(replace(h, through=scope) for h in others)
        line = store.waiters(scope)
        places = [index for index, waiter in enumerate(line) if waiter.agent_id == agent_id]
        if held or places or own:
            return LineView(key, held, places[0] if places else len(line), bool(places) or own)
    return LineView(key, holders, ahead, False)


def _holders(store: LineReader, agent_id: str, key: str) -> tuple[tuple[Holding, ...], bool]:
    """The others holding `key` (its holder, its readers), and whether `agent_id` holds its
    line itself: a request waiting, with the line, for readers to leave, or for the holds
    below a directory, is first in line, not one of those it waits for."""
    record = store.holder_record(key)
    own = record is not None and record.agent_id == agent_id
    holders: tuple[Holding, ...] = ()
    if record is not None and not own:
        holders = (Holding(record.agent_id, record.acquired_at),)
    readers = tuple(
        Holding(reader, None, shared=True) for reader in store.readers(key) if reader != agent_id
    )
    return holders + readers, own


def _scopes_over(store: LineReader, key: str) -> list[str]:
    """The directory keys above `key` (outermost first), then the globs over a file key."""
    if key.startswith("/"):
        return []  # a key outside the checkout: no directory lock covers it
    globs = () if is_directory_key(key) else store.globs_over(key)
    return directory_ancestors(key) + list(globs)


def describe_waits(views: list[LineView], now: float | None = None) -> str:
    """Every view in one line: `a.py: held by bob for 3 s, you are next; b.py: ...`."""
    return "; ".join(view.describe(now) for view in views)


def describe_look(entry: Mapping[str, Any]) -> str | None:
    """A `lock_status` entry as the same clause (`a.py: held by bob for 3 s, 2 waiting (you
    among them)`), for a transport that sees only the tools' results; None when the asker
    holds it already."""
    if entry.get("you_hold"):
        return None
    who = [f"{h['agent']} for {_span(h['for_seconds'])}" for h in entry.get("held_by", [])]
    who += [f"{reader} (shared)" for reader in entry.get("shared_by", [])]
    for overlap in entry.get("overlapping", []):
        who += [f"{h['agent']} ({overlap['filepath']})" for h in overlap.get("held_by", [])]
    held = f"held by {', '.join(who)}" if who else "being handed over"
    queued = len(entry.get("waiting", []))
    place = f"{queued} waiting" + (" (you among them)" if entry.get("you_wait") else "")
    return f"{entry.get('filepath')}: {held}, {place if queued else 'nobody else waiting'}"


def _span(seconds: float) -> str:
    whole = max(0, round(seconds))
    if whole < 120:
        return f"{whole} s"
    if whole < 7200:
        return f"{whole // 60} min"
    return f"{whole // 3600} h"
