"""A file path's lock, for one checkout: its repository-relative key and the name of its lock
in the lock directory (`LockKeys`), with what resolving a plain path costs paid once.

`paths.resolve_entry` resolves any path: open it with O_PATH, read its name back from
/proc/self/fd, fstat, close; the /proc read alone costs as much as the three other calls.
A path whose components are all plain directories and files (the usual lock key) resolves
to its own normalised spelling, and `openat2(RESOLVE_NO_SYMLINKS)` tells whether that is so
in one call: it fails with ELOOP at the first symlink on the way. A file that does not exist
yet (locked before it is created) costs the same for its directory, and one `lstat` to see
that the file is still missing. Anything else (a symlink, a missing directory, a kernel
without openat2) answers None, and the caller resolves the path in full.

`ctypes` is loaded with this module, which only the lock store imports (its wake-ups load
ctypes anyway); the agent CLI hooks, one process per tool call, do without.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
from collections.abc import Callable
from typing import Final

from ..checkout import Checkout
from ..paths import lock_name, resolve_entry

_SYS_OPENAT2: Final = 437
"""openat2's number in the system call table every architecture below shares."""
_ARCHITECTURES: Final = frozenset({"x86_64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x"})
_RESOLVE_NO_SYMLINKS: Final = 0x04
_AT_FDCWD: Final = -100


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


def _bind() -> Callable[..., int] | None:
    if platform.machine() not in _ARCHITECTURES or not hasattr(os, "O_PATH"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    call = libc.syscall
    call.restype = ctypes.c_long
    call.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t)
    return call


_syscall = _bind()
_how = _OpenHow(os.O_PATH | os.O_CLOEXEC, 0, _RESOLVE_NO_SYMLINKS)
_how_ref = ctypes.byref(_how)
_how_size = ctypes.sizeof(_how)
_probe = _OpenHow(os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, 0, _RESOLVE_NO_SYMLINKS)
_probe_ref = ctypes.byref(_probe)


def resolve_plain(path: str) -> tuple[str, bool] | None:
    """(`path` normalised, whether it is a directory) when no component of the absolute
    `path` is a symlink, and it exists or only its last component does not (a file about to
    be created): then its physical resolution is its normalised spelling (`..` goes up a
    real directory). None in every other case (`//` is a name of its own to POSIX normpath;
    realpath folds it)."""
    found = resolve_plain_entry(path)
    return None if found is None else (found[0], found[1])


def resolve_plain_entry(path: str) -> tuple[str, bool, bool] | None:
    """`resolve_plain`, and whether the path's last component exists (False: a file to be
    created)."""
    if not path.startswith("/") or path.startswith("//"):
        return None
    fd = _open_plain(path)
    if fd == -errno.ENOENT:
        found = _resolve_new_file(path)
        return None if found is None else (found[0], False, False)
    if fd < 0:
        return None
    try:
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    return _normal(path), is_dir, True


def _resolve_new_file(path: str) -> tuple[str, bool] | None:
    """A file that does not exist yet, in a directory reached without symlinks."""
    directory, _slash, name = path.rpartition("/")
    if name in ("", ".", ".."):
        return None
    fd = _open_plain(directory or "/")
    if fd < 0:
        return None
    try:
        os.lstat(name, dir_fd=fd)
    except FileNotFoundError:
        pass  # still missing: the path names a file to be created there
    except OSError:
        return None  # the "directory" is a file, or worse: the full resolution says what
    else:
        return None  # there after all (created meanwhile, or a dangling symlink)
    finally:
        os.close(fd)
    return f"{_normal(directory).rstrip('/')}/{name}", False


def _open_plain(path: str) -> int:
    """An O_PATH descriptor of `path` opened without following any symlink, or -errno."""
    global _syscall
    if _syscall is None:
        return -errno.ENOSYS
    fd = _syscall(_SYS_OPENAT2, _AT_FDCWD, os.fsencode(path), _how_ref, _how_size)
    if fd >= 0:
        return fd
    error = ctypes.get_errno()
    if error in (errno.ENOSYS, errno.EPERM, errno.EINVAL):
        _syscall = None  # no openat2 here (an old kernel, or a seccomp filter): never again
    return -error


def is_plain_file(path: str | bytes) -> bool:
    """Whether the absolute `path` is reached without a symlink and its last component
    exists and is not a directory, in one system call that opens nothing.

    `openat2(O_PATH | O_DIRECTORY, RESOLVE_NO_SYMLINKS)` fails with ENOTDIR there (a plain
    directory would open: then it is closed and the answer is no). ENOTDIR also comes from
    a component on the way that is a file (`a.py/b`): a caller that asks about a path it
    saw as a plain file earlier accepts that its directory may since have become a file,
    where no file can be and so no other spelling can name the same one.
    """
    if _syscall is None:
        return False
    encoded = path if type(path) is bytes else os.fsencode(path)
    fd = _syscall(_SYS_OPENAT2, _AT_FDCWD, encoded, _probe_ref, _how_size)
    if fd >= 0:
        os.close(fd)
        return False
    return ctypes.get_errno() == errno.ENOTDIR


def _normal(path: str) -> str:
    if "/." in path or "//" in path or path.endswith("/"):
        return os.path.normpath(path)
    return path  # no `.`, `..`, `//` or trailing `/`: normal already


_MAX_PLAIN_FILES: Final = 4096


class LockKeys:
    """(key, lock name) of file paths in `checkout`; a path outside it is refused unless
    `allow_outside_repo` (see `Checkout.key`)."""

    def __init__(self, checkout: Checkout, *, allow_outside_repo: bool) -> None:
        self.checkout = checkout
        self.allow_outside_repo = allow_outside_repo
        self._plain_files: dict[str, tuple[bytes, str, str]] = {}
        """filepath -> (the absolute path resolved, key, lock name) of paths that named an
        existing file reached without symlinks: while the kernel still walks that path
        without meeting a symlink to a file that is not a directory, the key is the same."""

    def locate(self, filepath: str) -> tuple[str, str]:
        """(key, lock name) of `filepath`.

        A path that last resolved to an existing file without meeting a symlink resolves
        to the same key for as long as that is still so, which one system call checks
        (`is_plain_file`: the kernel walks the whole path again, so a component replaced by
        a symlink, a file removed or replaced by a directory all take the full resolution
        below). Only the string work is remembered, never what the file system said.
        """
        if type(filepath) is str:
            known = self._plain_files.get(filepath)
            if known is not None and is_plain_file(known[0]):
                return known[1], known[2]
        plain: list[str] = []

        def resolve(path: str) -> tuple[str, bool]:
            found = resolve_plain_entry(path)
            if found is None:
                return resolve_entry(path)
            resolved, is_dir, exists = found
            if exists and not is_dir:
                plain.append(path)
            return resolved, is_dir

        key = self.checkout.key(
            filepath, allow_outside_repo=self.allow_outside_repo, resolve=resolve
        )
        name = lock_name(self.checkout.namespace, key)
        # A `\\$` in the path may be read as `$` depending on which files exist (see
        # unescape_dollars): such a spelling is resolved every time.
        if plain and type(filepath) is str and "\\$" not in filepath:
            if len(self._plain_files) >= _MAX_PLAIN_FILES:
                self._plain_files.clear()
            self._plain_files[filepath] = (os.fsencode(plain[0]), key, name)
        return key, name
