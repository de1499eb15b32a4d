"""Victim notices on disk: how `lockyard monitor` tells a waiting agent in another process
that it was chosen to give way in a deadlock.

A notice is one JSON file `<lock_dir>/victims/<agent>.json`, published atomically
(temp file + rename), holding the `DeadlockInfo` and which wait it is about (the victim's
queue entry for `victim_waits_on`). The victim's pending `lock_acquire`
(through `FileVictimNotices`) claims the notice by renaming it away, so exactly one reader
gets it, and accepts it only while that very wait still exists: a notice that outlived its
wait (the victim was granted the lock, timed out, or retried with a new queue entry) is
stale and is deleted instead of ending an innocent call.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...core.deadlock_info import DeadlockInfo
from ...core.ports import VictimNotices
from ..lockstore import (
    NotOwnFileError,
    Waker,
    ensure_private_dir,
    inotify_available,
    open_dir,
    process_hub,
    read_own_file,
    write_atomic,
)
from .deadlock_text import readable

log = logging.getLogger(__name__)

VICTIMS_DIR = "victims"
NOTICE_VERSION = 1
_PRIVATE = ".lockyard-"  # prefix of temp and claimed files: never read as notices
_MAX_NAME = 160


class VictimNotice(BaseModel):
    """What the monitor posts for one victim (the file's whole content)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = NOTICE_VERSION
    notice_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    agent_id: str
    waits_on: str
    """The lock key of the victim's wait that closes the cycle."""
    wait_id: str | None = None
    """Which queue entry that wait is, when the store exposes one; a notice only ends the
    wait it was written about, never a later wait on the same lock."""
    posted_at: float = Field(default_factory=time.time)
    deadlock: DeadlockInfo


WaitCheck = Callable[[VictimNotice], bool]
"""True while the wait a notice is about still exists (the notice is still actionable)."""


class NoticeBoardError(Exception):
    """The victims directory cannot be used (a symlink, not a directory, not ours)."""


def notice_file_name(agent_id: str) -> str:
    """A readable, safe file name for an agent id (hashed when too long)."""
    name = quote(agent_id, safe="")
    if len(name) > _MAX_NAME:
        name = "sha256-" + hashlib.sha256(agent_id.encode()).hexdigest()
    return f"{name}.json"


class VictimNoticeBoard:
    """The `victims/` directory inside one lock directory."""

    def __init__(self, lock_dir: Path) -> None:
        self.lock_dir = Path(lock_dir)
        self.directory = self.lock_dir / VICTIMS_DIR

    def path_for(self, agent_id: str) -> Path:
        return self.directory / notice_file_name(agent_id)

    def ensure(self) -> Path:
        """Create the directory (0700) if needed; refuse a symlink or someone else's dir."""
        return ensure_private_dir(self.directory, NoticeBoardError)

    def post(self, notice: VictimNotice) -> Path:
        """Publish `notice` atomically, replacing an older notice for the same agent."""
        target = self.path_for(notice.agent_id)
        with open_dir(self.ensure()) as dir_fd:
            data = notice.model_dump_json().encode()
            write_atomic(dir_fd, target.name, data, mode=0o600, temp_prefix=f"{_PRIVATE}tmp-")
        return target

    def read(self, agent_id: str) -> VictimNotice | None:
        """The agent's notice, or None if there is none (or it is unreadable)."""
        return self._load(self.path_for(agent_id))

    def notices(self) -> list[VictimNotice]:
        """Every readable notice, for the monitor and `lockyard status`."""
        return [notice for _, notice in self._entries()]

    def _entries(self) -> Iterator[tuple[Path, VictimNotice]]:
        try:
            names = sorted(os.listdir(self.directory))
        except (FileNotFoundError, NotADirectoryError):
            return
        for name in names:
            if name.startswith(_PRIVATE) or not name.endswith(".json"):
                continue
            path = self.directory / name
            notice = self._load(path)
            if notice is not None:
                yield path, notice

    def _load(self, path: Path) -> VictimNotice | None:
        try:
            # Never blocks on a FIFO in place of a notice, never follows a symlink.
            raw = read_own_file(path)
        except NotOwnFileError as exc:
            log.warning("ignoring victim notice %s: it %s", path, exc)
            return None
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                log.warning("cannot read victim notice %s: %s", path, exc)
            return None
        try:
            return VictimNotice.model_validate_json(raw)
        except ValidationError:
            log.warning("ignoring corrupt victim notice %s", path)
            return None

    def claim(self, agent_id: str) -> VictimNotice | None:
        """Take the agent's notice off the board (atomic rename: one reader wins)."""
        source = self.path_for(agent_id)
        claimed = self.directory / f"{_PRIVATE}claimed-{uuid.uuid4().hex}"
        try:
            os.rename(source, claimed)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            return self._load(claimed)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(claimed)

    def remove(self, notice: VictimNotice) -> bool:
        """Delete `notice` if it is still the one posted for its agent (not a newer one)."""
        path = self.path_for(notice.agent_id)
        current = self._load(path)
        if current is None or current.notice_id != notice.notice_id:
            return False
        claimed = self.directory / f"{_PRIVATE}claimed-{uuid.uuid4().hex}"
        try:
            os.rename(path, claimed)
        except FileNotFoundError:
            return False
        again = self._load(claimed)
        if again is not None and again.notice_id != notice.notice_id:
            # A newer notice landed between the read and the rename: put it back.
            os.rename(claimed, path)
            return False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(claimed)
        return True

    def prune(self, still_waiting: WaitCheck, *, leftovers_older_than: float = 60.0) -> list[str]:
        """Delete stale notices (their wait is gone) and crash leftovers; return the agents."""
        removed = [
            notice.agent_id
            for _, notice in self._entries()
            if not still_waiting(notice) and self.remove(notice)
        ]
        self._remove_leftovers(leftovers_older_than)
        return removed

    def _remove_leftovers(self, older_than: float) -> None:
        try:
            names = os.listdir(self.directory)
        except (FileNotFoundError, NotADirectoryError):
            return
        deadline = time.time() - older_than
        for name in names:
            if not name.startswith(_PRIVATE):
                continue
            path = self.directory / name
            with contextlib.suppress(FileNotFoundError):
                if os.lstat(path).st_mtime < deadline:
                    os.unlink(path)


class FileVictimNotices:
    """`VictimNotices` read from the lock directory: what a `lockyard serve` process (or an
    orchestrator sharing a lock directory with others) gives its `LockTools`.

    `wait_for_victim` returns when a notice for the agent appears whose wait still exists
    (level-triggered: a notice already there when the call starts counts). Wake-ups come
    from the process's one inotify instance (the lock store's wake hub, which watches the
    victims directory once however many waits are pending), with polling as the fallback
    and backstop.
    """

    def __init__(
        self,
        lock_dir: Path,
        still_waiting: WaitCheck,
        *,
        poll_interval: float = 0.5,
    ) -> None:
        self.board = VictimNoticeBoard(lock_dir)
        self._still_waiting = still_waiting
        self._poll_interval = poll_interval

    async def wait_for_victim(self, agent_id: str) -> DeadlockInfo:
        hub = process_hub()
        directory = str(self.board.directory)
        topic = f"{directory}/{notice_file_name(agent_id)}"
        waker = Waker()
        pushed = self._board_usable() and inotify_available() and hub.watch(directory)
        hub.subscribe(topic, waker)
        try:
            while True:
                waker.clear()
                found = self._take(agent_id)
                if found is not None:
                    return found
                await waker.wait_async(self._poll_interval * (4 if pushed else 1))
        finally:
            hub.unsubscribe(topic, waker)
            if pushed:
                hub.unwatch(directory)
            waker.close()

    def _board_usable(self) -> bool:
        try:
            self.board.ensure()
        except (NoticeBoardError, OSError) as exc:
            log.warning("victim notices unavailable, polling: %s", exc)
            return False
        return True

    def _take(self, agent_id: str) -> DeadlockInfo | None:
        if not self.board.path_for(agent_id).exists():
            return None
        notice = self.board.claim(agent_id)
        if notice is None:
            return None
        if notice.agent_id != agent_id or not self._still_waiting(notice):
            log.info("dropped a stale victim notice for %s (its wait is over)", agent_id)
            return None
        log.info("deadlock victim notice for %s: %s", agent_id, readable(notice.deadlock))
        return notice.deadlock


class AnyVictimNotices:
    """Several `VictimNotices` as one: the first source to name the agent wins.

    For an orchestrator whose agents share a lock directory with other processes: give its
    tools `AnyVictimNotices(monitor, file_notices)`, so a victim hears of deadlocks found by
    its own in-process monitor and of those `lockyard monitor` finds across processes.
    """

    def __init__(self, *sources: VictimNotices) -> None:
        if not sources:
            raise ValueError("AnyVictimNotices needs at least one source")
        self._sources = sources

    def victim_mark(self, agent_id: str) -> DeadlockInfo | None:
        """The first mark a source that keeps marks (a `DeadlockMonitor`) has for the agent."""
        for source in self._sources:
            peek = getattr(source, "victim_mark", None)
            mark = peek(agent_id) if callable(peek) else None
            if isinstance(mark, DeadlockInfo):
                return mark
        return None

    async def wait_for_victim(self, agent_id: str) -> DeadlockInfo:
        found: list[DeadlockInfo] = []
        async with anyio.create_task_group() as group:

            async def listen(source: VictimNotices) -> None:
                found.append(await source.wait_for_victim(agent_id))
                group.cancel_scope.cancel()

            for source in self._sources:
                group.start_soon(listen, source)
        return found[0]
