"""What the lock directory keeps of each agent beside its locks: when it last did anything
(its heartbeat), and the locks an operator took from it until it is told why. One file per
agent in a folder per kind, named by a hash of the agent's id (agent ids may hold any
character a file name cannot).

    active/<hash of the agent id>     its heartbeat: empty the first time, then only its
                                      mtime changes
    revoked/<hash of the agent id>    one JSON line per lock taken: filepath, reason, at

Heartbeats. Every tool call of an agent stamps it (its lock tools, and each call a guard
judges): the stamp is the file's modification time, set by one `utimensat` system call, so
the lock path and the guard pay nothing more (`benchmarks/bench_activity.py` measures it). A
holder that stopped working (waiting for a person, looping) shows as a holder whose stamp is
old.

Revocations. `lockyard clean --agent ID [--reason TEXT]` releases a live agent's locks (a
holder that stalled while others wait); the agent itself is not interrupted, so it learns of
it on its next `lock_acquire` or `lock_release`, whose result lists the lost locks with the
reason (`LockBackend.take_lost_locks`). Meanwhile the guards refuse its writes, since it holds
nothing. Lines are appended (one `write` each, O_APPEND: whole lines even with several
operators at once). The agent takes them by renaming the file to a name of its own first, so
a line appended meanwhile goes to a new file and is told on the call after: none is lost or
told twice. An agent that has none pays one failed `rename`. Until then the guards read the
reason (`pending_reason`) to say it when they refuse the agent's write of such a file.

Standard library only, but for `disk.read_small_file`: the agent CLI hook's own process
stamps heartbeats and reads revocations too.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import secrets
import time
from typing import Final

from .disk import read_small_file

ACTIVE_DIR: Final = "active"
REVOKED_DIR: Final = "revoked"
_NAME_CHARS: Final = 24
_OPEN_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_BYTES: Final = 1 << 20
_APPEND: Final = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


@functools.lru_cache(maxsize=4096)
def _agent_file(lock_dir: str, folder: str, agent_id: str) -> str:
    # Kept: every tool call stamps a heartbeat, and a long-lived guard asks for revocations
    # at every write it judges (a hash and a join each).
    digest = hashlib.sha256(agent_id.encode()).hexdigest()[:_NAME_CHARS]
    return os.path.join(lock_dir, folder, digest)


def activity_path(lock_dir: str | os.PathLike[str], agent_id: str) -> str:
    """The file whose mtime is `agent_id`'s last activity."""
    return _agent_file(os.fspath(lock_dir), ACTIVE_DIR, agent_id)


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


def _revoked_path(lock_dir: str | os.PathLike[str], agent_id: str) -> str:
    return _agent_file(os.fspath(lock_dir), REVOKED_DIR, agent_id)


def post_revocation(
    lock_dir: str | os.PathLike[str], agent_id: str, keys: list[str], reason: str
) -> None:
    """Leave `agent_id` word that the locks of `keys` were taken from it, and why."""
    if not keys:
        return
    path = _revoked_path(lock_dir, agent_id)
    with contextlib.suppress(FileExistsError):
        os.mkdir(os.path.dirname(path), 0o700)
    now = time.time()
    text = "".join(
        json.dumps({"filepath": key, "reason": reason, "at": now}) + "\n" for key in keys
    )
    descriptor = os.open(path, _APPEND, 0o600)
    try:
        os.write(descriptor, text.encode())
    finally:
        os.close(descriptor)


def pending_reason(lock_dir: str | os.PathLike[str], agent_id: str, key: str) -> str | None:
    """Why the lock of `key` was taken from `agent_id`, while it has not been told yet (the
    guards say it when they refuse its writes); None when nothing of it is pending. Reads
    only: one failed `open` when the agent has nothing pending."""
    data = read_small_file(_revoked_path(lock_dir, agent_id), _MAX_BYTES)
    if data is None:
        return None
    reason = None
    for notice in _notices(data):
        if notice["filepath"] == key:
            reason = str(notice.get("reason"))
    return reason


def take_revocations(lock_dir: str | os.PathLike[str], agent_id: str) -> list[dict[str, object]]:
    """The locks taken from `agent_id` since it last asked (filepath, reason, at), each once.
    A line that is not what `post_revocation` writes is skipped."""
    path = _revoked_path(lock_dir, agent_id)
    taken = f"{path}.taking-{secrets.token_hex(6)}"
    try:
        os.rename(path, taken)
    except OSError:  # nothing was revoked (or no lock directory to tell of it)
        return []
    data = read_small_file(taken, _MAX_BYTES)
    with contextlib.suppress(OSError):
        os.unlink(taken)
    return [] if data is None else _notices(data)


def _notices(data: bytes) -> list[dict[str, object]]:
    """The lines `post_revocation` wrote; any other line is skipped."""
    notices: list[dict[str, object]] = []
    for line in data.decode(errors="replace").splitlines():
        try:
            notice = json.loads(line)
        except ValueError:
            continue
        if isinstance(notice, dict) and isinstance(notice.get("filepath"), str):
            notices.append(notice)
    return notices
