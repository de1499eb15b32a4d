"""Linux inotify through ctypes: the one binding of lockyard, and its one switch.

The lock directory's wake-up hub (`lockdir/sleep.py`) feeds inotify events into topic
notifications; the cross-process monitor, its notice board and the IPC transport wait on an
`Inotify` of their own for "something changed, rescan". Both use this module: one binding,
one event parser, one environment switch. So it sits beside the backends, not inside the
lock directory's package (the PostgreSQL backend does not use it).

`LOCKYARD_NO_INOTIFY=1` turns inotify off in every part (waiters and watchers poll instead;
for file systems that deliver no events for changes made elsewhere, such as many FUSE and
network mounts). Any value but empty, `0`, `false`, `no` or `off` switches it off.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final, NamedTuple

import anyio

IN_MODIFY: Final = 0x00000002
IN_ATTRIB: Final = 0x00000004
IN_CLOSE_WRITE: Final = 0x00000008
IN_MOVED_FROM: Final = 0x00000040
IN_MOVED_TO: Final = 0x00000080
IN_CREATE: Final = 0x00000100
IN_DELETE: Final = 0x00000200
IN_DELETE_SELF: Final = 0x00000400
IN_MOVE_SELF: Final = 0x00000800
IN_Q_OVERFLOW: Final = 0x00004000
IN_IGNORED: Final = 0x00008000
IN_ONLYDIR: Final = 0x01000000
IN_DONT_FOLLOW: Final = 0x02000000
IN_ISDIR: Final = 0x40000000

IN_NONBLOCK: Final = os.O_NONBLOCK
IN_CLOEXEC: Final = os.O_CLOEXEC

CHANGES: Final = (
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

ENTRIES: Final = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
"""Entries appearing and going: what ends a wait for a lock or a queue entry."""

ITSELF: Final = IN_DELETE_SELF | IN_MOVE_SELF
"""One entry watched by itself: its going (reported at its unlink, on tmpfs and ext4 alike)
or its moving. What ends a wait behind that entry, without the rest of its directory's
events; not IN_ATTRIB, which a stamp of the entry's times would raise too."""

SWITCH: Final = "LOCKYARD_NO_INOTIFY"
"""The environment variable that turns inotify off (waiters and watchers poll)."""
_OFF_VALUES: Final = ("", "0", "false", "no", "off")

_HEADER: Final = struct.Struct("iIII")  # wd, mask, cookie, len


class InotifyEvent(NamedTuple):
    wd: int
    mask: int
    name: str


def parse_events(data: bytes) -> Iterator[InotifyEvent]:
    """The events in `data`, as read from an inotify descriptor."""
    offset = 0
    while offset + _HEADER.size <= len(data):
        wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
        offset += _HEADER.size
        name = os.fsdecode(data[offset : offset + length].rstrip(b"\x00"))
        offset += length
        yield InotifyEvent(wd, mask, name)


def switched_off() -> bool:
    """Whether the environment turns inotify off (`LOCKYARD_NO_INOTIFY`)."""
    return os.environ.get(SWITCH, "").strip().lower() not in _OFF_VALUES


def _load_libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        # The process's own symbols (libc is loaded already): ctypes.util.find_library would
        # run `ldconfig -p` in a child process, 10-20 ms of every start.
        libc = ctypes.CDLL(None, use_errno=True)
        if not hasattr(libc, "inotify_init1"):  # pragma: no cover - a static interpreter
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_init1.restype = ctypes.c_int
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_add_watch.restype = ctypes.c_int
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.inotify_rm_watch.restype = ctypes.c_int
    except (OSError, AttributeError):  # pragma: no cover - only on exotic libcs
        return None
    return libc


_LIBC = _load_libc()


def inotify_available() -> bool:
    """False when inotify is missing here or switched off by the environment."""
    return _LIBC is not None and not switched_off()


class Inotify:
    """One inotify instance (non-blocking). Close it, or use it as a context manager."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._paths: dict[int, Path] = {}

    @classmethod
    def open(cls) -> Inotify | None:
        """A new instance, or None when inotify cannot be used (callers then poll): missing,
        switched off, or the per-user instance limit reached."""
        if not inotify_available():
            return None
        assert _LIBC is not None
        fd = _LIBC.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            return None
        return cls(fd)

    def __enter__(self) -> Inotify:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def add_watch(self, directory: str | os.PathLike[str], mask: int = CHANGES) -> int:
        """Watch `directory` (never through a symlink); its watch descriptor. OSError when
        it cannot be watched (gone, not a directory, out of watches: ENOSPC)."""
        return self._add(directory, mask | IN_ONLYDIR | IN_DONT_FOLLOW)

    def add_entry_watch(self, path: str | os.PathLike[str], mask: int = ITSELF) -> int:
        """Watch the directory entry at `path` itself, whatever it is (a symlink is watched,
        not followed); its watch descriptor, the same one for the same inode. OSError when it
        cannot be watched (gone: ENOENT; out of watches: ENOSPC)."""
        return self._add(path, mask | IN_DONT_FOLLOW)

    def _add(self, path: str | os.PathLike[str], flags: int) -> int:
        assert _LIBC is not None
        wd = int(_LIBC.inotify_add_watch(self._fd, os.fsencode(path), flags))
        if wd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), os.fspath(path))
        self._paths[wd] = Path(path)
        return wd

    def watch(self, directory: Path, mask: int = CHANGES) -> bool:
        """`add_watch`, False (instead of an error) when the directory is gone, not one, not
        readable, or the watch limit is reached."""
        try:
            self.add_watch(directory, mask)
        except OSError as error:
            if error.errno in (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.ENOSPC):
                return False
            raise
        return True

    def rm_watch(self, wd: int) -> None:
        assert _LIBC is not None
        self._paths.pop(wd, None)
        _LIBC.inotify_rm_watch(self._fd, wd)  # EINVAL when already gone: nothing to do

    def path_of(self, wd: int) -> Path | None:
        return self._paths.get(wd)

    def read_pending(self) -> list[InotifyEvent]:
        """Every event queued now (never blocks); an empty list when there is none."""
        events: list[InotifyEvent] = []
        while True:
            try:
                data = os.read(self._fd, 64 * 1024)
            except (BlockingIOError, OSError):
                return events
            for event in parse_events(data):
                if event.mask & IN_IGNORED:
                    self._paths.pop(event.wd, None)
                events.append(event)

    async def wait(self, max_wait: float | None) -> list[InotifyEvent]:
        """Wait until at least one event arrives or `max_wait` seconds pass; the events."""
        events = self.read_pending()
        if events:
            return events
        with anyio.move_on_after(max_wait):
            await anyio.wait_readable(self._fd)
        return self.read_pending()
