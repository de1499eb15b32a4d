"""The book of what each agent last saw, kept per clone beside git's own state.

It lives in `<git common dir>/lockyard/seen/` (every worktree of a clone shares it; a file
is named by its checkout root and key, so one key in two worktrees is two files). Not in the
lock store: a file's content is local to a checkout even when the locks are on a server, and
every process that can write the checkout's files can write here, whichever backend it uses.

One small JSON entry per file (`files/<digest>`), so a guard's check is one read and one
`stat` of the file: the last write a guard allowed there (which agent, when, under which
grant) and, per agent, the version it last saw and when (a Read, a whole-file viewer in a
shell command, or its own write). Entries are published whole (a temp file renamed over
them): readers never lock and never see half of one; writers take `book.lock` in turn, so
two agents noting one file at once both count. Names are digests: agent ids and paths may
hold any character. An entry that cannot be read counts as empty: the book only ever adds
refusals to a write the lock already allows, so losing an entry can cost a refusal, never
an edit.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from ..clone_state import clone_state_dir
from .version import FileVersion

logger = logging.getLogger(__name__)

MAX_ENTRY_BYTES: Final = 256 * 1024
MAX_AGENTS_PER_FILE: Final = 64
"""Sightings kept per file; the oldest go first (an agent that long gone reads again)."""
_SETTLED_NS: Final = 100_000_000
"""How old an entry file must be before its `stat` alone says it is unchanged (0.1 s: many
ticks of the kernel's coarse clock, which stamps file times)."""
_CACHED_ENTRIES: Final = 4096
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMP_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Sighting:
    """The version of a file an agent last saw, and when (epoch seconds)."""

    version: FileVersion | None
    """None: what the agent knows of the file is its own write, allowed at `at` (a pre-tool
    hook cannot know the content the write will leave)."""
    at: float


@dataclass(frozen=True, slots=True)
class WriteNote:
    """The last write a guard allowed to a file."""

    agent: str
    at: float
    grant: str | None
    """The grant it was allowed under (`#7`: a fencing number), when the store numbers them."""


@dataclass(frozen=True, slots=True)
class FileEntry:
    """What the book knows of one file."""

    write: WriteNote | None
    seen: dict[str, Sighting]
    last_look: float = 0.0
    """When the latest of `seen` was taken (0: none), so a check need not scan them all."""

    def sighting(self, agent_id: str) -> Sighting | None:
        return self.seen.get(agent_id)


EMPTY: Final = FileEntry(None, {})


class SeenBook:
    """What agents saw of the files of the checkout rooted at `root`."""

    def __init__(self, root: str, directory: str) -> None:
        self.root = root
        self.directory = directory
        self._files = os.path.join(directory, "files")
        self._cache: dict[str, tuple[str, tuple[int, int, int, int], FileEntry]] = {}
        """Per key: its entry file, that file's stat signature and what it says."""

    def path(self, key: str) -> str:
        return os.path.join(self.root, key)

    def entry(self, key: str) -> FileEntry:
        """What the book knows of `key` (EMPTY when nothing, or when its entry is unreadable).

        A long-lived process (an SDK agent's hooks, the HTTP guard) keeps each entry it parsed
        and reuses it while a `stat` shows the same entry file: every note publishes a new
        file (a new inode). An entry younger than `_SETTLED_NS` is read again each time, so
        a reused inode number within one clock tick cannot pass for the old entry."""
        cached = self._cache.get(key)
        path = self._entry_path(key) if cached is None else cached[0]
        try:
            st = os.stat(path)
        except OSError:
            return EMPTY
        signature = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if cached is not None and cached[1] == signature:
            return cached[2]
        raw = self._raw(key)
        entry = EMPTY if raw is None else _parse(raw)
        if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) >= _SETTLED_NS:
            if len(self._cache) >= _CACHED_ENTRIES:
                self._cache.clear()
            self._cache[key] = (path, signature, entry)
        return entry

    def note(self, key: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Apply `change` to the raw entry of `key` (a dict with `write` and `seen`), in turn
        with every other writer of the book."""
        with self._turn():
            raw = self._raw(key) or {"write": None, "seen": {}}
            raw["root"], raw["key"] = self.root, key
            change(raw)
            seen = raw.get("seen")
            if isinstance(seen, dict) and len(seen) > MAX_AGENTS_PER_FILE:
                newest = sorted(seen.items(), key=lambda item: _at(item[1]), reverse=True)
                raw["seen"] = dict(newest[:MAX_AGENTS_PER_FILE])
            self._publish(_name(self.root, key), raw)

    def forget(self, agent_id: str) -> None:
        """Drop every sighting of `agent_id` in this checkout (its session ended)."""
        try:
            names = [n for n in os.listdir(self._files) if not n.startswith(".")]
        except FileNotFoundError:
            return
        with self._turn():
            for name in names:
                raw = self._read(os.path.join(self._files, name))
                if raw is None or raw.get("root") != self.root:
                    continue
                seen = raw.get("seen")
                if isinstance(seen, dict) and seen.pop(agent_id, None) is not None:
                    self._publish(name, raw)

    # -- files -------------------------------------------------------------------------------

    def _entry_path(self, key: str) -> str:
        return os.path.join(self._files, _name(self.root, key))

    def _raw(self, key: str) -> dict[str, Any] | None:
        raw = self._read(self._entry_path(key))
        if raw is None or raw.get("root") != self.root or raw.get("key") != key:
            return None  # not ours (a digest collision, or a damaged entry)
        return raw

    @staticmethod
    def _read(path: str) -> dict[str, Any] | None:
        try:
            fd = os.open(path, _READ_FLAGS)
        except OSError:
            return None
        try:
            data = os.read(fd, MAX_ENTRY_BYTES)
        except OSError:
            return None
        finally:
            os.close(fd)
        try:
            raw = json.loads(data)
        except ValueError:
            return None
        return raw if isinstance(raw, dict) else None

    @contextlib.contextmanager
    def _turn(self) -> Iterator[None]:
        os.makedirs(self._files, exist_ok=True)
        fd = os.open(os.path.join(self.directory, "book.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing drops the flock

    def _publish(self, name: str, raw: dict[str, Any]) -> None:
        data = json.dumps(raw, separators=(",", ":")).encode()
        temp = os.path.join(self._files, f".{name}.{secrets.token_hex(4)}")
        fd = os.open(temp, _TEMP_FLAGS, 0o644)
        try:
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(temp, os.path.join(self._files, name))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise


def sighting_json(version: FileVersion | None, at: float) -> dict[str, Any]:
    return {"at": at, "version": None if version is None else version.to_json()}


def write_json(agent_id: str, at: float, grant: str | None) -> dict[str, Any]:
    return {"agent": agent_id, "at": at, "grant": grant}


def _parse(raw: dict[str, Any]) -> FileEntry:
    write = raw.get("write")
    note = None
    if isinstance(write, dict):
        agent, at, grant = write.get("agent"), write.get("at"), write.get("grant")
        if isinstance(agent, str) and isinstance(at, float | int):
            note = WriteNote(agent, float(at), grant if isinstance(grant, str) else None)
    seen: dict[str, Sighting] = {}
    raw_seen = raw.get("seen")
    for agent_id, item in raw_seen.items() if isinstance(raw_seen, dict) else ():
        if not isinstance(item, dict) or not isinstance(at := item.get("at"), float | int):
            continue
        version_raw = item.get("version")
        version = None if version_raw is None else FileVersion.from_json(version_raw)
        if version_raw is None or version is not None:
            seen[agent_id] = Sighting(version, float(at))
    return FileEntry(note, seen, max((s.at for s in seen.values()), default=0.0))


def _at(item: object) -> float:
    at = item.get("at") if isinstance(item, dict) else None
    return float(at) if isinstance(at, float | int) else 0.0


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(errors="surrogatepass"), digest_size=16).hexdigest()


def _name(root: str, key: str) -> str:
    return _digest(f"{root}\0{key}")


@functools.lru_cache(maxsize=64)
def book_for(root: str) -> SeenBook:
    """The book of the checkout rooted at `root` (its clone's, or a per-user one outside git)."""
    return SeenBook(root, os.path.join(clone_state_dir(root), "seen"))
