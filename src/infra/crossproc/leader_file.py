"""Who resolves the deadlocks of a lock directory: the holder of `<lock dir>/deadlock-leader`.

Every `lockyard serve`, every cross-process `LockCoordinator` and every resolving
`lockyard monitor` of a lock directory is a candidate; the one holding an exclusive `flock`
on this file leads. The kernel drops the lock when its holder's file is closed, whatever
ends the process (exit, crash, SIGKILL), so the next candidate that tries takes over; no
record has to be proven stale first. The file is never replaced (a new inode would let a
second leader lock it): the leader rewrites its content in place, which says who leads for
`lockyard status` and the logs, and is only ever a description: the lock decides.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from ..lockstore import Liveness, current_process, liveness_of

LEADER_FILE: Final = "deadlock-leader"


@dataclass(frozen=True)
class LeaderRecord:
    """What the leading process wrote about itself."""

    pid: int
    start_time: int | None
    host: str
    boot_id: str | None
    pid_ns: str | None
    role: str
    """What leads, in words: `lockyard serve (agent claude-code-4242)`, `lockyard monitor`."""
    since: float

    def describe(self) -> str:
        return f"{self.role}, pid {self.pid} on {self.host}"


class LeaderFile:
    """This process's candidacy for leading deadlock detection on one lock directory."""

    def __init__(self, lock_dir: str | os.PathLike[str], role: str) -> None:
        self.path = Path(lock_dir) / LEADER_FILE
        self.role = role
        self._fd = -1  # open and locked while this process leads

    @property
    def leading(self) -> bool:
        return self._fd >= 0

    def try_lead(self) -> bool:
        """Lead if nobody does (one non-blocking `flock`); True while this process leads.

        Raises OSError when the file cannot be opened (the lock directory is gone or not
        ours): a candidate that cannot even try does not lead.
        """
        if self._fd >= 0:
            return True
        fd = os.open(
            self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY, 0o600
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        # Dropped without `resign` (a monitor object forgotten): its lock goes with it.
        self._finalizer = weakref.finalize(self, os.close, fd)
        self._describe_self(fd)
        return True

    def _describe_self(self, fd: int) -> None:
        me = current_process()
        record = LeaderRecord(
            me.pid, me.start_time, me.host, me.boot_id, me.pid_ns, self.role, time.time()
        )
        data = json.dumps(asdict(record)).encode()
        with contextlib.suppress(OSError):  # a description only: leading does not depend on it
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)

    def resign(self) -> None:
        """Stop leading (the next candidate takes over at its next try)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # says nobody leads until the next leader writes
            self._finalizer()  # closes the only descriptor of the file: drops the flock


def current_leader(lock_dir: str | os.PathLike[str]) -> LeaderRecord | None:
    """Who leads deadlock detection on `lock_dir` now, or None (nobody, or unknown).

    A record naming a dead process, or a file nobody holds locked, is nobody.
    """
    path = Path(lock_dir) / LEADER_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        text = os.read(fd, 65536)
        if _unlocked(fd):
            return None
    finally:
        os.close(fd)
    record = _parse(text)
    if record is None:
        return None
    alive, _why = liveness_of(
        record.pid, record.start_time, record.host, record.boot_id, record.pid_ns
    )
    return None if alive is Liveness.DEAD else record


def _unlocked(fd: int) -> bool:
    """Whether nobody holds the file locked: a shared lock is granted only then."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def _parse(text: bytes) -> LeaderRecord | None:
    try:
        data = json.loads(text)
        record = LeaderRecord(**data)
    except (ValueError, TypeError):
        return None
    ok = (
        type(record.pid) is int
        and isinstance(record.host, str)
        and isinstance(record.role, str)
        and (record.start_time is None or type(record.start_time) is int)
        and all(v is None or isinstance(v, str) for v in (record.boot_id, record.pid_ns))
        and isinstance(record.since, int | float)
    )
    return record if ok else None
