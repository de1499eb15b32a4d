"""Locks an operator took from an agent, kept until the agent's next lock call tells it why.

`lockyard clean --agent ID [--reason TEXT]` releases a live agent's locks (a holder that
stalled while others wait); the agent itself is not interrupted, so it learns of it on its
next `lock_acquire` or `lock_release`, whose result lists the lost locks with the reason
(`LockBackend.take_lost_locks`). Meanwhile the guards refuse its writes, since it holds
nothing.

    revoked/<hash of the agent id>    one JSON line per lock taken: filepath, reason, at

Lines are appended (one `write` each, O_APPEND: whole lines even with several operators at
once). The agent takes them by renaming the file to a name of its own first, so a line
appended meanwhile goes to a new file and is told on the call after: none is lost or told
twice. An agent that has none pays one failed `rename`. Until then the guards read the reason
(`pending_reason`) to say it when they refuse the agent's write of such a file.
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

REVOKED_DIR: Final = "revoked"
_NAME_CHARS: Final = 24
_MAX_BYTES: Final = 1 << 20
_APPEND: Final = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


def _path(lock_dir: str | os.PathLike[str], agent_id: str) -> str:
    return _path_in(os.fspath(lock_dir), agent_id)


@functools.lru_cache(maxsize=1024)
def _path_in(lock_dir: str, agent_id: str) -> str:
    # Kept: a long-lived guard asks this for every write it judges (a hash and a join).
    digest = hashlib.sha256(agent_id.encode()).hexdigest()[:_NAME_CHARS]
    return os.path.join(lock_dir, REVOKED_DIR, digest)


def post_revocation(
    lock_dir: str | os.PathLike[str], agent_id: str, keys: list[str], reason: str
) -> None:
    """Leave `agent_id` word that the locks of `keys` were taken from it, and why."""
    if not keys:
        return
    path = _path(lock_dir, agent_id)
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
    data = read_small_file(_path(lock_dir, agent_id), _MAX_BYTES)
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
    path = _path(lock_dir, agent_id)
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
