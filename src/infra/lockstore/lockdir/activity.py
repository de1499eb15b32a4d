"""When each agent last did anything: one heartbeat file per agent in the lock directory.

Every tool call of an agent stamps it (its lock tools, and each call a guard judges): the
stamp is the file's modification time, set by one `utimensat` system call, so the lock path
and the guard pay nothing more (`benchmarks/bench_activity.py` measures it). A holder that
stopped working (waiting for a person, looping) shows as a holder whose stamp is old.

    active/<hash of the agent id>    empty the first time, then only its mtime changes

Standard library only: the agent CLI hook's own process stamps it too.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from typing import Final

ACTIVE_DIR: Final = "active"
_NAME_CHARS: Final = 24
_OPEN_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
_paths: dict[tuple[str, str], str] = {}
"""(lock directory, agent id) -> its stamp's path: the hash is computed once per agent."""


def activity_path(lock_dir: str | os.PathLike[str], agent_id: str) -> str:
    """The file whose mtime is `agent_id`'s last activity (hashed: agent ids may hold any
    character a file name cannot)."""
    key = (os.fspath(lock_dir), agent_id)
    path = _paths.get(key)
    if path is None:
        digest = hashlib.sha256(agent_id.encode()).hexdigest()[:_NAME_CHARS]
        path = os.path.join(key[0], ACTIVE_DIR, digest)
        if len(_paths) > 4096:
            _paths.clear()
        _paths[key] = path
    return path


def stamp_activity(lock_dir: str | os.PathLike[str], agent_id: str) -> None:
    """`agent_id` did something now. Never raises: a heartbeat that cannot be written
    (a read-only or vanished lock directory) must not fail the call it rides on."""
    path = activity_path(lock_dir, agent_id)
    try:
        os.utime(path, follow_symlinks=False)
        return
    except FileNotFoundError:
        pass  # the agent's first stamp: create it below
    except OSError:
        return
    try:
        os.mkdir(os.path.dirname(path), 0o700)
    except FileExistsError:
        pass
    except OSError:
        return
    with contextlib.suppress(OSError):
        os.close(os.open(path, _OPEN_FLAGS, 0o600))  # a new file's mtime is now


def last_active(lock_dir: str | os.PathLike[str], agent_id: str) -> float | None:
    """When `agent_id` last did anything (seconds since the epoch); None: never stamped here."""
    try:
        return os.stat(activity_path(lock_dir, agent_id), follow_symlinks=False).st_mtime
    except OSError:
        return None
