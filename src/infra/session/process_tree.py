"""Reading the process tree from /proc: a process's parent and start time.

A pid alone is reused; (pid, start time) names one process for the life of the boot.
(A NamedTuple, not a dataclass: `lockyard git-turn` runs this in front of agents' git lines,
and the dataclasses module's imports cost every one of them.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Final, NamedTuple

MAX_DEPTH: Final = 64
"""Ancestors walked at most (a loop in /proc data, or a very deep tree, ends the walk)."""


class ProcessRef(NamedTuple):
    """One process of this boot: its pid and its start time (clock ticks since boot)."""

    pid: int
    start_time: int

    @property
    def label(self) -> str:
        """The file-name-safe `<pid>-<start time>`."""
        return f"{self.pid}-{self.start_time}"


def _stat_fields(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            raw = stat_file.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and ')'; the fields after the last ')' cannot.
    return raw[raw.rindex(b")") + 2 :].split()


def process_ref(pid: int) -> ProcessRef | None:
    """(pid, start time) of a live process, or None when there is none (or it is a zombie)."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in (b"Z", b"X"):
        return None
    return ProcessRef(pid, int(fields[19]))


def parent_of(pid: int) -> ProcessRef | None:
    """The parent of a live process, or None at the top of the tree (or if it is gone)."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    ppid = int(fields[1])
    return None if ppid <= 0 else process_ref(ppid)


def ancestors(pid: int | None = None) -> Iterator[ProcessRef]:
    """The ancestors of `pid` (default: this process), nearest first, excluding `pid` itself."""
    current = os.getpid() if pid is None else pid
    seen: set[int] = set()
    for _ in range(MAX_DEPTH):
        parent = parent_of(current)
        if parent is None or parent.pid in seen:
            return
        seen.add(parent.pid)
        yield parent
        current = parent.pid


def is_alive(ref: ProcessRef) -> bool:
    """Whether exactly this process (same pid, same start time) still runs."""
    return process_ref(ref.pid) == ref
