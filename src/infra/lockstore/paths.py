"""The building blocks of lock keys: input checks, path resolution, lock names.

`checkout.py` turns a file path into its repository-relative key with these; a literal key
`__name__` (a lock that is not a file, e.g. `__schema__`) is passed through unchanged.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import math
import os
import re
import stat
from typing import Final

from ...core.agent_ids import AgentIdError
from ...core.agent_ids import validate_agent_id as core_validate_agent_id
from .errors import InvalidAgentIdError, InvalidPathError, InvalidTimeoutError

MAX_PATH_CHARS = 4096
"""Longer inputs are refused: no real path on Linux is longer (PATH_MAX)."""

_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)
_LITERAL_KEY = re.compile(r"__[^/\x00]+__")


def is_literal_key(filepath: str) -> bool:
    """`__name__` keys name a lock that is not a file; they are never resolved."""
    return _LITERAL_KEY.fullmatch(filepath) is not None


_FILE_PATH_WANTED = "pass a file path relative to the repository"


def validate_path_text(
    filepath: object, what: str = "filepath", wanted: str = _FILE_PATH_WANTED
) -> str:
    if not isinstance(filepath, str):
        raise InvalidPathError(
            f"{what} must be a string, got {type(filepath).__name__}; pass the path as text"
        )
    if not filepath.strip():
        raise InvalidPathError(f"{what} is empty; {wanted}")
    if "\x00" in filepath:
        raise InvalidPathError(f"{what} contains a NUL byte; remove it")
    if len(filepath) > MAX_PATH_CHARS:
        raise InvalidPathError(
            f"{what} is {len(filepath)} characters long; paths are limited to {MAX_PATH_CHARS}"
        )
    refuse_non_utf8(filepath, what)
    return filepath


def refuse_non_utf8(text: str, what: str) -> None:
    """Records are UTF-8 JSON: a name that is not UTF-8 (bytes decoded with surrogateescape,
    an escaped lone surrogate) would write a record nobody can read back."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidPathError(
            f"{what} {text.encode('utf-8', 'backslashreplace').decode('ascii', 'replace')!r} "
            "is not valid UTF-8 text (its name holds bytes that are not UTF-8); lockyard "
            "locks only files whose paths are UTF-8: rename the file or directory"
        ) from None


def validate_agent_id(agent_id: object) -> str:
    """The shared agent id rule (`lockyard.core.agent_ids`), raising the store's typed error."""
    try:
        return core_validate_agent_id(agent_id)
    except AgentIdError as error:
        raise InvalidAgentIdError(str(error)) from None


def unescape_dollars(path: str) -> str:
    """Agents sometimes send `\\$` copied from a shell line; use `$` when that file exists."""
    if "\\$" not in path:
        return path
    unescaped = path.replace("\\$", "$")
    if os.path.lexists(unescaped) and not os.path.lexists(path):
        return unescaped
    return path


def resolve_entry(path: str) -> tuple[str, bool]:
    """`os.path.realpath(path)`, and whether it names an existing directory.

    realpath lstat()s every component in Python; opening the path (or, for a file that does
    not exist yet, its directory) with O_PATH and reading /proc/self/fd back costs a few
    system calls whatever the depth. Anything unusual falls back to realpath.
    """
    resolved = _kernel_resolve(path)
    if resolved is not None:
        return resolved
    _refuse_unresolvable(path)
    directory, tail = os.path.split(path)
    if tail in ("", ".", ".."):
        real = os.path.realpath(path)
        return real, os.path.isdir(real)
    found = _kernel_resolve(directory, missing_child=tail)
    if found is None:
        real = os.path.realpath(path)
        return real, os.path.isdir(real)
    return os.path.join(found[0], tail), False


def _refuse_unresolvable(path: str) -> None:
    """A path the kernel refuses to walk names no file that could ever be edited: say so
    instead of making up a key (realpath gives up silently on these)."""
    try:
        os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise InvalidPathError(
                f"{path!r} goes through a symlink loop; fix or remove the looping symlink"
            ) from None
        if error.errno == errno.ENOTDIR:
            raise InvalidPathError(
                f"{path!r} goes through a file as if it were a directory; check the path"
            ) from None


def _kernel_resolve(path: str, missing_child: str | None = None) -> tuple[str, bool] | None:
    """The resolved path of an existing `path` (whose `missing_child` must not exist), and
    whether it is a directory."""
    try:
        fd = os.open(path, _O_PATH | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if missing_child is not None:
            try:
                os.lstat(missing_child, dir_fd=fd)
            except FileNotFoundError:
                pass
            else:
                return None  # exists after all (e.g. a dangling symlink): let realpath decide
        resolved = os.readlink(f"/proc/self/fd/{fd}")
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not resolved.startswith("/") or resolved.endswith(" (deleted)"):
        return None
    return resolved, is_dir


@functools.lru_cache(maxsize=4096)
def lock_name(namespace: str, key: str) -> str:
    """The file-system-safe name of a lock: a hash of namespace and key (fixed length).

    Every checkout of one namespace computes the same name for one repository-relative key,
    so agents in two worktrees contend for one lock directory entry."""
    digest = hashlib.sha256(f"{namespace}\x00{key}".encode(errors="surrogatepass")).hexdigest()
    return digest[:40]


# The bounds of a wait, the same on every backend: `timeout_seconds` and `poll_interval_ms`.
# A value out of range is refused with an error that names the range, before anything is
# taken or queued.
MAX_TIMEOUT_SECONDS: Final = 3600
"""An hour, for every wait (the store's and the lock tools'): longer is almost certainly a unit
mistake (milliseconds passed as seconds), and a wait that long should be a retry loop."""
MIN_POLL_INTERVAL_MS: Final = 1
MAX_POLL_INTERVAL_MS: Final = 60_000


def validate_timeout(timeout_seconds: object) -> float:
    if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, int | float):
        raise InvalidTimeoutError(
            f"timeout_seconds must be a number of seconds, got {type(timeout_seconds).__name__}"
        )
    value = float(timeout_seconds)
    if not math.isfinite(value) or value < 0 or value > MAX_TIMEOUT_SECONDS:
        raise InvalidTimeoutError(
            f"timeout_seconds={timeout_seconds!r} is out of range; "
            f"use 0 (do not wait) up to {MAX_TIMEOUT_SECONDS:g} seconds"
        )
    return value


def validate_poll_interval(poll_interval_ms: object) -> float:
    if isinstance(poll_interval_ms, bool) or not isinstance(poll_interval_ms, int | float):
        raise InvalidTimeoutError(
            f"poll_interval_ms must be a number of milliseconds, "
            f"got {type(poll_interval_ms).__name__}"
        )
    value = float(poll_interval_ms)
    if not math.isfinite(value) or not MIN_POLL_INTERVAL_MS <= value <= MAX_POLL_INTERVAL_MS:
        raise InvalidTimeoutError(
            f"poll_interval_ms={poll_interval_ms!r} is out of range; "
            f"use {MIN_POLL_INTERVAL_MS} to {MAX_POLL_INTERVAL_MS} milliseconds"
        )
    return value / 1000.0
