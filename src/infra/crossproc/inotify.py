"""A minimal Linux inotify binding (ctypes), awaitable from anyio.

Only what the cross-process parts need: watch directories, wait until something in them
changes. Callers treat every wake-up as "rescan", so the events are not decoded beyond
what is needed to follow new subdirectories. Where inotify is missing (not Linux, or the
per-user instance limit is reached) `Inotify.open()` returns None and callers poll instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

import anyio

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000

IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

CHANGES = (
    IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ATTRIB
)
"""Everything that can change which locks and queue entries exist, or their content."""

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len


@dataclass(frozen=True)
class InotifyEvent:
    wd: int
    mask: int
    name: str


def _load_libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_init1.restype = ctypes.c_int
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_add_watch.restype = ctypes.c_int
    except (OSError, AttributeError):  # pragma: no cover - only on exotic libcs
        return None
    return libc


_LIBC = _load_libc()
_FORCE_POLLING_ENV = "LOCKYARD_FORCE_POLLING"


def inotify_available() -> bool:
    """False when inotify is unavailable or disabled (env LOCKYARD_FORCE_POLLING=1)."""
    return _LIBC is not None and os.environ.get(_FORCE_POLLING_ENV, "") not in ("1", "true")


class Inotify:
    """One inotify instance. Close it (or use it as a context manager) to free the fd."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._paths: dict[int, Path] = {}

    @classmethod
    def open(cls) -> Inotify | None:
        """A new instance, or None when inotify cannot be used (callers then poll)."""
        if not inotify_available():
            return None
        assert _LIBC is not None
        fd = _LIBC.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:  # EMFILE: the per-user instance limit; fall back to polling
            return None
        return cls(fd)

    def __enter__(self) -> Inotify:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def watch(self, directory: Path, mask: int = CHANGES) -> bool:
        """Watch `directory` (never through a symlink). False if it does not exist (any more)."""
        assert _LIBC is not None
        wd = _LIBC.inotify_add_watch(
            self._fd, os.fsencode(directory), mask | IN_ONLYDIR | IN_DONT_FOLLOW
        )
        if wd < 0:
            code = ctypes.get_errno()
            if code in (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.ENOSPC):
                return False
            raise OSError(code, os.strerror(code), str(directory))
        self._paths[wd] = directory
        return True

    def path_of(self, wd: int) -> Path | None:
        return self._paths.get(wd)

    def read_pending(self) -> list[InotifyEvent]:
        """Every event queued now (never blocks); an empty list when there is none."""
        events: list[InotifyEvent] = []
        while True:
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                return events
            offset = 0
            while offset + _HEADER.size <= len(data):
                wd, mask, _cookie, size = _HEADER.unpack_from(data, offset)
                raw = data[offset + _HEADER.size : offset + _HEADER.size + size]
                offset += _HEADER.size + size
                name = os.fsdecode(raw.rstrip(b"\0"))
                if mask & IN_IGNORED:
                    self._paths.pop(wd, None)
                events.append(InotifyEvent(wd, mask, name))

    async def wait(self, max_wait: float | None) -> list[InotifyEvent]:
        """Wait until at least one event arrives or `max_wait` seconds pass; return the events."""
        events = self.read_pending()
        if events:
            return events
        with anyio.move_on_after(max_wait):
            await anyio.wait_readable(self._fd)
        return self.read_pending()
