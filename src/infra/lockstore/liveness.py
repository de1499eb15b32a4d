"""Who a process is, and whether a recorded process is provably dead.

A process is identified by (host, boot id, pid namespace, pid, start time): the start time
(field 22 of /proc/<pid>/stat, in clock ticks since boot) tells a reused pid apart. A
record is only ever judged DEAD on proof: same host, same boot, same pid namespace, and the
pid is gone, a zombie, or now belongs to a process that started at another time. Anything
else (another host or boot, unreadable /proc) is UNKNOWN and never broken by guesswork.

Namespaces change what /proc says, so both numbers are taken as /proc itself sees them:

- the pid is the one /proc knows this process by (`/proc/self`), and the pid namespace is
  the one that /proc shows. A process in a pid namespace whose /proc was not remounted
  (`unshare --pid --fork` without `--mount-proc`) is recorded by its pid in the outer
  namespace, which is the only numbering its readers can look up; when that namespace
  cannot be named, the record carries none and nobody can prove it dead;
- the start time is shown by /proc relative to the *reader's* time namespace (its boot-time
  offset is added), so it is stored and compared with this process's own boot-time offset
  taken off: the same number in every time namespace. Where the offset is unknown (or not a
  whole number of clock ticks) no start time is recorded, and a start time that differs is
  no proof of death.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import socket
import threading
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

_BOOT_ID_FILE: Final = "/proc/sys/kernel/random/boot_id"
_CLOCK_BOOTTIME: Final = "7"  # older kernels print clock ids instead of names
_NS_PER_TICK: Final = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


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
    """(state letter, start time in ticks) of a live pid, or None when there is no such pid.

    Raises OSError (PermissionError under a restricted /proc, `hidepid`) when it cannot tell.
    """
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


def _status_fields(pid: int | str) -> dict[str, list[str]]:
    with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as status_file:
        return {
            key: value.split() for key, _, value in (line.partition(":") for line in status_file)
        }


def proc_view() -> tuple[int, str | None]:
    """(the pid /proc knows this process by, the pid namespace whose numbers /proc shows).

    `NSpid` lists the pid in every namespace from /proc's down to our own; when /proc is
    not our namespace's, its namespace is read from the nearest ancestor process that
    lives in it. None when it cannot be named (then nobody can prove us dead)."""
    try:
        fields = _status_fields("self")
        ns_pids = fields.get("NSpid") or fields["Pid"]
        if len(ns_pids) == 1:
            return int(ns_pids[0]), os.readlink("/proc/self/ns/pid")
    except (OSError, KeyError, ValueError, IndexError):
        return os.getpid(), None  # no /proc of ours: nothing can be proven
    proc_pid = int(ns_pids[0])
    ancestor = fields.get("PPid", ["0"])[0]
    with contextlib.suppress(OSError, KeyError, ValueError, IndexError):
        for _depth in range(64):
            if ancestor == "0":
                break
            ancestor_fields = _status_fields(ancestor)
            if len(ancestor_fields.get("NSpid") or ancestor_fields["Pid"]) == 1:
                return proc_pid, os.readlink(f"/proc/{ancestor}/ns/pid")
            ancestor = ancestor_fields["PPid"][0]
    return proc_pid, None


def boottime_offset_ticks() -> int | None:
    """This process's boot-time offset (its time namespace's), in clock ticks.

    0 where the kernel has no time namespaces; None when unknown: /proc/self/timens_offsets
    shows the namespace of our future children, which is ours unless we unshared one."""
    try:
        if os.readlink("/proc/self/ns/time") != os.readlink("/proc/self/ns/time_for_children"):
            return None
        with open("/proc/self/timens_offsets", encoding="ascii") as offsets_file:
            lines = offsets_file.read().splitlines()
    except FileNotFoundError:
        return 0  # a kernel without time namespaces: every process sees the same clock
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) == 3 and fields[0] in ("boottime", _CLOCK_BOOTTIME):
            offset_ns = int(fields[1]) * 1_000_000_000 + int(fields[2])
            ticks, rest = divmod(offset_ns, _NS_PER_TICK)
            return None if rest else ticks
    return 0


_BOOT_ID: Final = _read_boot_id()
_HOST: Final = socket.gethostname()


def _identify_current(offset: int | None) -> ProcessIdentity:
    pid, pid_ns = proc_view()
    try:
        stat = read_proc_stat(pid)
    except OSError:
        stat = None  # no readable /proc: records carry no start time; never judged DEAD
    return ProcessIdentity(
        pid=pid,
        start_time=None if stat is None or offset is None else stat[1] - offset,
        host=_HOST,
        boot_id=_BOOT_ID,
        pid_ns=pid_ns,
    )


class _Current:
    """This process's identity and token source, renewed in a forked child."""

    def __init__(self) -> None:
        self.renew()

    def renew(self) -> None:
        self.boottime_offset = boottime_offset_ticks()
        self.process = _identify_current(self.boottime_offset)
        self.token_prefix = secrets.token_hex(6)
        self.counter = itertools.count(1)
        self.lock = threading.Lock()


_current = _Current()
os.register_at_fork(after_in_child=_current.renew)


def current_process() -> ProcessIdentity:
    return _current.process


def is_this_process(pid: int, start_time: int | None) -> bool:
    """Whether a record's (pid, start time) names this very process (no /proc read)."""
    me = _current.process
    return pid == me.pid and start_time == me.start_time


def pids_are_local() -> bool:
    """Whether recorded pids are this process's own pid numbers (pidfd_open uses those)."""
    return _current.process.pid == os.getpid()


def new_token() -> str:
    """A token unique across processes and time: a random per-process prefix and a counter."""
    return f"{_current.token_prefix}{next(_current.counter):x}"


def liveness_of(
    pid: int, start_time: int | None, host: str, boot_id: str | None, pid_ns: str | None
) -> tuple[Liveness, str]:
    """Whether the recorded process is alive, provably dead, or unknown; and why."""
    me = _current.process
    if host != me.host:
        return Liveness.UNKNOWN, f"holder runs on another host ({host})"
    if boot_id is None or boot_id != me.boot_id:
        return Liveness.UNKNOWN, "holder's boot cannot be compared with this one"
    if pid_ns is None or pid_ns != me.pid_ns:
        return Liveness.UNKNOWN, "holder runs in another pid namespace"
    try:
        stat = read_proc_stat(pid)
    except OSError as error:  # a restricted /proc (hidepid): no proof either way
        return Liveness.UNKNOWN, f"cannot read /proc/{pid}/stat ({error.strerror})"
    if stat is None:
        return Liveness.DEAD, f"process {pid} no longer exists"
    state, started = stat
    offset = _current.boottime_offset
    if start_time is not None and offset is not None and started - offset != start_time:
        return Liveness.DEAD, f"pid {pid} now belongs to another process"
    if state in ("Z", "X"):
        return Liveness.DEAD, f"process {pid} has exited (zombie)"
    if state in ("T", "t"):
        return Liveness.ALIVE, f"process {pid} is stopped (a signal or a debugger)"
    return Liveness.ALIVE, f"process {pid} is running"
