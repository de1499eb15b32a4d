"""The agent CLI sessions of a lock directory: `<lock dir>/sessions/<pid>-<start>.json`.

A session is one agent CLI process (the *anchor*) with lockyard's MCP server running under
it. `lockyard serve` registers the session when it starts and removes it when it ends; a hook
run by the same CLI finds it by walking its own ancestors and looking each one up by name, so
no configuration tells the two processes apart or together. A record whose anchor process
is gone describes a closed session and is ignored (and tidied by whoever notices).

Plain JSON and the standard library only: the hooks read this on every tool call.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from ..lockstore import ensure_private_dir, open_dir, write_atomic
from .process_tree import ProcessRef, ancestors, is_alive

SESSIONS_DIR: Final = "sessions"
_TEMP_PREFIX: Final = ".tmp-"
_REMEMBERED: Final = 1024
"""Records `read_again` keeps at most (then it starts over)."""


class SessionRegistryError(Exception):
    """The sessions directory is unusable (not a directory, a symlink, someone else's)."""


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One agent CLI session: who it is, which CLI process anchors it, which repo it edits."""

    agent_id: str
    cli: str
    anchor_pid: int
    anchor_start_time: int
    server_pid: int
    repo: str
    started_at: float

    @property
    def anchor(self) -> ProcessRef:
        return ProcessRef(self.anchor_pid, self.anchor_start_time)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SessionRecord | None:
        """The record, or None when `text` is not one (a foreign or damaged file)."""
        try:
            data: Any = json.loads(text)
            record = cls(
                agent_id=data["agent_id"],
                cli=data["cli"],
                anchor_pid=data["anchor_pid"],
                anchor_start_time=data["anchor_start_time"],
                server_pid=data["server_pid"],
                repo=data["repo"],
                started_at=data["started_at"],
            )
        except (ValueError, TypeError, KeyError):
            return None
        ok = (
            all(isinstance(v, str) for v in (record.agent_id, record.cli, record.repo))
            and all(type(v) is int for v in (record.anchor_pid, record.anchor_start_time))
            and type(record.server_pid) is int
            and isinstance(record.started_at, int | float)
        )
        return record if ok else None


class SessionRegistry:
    """The `sessions/` directory of one lock directory."""

    def __init__(self, lock_dir: str | os.PathLike[str]) -> None:
        self.lock_dir = Path(lock_dir)
        self.directory = self.lock_dir / SESSIONS_DIR
        self._read: dict[ProcessRef, tuple[tuple[int, ...], SessionRecord | None]] = {}
        """The last record read of each anchor, with its file's version (`read_again`)."""
        self._directory_text = os.fspath(self.directory)

    def path_for(self, anchor: ProcessRef) -> Path:
        return self.directory / f"{anchor.label}.json"

    def _path_text(self, anchor: ProcessRef) -> str:
        # `path_for` as text: the guard looks a record up on every tool call, and building a
        # Path (and hashing it) costs more than the lstat it is for.
        return f"{self._directory_text}/{anchor.pid}-{anchor.start_time}.json"

    def ensure(self) -> Path:
        """Create the directory (0700) if needed; refuse a symlink or someone else's."""
        return ensure_private_dir(self.directory, SessionRegistryError)

    def register(self, record: SessionRecord) -> Path:
        """Publish `record` atomically (a reader sees all of it or nothing)."""
        target = self.path_for(record.anchor)
        with open_dir(self.ensure()) as dir_fd:
            data = record.to_json().encode()
            write_atomic(dir_fd, target.name, data, mode=0o600, temp_prefix=_TEMP_PREFIX)
        return target

    def unregister(self, record: SessionRecord) -> None:
        """Remove the record if it is still this server's (a newer server may have replaced it)."""
        current = self.read(record.anchor)
        if current is not None and current.server_pid == record.server_pid:
            with contextlib.suppress(OSError):
                os.unlink(self.path_for(record.anchor))

    def read(self, anchor: ProcessRef) -> SessionRecord | None:
        path = self._path_text(anchor)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        with os.fdopen(fd, encoding="utf-8", errors="replace") as handle:
            record = SessionRecord.from_json(handle.read(65536))
            self._read[anchor] = (_version(os.fstat(fd)), record)
            return record

    def read_again(self, anchor: ProcessRef) -> SessionRecord | None:
        """`read`, answered from this registry's last read of the record while its file
        is unchanged (a long-lived reader, the guard: one `stat` instead of a parse)."""
        try:
            version = _version(os.lstat(self._path_text(anchor)))
        except OSError:
            return None
        known = self._read.get(anchor)
        if known is not None and known[0] == version:
            return known[1]
        if len(self._read) > _REMEMBERED:
            self._read.clear()
        return self.read(anchor)

    def find_for(self, chain: Iterable[ProcessRef], *, again: bool = False) -> SessionRecord | None:
        """The session anchored at the nearest process of `chain` that anchors one (`again`:
        through `read_again`)."""
        read = self.read_again if again else self.read
        for ref in chain:
            record = read(ref)
            if record is not None and record.anchor == ref:
                return record
        return None

    def find_for_this_process(self) -> SessionRecord | None:
        """The session of the agent CLI that (through any launchers) started this process."""
        return self.find_for(ancestors())

    def sessions(self) -> list[tuple[SessionRecord, bool]]:
        """Every readable session with whether its CLI process still runs, oldest first."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        found: list[tuple[SessionRecord, bool]] = []
        for name in names:
            if name.startswith(_TEMP_PREFIX) or not name.endswith(".json"):
                continue
            try:
                text = (self.directory / name).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            record = SessionRecord.from_json(text)
            if record is not None:
                found.append((record, is_alive(record.anchor)))
        return sorted(found, key=lambda item: (item[0].started_at, item[0].agent_id))

    def remove_closed(self) -> list[SessionRecord]:
        """Delete the records of sessions whose CLI process is gone; return them."""
        removed = []
        for record, alive in self.sessions():
            if not alive:
                with contextlib.suppress(OSError):
                    os.unlink(self.path_for(record.anchor))
                removed.append(record)
        return removed


def _version(stat: os.stat_result) -> tuple[int, ...]:
    """What changes when a record file is replaced (`register` renames a new file over it)."""
    return (stat.st_ino, stat.st_dev, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size)


def new_record(
    agent_id: str, cli: str, anchor: ProcessRef, repo: str, server_pid: int | None = None
) -> SessionRecord:
    return SessionRecord(
        agent_id=agent_id,
        cli=cli,
        anchor_pid=anchor.pid,
        anchor_start_time=anchor.start_time,
        server_pid=os.getpid() if server_pid is None else server_pid,
        repo=repo,
        started_at=time.time(),
    )
