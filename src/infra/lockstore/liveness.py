"""Who a process is, and whether a recorded process is provably dead.

A process is identified by (host, boot id, pid namespace, pid, start time): the start time
(field 22 of /proc/<pid>/stat, in clock ticks since boot) tells a reused pid apart. A
record is only ever judged DEAD on proof: same host, same boot, same pid namespace, and the
pid is gone, a zombie, or now belongs to a process that started at another time. Anything
else (another host or boot, unreadable /proc) is UNKNOWN and never broken by guesswork.
"""

from __future__ import annotations

import itertools
import os
import secrets
import socket
import threading
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

_BOOT_ID_FILE: Final = "/proc/sys/kernel/random/boot_id"


class Liveness(StrEnum):
    ALIVE = "alive"
    DEAD = "dead"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    pid: int
    start_time: int | None
    host: str
    boot_id: str | None
    pid_ns: str | None


def read_proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in ticks) of a live pid, or None when there is no such pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            raw = stat_file.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may contain spaces and ')'; the fields after the last ')' don't.
    fields = raw[raw.rindex(b")") + 2 :].split()
    return fields[0].decode(), int(fields[19])


def _read_boot_id() -> str | None:
    try:
        with open(_BOOT_ID_FILE, encoding="ascii") as boot_file:
            return boot_file.read().strip() or None
    except OSError:
        return None


def _read_pid_ns() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


_BOOT_ID: Final = _read_boot_id()
_HOST: Final = socket.gethostname()


def _identify_current() -> ProcessIdentity:
    pid = os.getpid()
    stat = read_proc_stat(pid)
    return ProcessIdentity(
        pid=pid,
        start_time=None if stat is None else stat[1],
        host=_HOST,
        boot_id=_BOOT_ID,
        pid_ns=_read_pid_ns(),
    )


class _Current:
    """This process's identity and token source, renewed in a forked child."""

    def __init__(self) -> None:
        self.renew()

    def renew(self) -> None:
        self.identity = _identify_current()
        self.token_prefix = secrets.token_hex(6)
        self.counter = itertools.count(1)
        self.lock = threading.Lock()


_current = _Current()
os.register_at_fork(after_in_child=_current.renew)


def current_process() -> ProcessIdentity:
    return _current.identity


def new_token() -> str:
    """A token unique across processes and time: a random per-process prefix and a counter."""
    return f"{_current.token_prefix}{next(_current.counter):x}"


def liveness_of(
    pid: int, start_time: int | None, host: str, boot_id: str | None, pid_ns: str | None
) -> tuple[Liveness, str]:
    """Whether the recorded process is alive, provably dead, or unknown; and why."""
    me = _current.identity
    if host != me.host:
        return Liveness.UNKNOWN, f"holder runs on another host ({host})"
    if boot_id is None or boot_id != me.boot_id:
        return Liveness.UNKNOWN, "holder's boot cannot be compared with this one"
    if pid_ns is None or pid_ns != me.pid_ns:
        return Liveness.UNKNOWN, "holder runs in another pid namespace"
    stat = read_proc_stat(pid)
    if stat is None:
        return Liveness.DEAD, f"process {pid} no longer exists"
    state, started = stat
    if start_time is not None and started != start_time:
        return Liveness.DEAD, f"pid {pid} now belongs to another process"
    if state in ("Z", "X"):
        return Liveness.DEAD, f"process {pid} has exited (zombie)"
    return Liveness.ALIVE, f"process {pid} is running"
