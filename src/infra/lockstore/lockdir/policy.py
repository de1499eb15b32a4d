"""The lock directory's policy: settings every process on it must agree on, kept in it.

    policy    JSON: {"idle_limit_seconds": 600}    (absent: every setting off)

`idle_limit_seconds`: a holder that did nothing for this long while someone waits for one of
its locks has its locks revoked by the deadlock leader (`crossproc/idle_policy.py`). It is
read on every leader pass, so `lockyard policy --idle-limit` takes effect within one pass in
every process, with nothing restarted.

Written whole (a temporary file renamed over it): a reader sees the old policy or the new.
A policy that cannot be read is no policy (every setting off): a damaged file must never
revoke anyone.
"""

from __future__ import annotations

import json
import os
from typing import Final

from ..atomic_files import open_dir, write_atomic
from .disk import read_small_file

POLICY_FILE: Final = "policy"
_MAX_BYTES: Final = 64 * 1024


def read_idle_limit(lock_dir: str | os.PathLike[str]) -> float | None:
    """The idle limit in seconds; None when off, unset or unreadable."""
    data = read_small_file(os.path.join(lock_dir, POLICY_FILE), _MAX_BYTES)
    if data is None:
        return None
    try:
        limit = json.loads(data).get("idle_limit_seconds")
    except (ValueError, AttributeError):
        return None
    if isinstance(limit, bool) or not isinstance(limit, int | float) or not limit > 0:
        return None
    return float(limit)


def write_idle_limit(lock_dir: str | os.PathLike[str], seconds: float | None) -> None:
    """Set the idle limit (None: off) for every process on `lock_dir`."""
    if seconds is not None and not seconds > 0:
        raise ValueError("an idle limit is a positive number of seconds (None: off)")
    body = {} if seconds is None else {"idle_limit_seconds": seconds}
    with open_dir(lock_dir) as dir_fd:
        # No secret: readable by every reader.
        data = json.dumps(body).encode() + b"\n"
        write_atomic(dir_fd, POLICY_FILE, data, mode=0o644, temp_prefix=f"{POLICY_FILE}.partial-")
