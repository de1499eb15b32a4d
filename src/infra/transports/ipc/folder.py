"""A sandbox's IPC folder: its layout, and file operations that are safe on hostile content.

```
<root>/<sandbox>/            created by the operator; its name is the sandbox's agent id
    requests/<id>.json       written by the sandbox (temp name starting with ".", then rename)
    responses/<id>.json      written by the host the same way; the sandbox deletes it once read
    heartbeat                rewritten by the sandbox every few seconds while it runs
    host.json                rewritten by the host every few seconds while it runs
```

Everything in the folder may have been planted by the sandbox. Every operation here therefore
works relative to directory file descriptors opened with O_NOFOLLOW (a `requests` replaced by
a symlink to /etc is refused, not followed), never opens a file that is not a regular file with
one link (a FIFO, a device node, a symlink or a hard link is refused before it is opened for
reading), reads at most a fixed number of bytes, and only ever writes to files it has just
created itself (O_CREAT | O_EXCL) before renaming them into place, which replaces whatever the
sandbox left at that name instead of writing through it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import Final

from ... import lockstore
from .wire import NOT_A_FILE, TEMP_PREFIX, TOO_LARGE, WireError

REQUESTS: Final = "requests"
RESPONSES: Final = "responses"
HEARTBEAT: Final = "heartbeat"
HOST_STATUS: Final = "host.json"
MAX_HEARTBEAT_BYTES: Final = 256

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_O_PATH: Final = getattr(os, "O_PATH", 0)
_READ_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class UnsafeFolderError(OSError):
    """A directory of the IPC folder is missing, or is not a real directory (e.g. a symlink)."""


def open_dir(name: str, *, parent_fd: int | None = None, create: bool = False) -> int:
    """A file descriptor of the real directory `name` (relative to `parent_fd`), never through
    a symlink; made first (owned like its parent) when `create` and missing."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        if not create:
            raise UnsafeFolderError(f"{name} does not exist") from None
    except OSError as exc:  # ELOOP (a symlink), ENOTDIR (a file)
        raise UnsafeFolderError(f"{name} is not a directory ({exc.strerror})") from None
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o770, dir_fd=parent_fd)
        _own_like_parent(name, parent_fd)
    return open_dir(name, parent_fd=parent_fd)


def _own_like_parent(name: str, parent_fd: int | None) -> None:
    """A root host makes the directory the sandbox's (its folder's owner), so the sandbox can
    write requests and delete responses in it."""
    if os.geteuid() != 0 or parent_fd is None:
        return
    parent = os.fstat(parent_fd)
    os.chown(name, parent.st_uid, parent.st_gid, dir_fd=parent_fd, follow_symlinks=False)


def read_untrusted(dir_fd: int, name: str, limit: int) -> bytes:
    """The content of the regular, singly-linked file `name`, at most `limit` bytes.

    The file is first opened with O_PATH | O_NOFOLLOW, which opens nothing (no FIFO blocks, no
    device acts); only when that very inode is a regular file with one link and no more than
    `limit` bytes is it reopened for reading. Raises WireError (not a file / too large) or
    FileNotFoundError.
    """
    handle = os.open(name, _O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise WireError(NOT_A_FILE, f"{name} is not a regular file; write a plain file")
        if info.st_nlink != 1:
            raise WireError(NOT_A_FILE, f"{name} has {info.st_nlink} links; write a new file")
        if info.st_size > limit:
            raise WireError(TOO_LARGE, f"{name} is {info.st_size} bytes; the limit is {limit}")
        reader = os.open(f"/proc/self/fd/{handle}", _READ_FLAGS) if _O_PATH else handle
    finally:
        if _O_PATH:
            os.close(handle)
    try:
        data = os.read(reader, limit + 1)  # the file may have grown since fstat
    finally:
        os.close(reader)
    if len(data) > limit:
        raise WireError(TOO_LARGE, f"{name} is over {limit} bytes")
    return data


def remove_entry(dir_fd: int, name: str) -> bool:
    """Remove the name `name` (a file, a symlink itself, or an empty directory); never follows
    a link. False when it is gone already or cannot be removed (a non-empty directory)."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    except (IsADirectoryError, PermissionError):
        try:
            os.rmdir(name, dir_fd=dir_fd)
        except OSError:
            return False
    return True


def write_atomic(dir_fd: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """Publish `data` as `name` in the folder `dir_fd`: a reader sees the whole file or none,
    and nothing the sandbox planted at `name` is written through (see `atomic_files`). The
    temp name starts with TEMP_PREFIX, so neither side reads it as a message; readable by
    the other side (0644) by default. Raises OSError when `name` cannot be replaced."""
    lockstore.write_atomic(dir_fd, name, data, mode=mode, temp_prefix=f"{TEMP_PREFIX}{name}.")


def read_small(dir_fd: int, name: str, limit: int = MAX_HEARTBEAT_BYTES) -> bytes | None:
    """A small status file's content, or None when it is missing or not a plain file."""
    try:
        return read_untrusted(dir_fd, name, limit)
    except (OSError, WireError):
        return None
