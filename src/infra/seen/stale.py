"""The one check every guard makes before a write: has the file changed since this agent
last saw it, by anyone but itself?

An agent that read a file, then writes it, writes from what it read. If another agent (or a
person) changed the file in between, the write erases that change even though the writer
holds the lock at the moment it writes. So a write is refused when:

- the agent saw the file (a Read, a whole-file view in a shell command): never seen, a file
  is created or overwritten on purpose and is allowed;
- its content is not the version the agent saw (`version.still`: one stat, or the digest);
- and the change is not the agent's own: the last write a guard allowed since the sighting
  was another agent's, or no guard allowed one (a person, a tool outside lockyard).

An allowed write is noted as this agent's (`note_write`, by the hook once the whole call is
allowed: the check itself only reads), so its own later edits of the file (Edit after Edit)
never count as someone else's change. The note is skipped when it would say nothing new,
which keeps the common path at one read and one stat.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from .book import FileEntry, SeenBook, Sighting, WriteNote, book_for, sighting_json, write_json
from .version import ABSENT, FileVersion, still, version_of

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Change:
    """How `key` changed since the agent saw it."""

    key: str
    seen_at: float
    writer: WriteNote | None
    """The last write another agent was allowed since the sighting; None: no guarded one."""
    gone: bool
    """The file no longer exists."""
    appeared: bool
    """The file did not exist when the agent looked."""
    own_write: bool = False
    """What the agent knew of the file was its own write, not a read."""

    def says(self) -> str:
        """One clause: who changed it and when (`agent B wrote it at 14:03:40 under ...`)."""
        what = "deleted" if self.gone else "created" if self.appeared else "changed"
        if self.own_write and self.writer is not None:
            grant = f" under its lock grant {self.writer.grant}" if self.writer.grant else ""
            return (
                f"{what} since you wrote it at {_clock(self.seen_at)}: agent "
                f"{self.writer.agent} wrote it at {_clock(self.writer.at)}{grant}"
            )
        if self.writer is None:
            return (
                f"{what} since you read it at {_clock(self.seen_at)}, by no write lockyard "
                "allowed (a person or a tool outside lockyard)"
            )
        grant = f" under its lock grant {self.writer.grant}" if self.writer.grant else ""
        return (
            f"{what} since you read it at {_clock(self.seen_at)}: agent {self.writer.agent} "
            f"wrote it at {_clock(self.writer.at)}{grant}"
        )

    def to_json(self) -> dict[str, object]:
        writer = self.writer
        return {
            "seen_at": round(self.seen_at, 3),
            "by": None if writer is None else writer.agent,
            "at": None if writer is None else round(writer.at, 3),
            "grant": None if writer is None else writer.grant,
            "gone": self.gone,
            "text": f"{self.key} {self.says()}",
        }


def write_change(root: str, agent_id: str, key: str) -> tuple[Change | None, bool]:
    """What a write of `key` by `agent_id` (who holds its lock) would erase (None: nothing),
    and whether the book must be told of that write once the call is allowed (`note_write`):
    False when it already names the agent as the last writer since every look. Only reads:
    one read of the book's entry and one `stat` in the common case. A book or file that
    cannot be read is never a change: the lock alone decides then."""
    book = book_for(root)
    try:
        entry = book.entry(key)
        sighting = entry.sighting(agent_id)
        change = None if sighting is None else _change(book, agent_id, key, entry, sighting)
    except OSError as exc:
        logger.warning("cannot tell whether %s changed since %s saw it: %s", key, agent_id, exc)
        return None, False
    return change, change is None and not _noted(entry, agent_id, sighting)


def note_write(root: str, agent_id: str, key: str, grant: str | None) -> None:
    """The book's note of an allowed write of `key` by `agent_id` (under `grant`, named in
    others' refusals): its own later edits then never count as someone else's change.
    Never raises: a note not taken can cost a refusal, never an edit."""
    try:
        _note_write(book_for(root), agent_id, key, grant)
    except OSError as exc:
        logger.warning("cannot note that %s wrote %s: %s", agent_id, key, exc)


def change_since_seen(root: str, agent_id: str, key: str) -> Change | None:
    """How `key` (of the checkout at `root`) changed since `agent_id` last saw it, or None:
    unchanged, changed only by the agent's own allowed writes, or never seen."""
    return seen_state(root, agent_id, key)[1]


def seen_state(root: str, agent_id: str, key: str) -> tuple[bool | None, Change | None]:
    """Whether `key` changed since `agent_id` last saw it (None: never saw it), and how."""
    book = book_for(root)
    try:
        entry = book.entry(key)
        sighting = entry.sighting(agent_id)
        if sighting is None:
            return None, None
        change = _change(book, agent_id, key, entry, sighting)
    except OSError as exc:
        logger.warning("cannot tell whether %s changed since %s saw it: %s", key, agent_id, exc)
        return None, None
    return change is not None, change


def _change(
    book: SeenBook, agent_id: str, key: str, entry: FileEntry, sighting: Sighting
) -> Change | None:
    write = entry.write
    since = write if write is not None and write.at >= sighting.at else None
    if since is not None and since.agent == agent_id:
        # Its own allowed write since it looked: what it knows is what it wrote. (A person's
        # edit after that write cannot be told from the write itself without a post-tool
        # hook: only a Read pins a version.) No look at the file: the common path of an
        # agent editing a file again and again costs the entry's one `stat`.
        return None
    path = book.path(key)
    if sighting.version is None:  # what it knows is its own write: only others' count
        if since is None:
            return None
        gone = not os.path.lexists(path)
        return Change(key, sighting.at, since, gone=gone, appeared=False, own_write=True)
    same, now = still(sighting.version, path)  # one stat, or the digest when it moved
    if same:
        return None
    current = now if now is not None else FileVersion(ABSENT, None, True)
    return Change(
        key,
        sighting.at,
        since,
        gone=current.digest == ABSENT,
        appeared=sighting.version.digest == ABSENT,
    )


def _noted(entry: FileEntry, agent_id: str, sighting: Sighting | None) -> bool:
    """Whether the book already says all a new write by the agent would: its last allowed
    writer is the agent, since every look anyone took (a look after the note must see this
    write as a change after it)."""
    write = entry.write
    if sighting is None or write is None or write.agent != agent_id:
        return False
    return write.at >= entry.last_look


def _note_write(book: SeenBook, agent_id: str, key: str, grant: str | None) -> None:
    """The file's last allowed writer is `agent_id`; what the agent knows of a file it never
    read is this write of its own."""
    at = time.time()

    def change(raw: dict[str, Any]) -> None:
        raw["write"] = write_json(agent_id, at, grant)
        seen = raw.setdefault("seen", {})
        if isinstance(seen, dict) and agent_id not in seen:
            seen[agent_id] = sighting_json(None, at)

    book.note(key, change)


def stale_reason(change: Change, acquire_tool: str) -> str:
    """The refusal an agent reads: what changed, who did it, what to do."""
    key = change.key
    todo = (
        f"Look again ({key} no longer exists: was it removed on purpose?) before you write it"
        if change.gone
        else f"Read {key} again, then make your edit on what it holds now"
    )
    return (
        f"{key} {change.says()}, so your write would erase that change. {todo}. You keep "
        f"your lock: no need to call {acquire_tool} again."
    )


def note_read(root: str, agent_id: str, key: str) -> None:
    """Record that `agent_id` sees `key` as it is now (a Read of it is about to run)."""
    book = book_for(root)
    try:
        version = version_of(book.path(key))
        at = time.time()

        def change(raw: dict[str, Any]) -> None:
            seen = raw.get("seen")
            raw["seen"] = seen = seen if isinstance(seen, dict) else {}
            seen[agent_id] = sighting_json(version, at)

        book.note(key, change)
    except OSError as exc:
        logger.warning("cannot note that %s read %s: %s", agent_id, key, exc)


def forget(root: str, agent_id: str) -> None:
    """Drop what `agent_id` saw of the checkout at `root` (its session ended; a later agent
    of the same id starts with nothing seen)."""
    try:
        book_for(root).forget(agent_id)
    except OSError as exc:
        logger.warning("cannot forget what %s saw: %s", agent_id, exc)


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))
