"""Where the lock directory is when nobody says: the same for every process of one user.

Standard library (`os`, `stat`) only: the agent CLI hook's fast path (one process per tool
call) reads this and nothing else of the lock store.
"""

from __future__ import annotations

import os
import stat

LOCK_DIR_ENV = "LOCKYARD_LOCK_DIR"
SHARED_MEMORY = "/dev/shm"


def default_lock_dir_path() -> str:
    """`LOCKYARD_LOCK_DIR`, else `/dev/shm/lockyard-<uid>`, else `/tmp/lockyard-<uid>`.

    The same for every process of one user whatever its environment: MCP stdio clients,
    cron, ssh and IDE-launched servers pass different variables (`XDG_RUNTIME_DIR` is
    often missing), and an agent and `lockyard status` must find the same locks.
    A memory file system first: every lock operation is a few directory updates, which cost
    microseconds on tmpfs and a tenth of a millisecond or more on a journalled disk.
    Raises ValueError when `LOCKYARD_LOCK_DIR` is set but blank.
    """
    configured = os.environ.get(LOCK_DIR_ENV)
    if configured and not configured.strip():  # a blank path would be a stray directory here
        raise ValueError("LOCKYARD_LOCK_DIR is blank: unset it or set it to a directory")
    if configured:
        return configured
    if usable_shared_memory_dir(SHARED_MEMORY):
        return f"{SHARED_MEMORY}/lockyard-{os.geteuid()}"
    return f"/tmp/lockyard-{os.geteuid()}"


def usable_shared_memory_dir(path: str) -> bool:
    """A real directory (not a symlink) with the sticky bit, writable by us, like /tmp."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    sticky_shared = stat.S_ISDIR(info.st_mode) and bool(info.st_mode & stat.S_ISVTX)
    return sticky_shared and os.access(path, os.W_OK | os.X_OK)
