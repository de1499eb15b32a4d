"""Reading a file that lockyard wrote, without trusting what is there now.

Anything in the lock directory may have been replaced. Opening a FIFO for reading blocks
until somebody opens it for writing, so a FIFO planted in place of a record would hang every
reader (`status`, `clean`, `monitor`, `try_lock`) forever. So: open with O_NOFOLLOW (a
symlink is not followed) and O_NONBLOCK (a FIFO opens at once), then fstat the descriptor:
only a regular file of this user is read, and only up to a size no record comes near.
"""

from __future__ import annotations

import os
import stat
from typing import Final

MAX_FILE_BYTES: Final = 1 << 20
"""Records and notices are a few kilobytes; a bigger file was not written by lockyard."""

_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class NotOwnFileError(Exception):
    """The entry is not a regular file of this user (a FIFO, a device, another user's file)
    or is too big to be lockyard's; `str()` says what it is."""


def read_own_file(name: str | os.PathLike[str], *, dir_fd: int | None = None) -> bytes:
    """The bytes of regular file `name` (relative to `dir_fd`); OSError when it cannot be
    opened (FileNotFoundError when absent), NotOwnFileError when it is not lockyard's."""
    fd = os.open(name, _FLAGS, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotOwnFileError(f"is {_kind(info.st_mode)}, not a file lockyard wrote")
        if info.st_uid != os.geteuid():
            raise NotOwnFileError(f"belongs to uid {info.st_uid}, not to this user")
        if info.st_size > MAX_FILE_BYTES:
            raise NotOwnFileError(f"holds {info.st_size} bytes, more than lockyard writes")
        chunks = []
        size = 0
        while chunk := os.read(fd, 65536):
            size += len(chunk)
            if size > MAX_FILE_BYTES:
                raise NotOwnFileError(f"holds more than {MAX_FILE_BYTES} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"
