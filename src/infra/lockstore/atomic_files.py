"""Publishing a file whole, and the private directories lockyard keeps in a lock directory.

`write_atomic` is the one way lockyard publishes a file outside the lock store's own records
(session records, victim notices, the IPC folder's requests, responses and heartbeats). It
creates a temp file that did not exist before (O_CREAT | O_EXCL | O_NOFOLLOW), writes all of
it, then renames it over the name. So:
- a reader sees the old file or the new one, never a part;
- nothing planted in the directory (a symlink, a FIFO, a hard link to someone else's file)
  can redirect the write: the temp file is new, and the rename replaces what was at the name
  instead of writing through it;
- it works relative to an open directory descriptor, so a directory that others can change
  (a sandbox's IPC folder) cannot be swapped for a symlink between opening it and writing.
  Callers with a path open one with `open_dir`.

`ensure_private_dir` makes the sub-directories of a lock directory (`sessions/`, `victims/`):
mode 0700, and refused when they are a symlink, not a directory, or another user's.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Final

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMP_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def write_atomic(dir_fd: int, name: str, data: bytes, *, mode: int, temp_prefix: str) -> None:
    """Publish `data` as `name` in the directory `dir_fd`: a reader sees all of it or nothing.

    The temp file is `temp_prefix` plus a random suffix, so readers that skip names with that
    prefix never see it; it is removed again when anything fails. Raises OSError when `name`
    cannot be replaced (e.g. it is a directory).
    """
    temp = f"{temp_prefix}{secrets.token_hex(8)}"
    fd = os.open(temp, _TEMP_FLAGS, mode, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise


@contextlib.contextmanager
def open_dir(path: str | os.PathLike[str]) -> Iterator[int]:
    """A descriptor of the real directory `path` (never through a final symlink), closed after."""
    fd = os.open(path, _DIR_FLAGS)
    try:
        yield fd
    finally:
        os.close(fd)


def ensure_private_dir(directory: Path, error: type[Exception]) -> Path:
    """Create `directory` (0700) inside its existing parent if it is missing; raise `error`
    when the parent is missing or the directory is a symlink, not a directory or not ours."""
    try:
        directory.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except FileNotFoundError as exc:
        raise error(f"lock directory {directory.parent} does not exist") from exc
    info = os.lstat(directory)
    if not os.path.isdir(directory) or os.path.islink(directory):
        raise error(f"{directory} is not a directory (a symlink?): refusing it")
    if info.st_uid != os.getuid():
        raise error(f"{directory} belongs to uid {info.st_uid}, not to us")
    return directory
