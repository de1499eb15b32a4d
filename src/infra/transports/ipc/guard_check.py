"""The host's answer to a sandbox's write guard: who holds the files it is about to write.

A hook inside a sandbox (an agent CLI's pre-tool hook) cannot read the host's lock store.
It sends a `check` request naming the files a tool call would write; the host answers, for
the agent of the folder the request came from, each file's lock key, its holder and whether
that agent's own grant is still valid. The hook then runs the guards' usual decision on
these answers (`lockyard.infra.agentcli.ipc_guard_store`), so a sandboxed agent is judged
as every other agent is. The agent is always the folder's, never something the request says.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ...lockstore import (
    CorruptRecordError,
    LockBackend,
    LockStoreError,
    is_directory_key,
    is_glob_key,
)

log = logging.getLogger(__name__)


def check_locks(store: LockBackend, agent: str, paths: Sequence[str]) -> list[dict[str, Any]]:
    """Per path: `path` as asked, then its lock key (`filepath`), `holder` (None: free),
    `unreadable` when the lock's record cannot be read, `lost`: why `agent`'s grant of it
    is no longer valid (None: valid, or never granted here), `readers`, `below` for a
    directory or glob lock `agent` holds: another agent still holding something below it
    (`LockBackend.holder_below`: the lock still waits), and `globs`: the glob locks that
    cover it (`LockBackend.globs_over`). A path the store refuses, or a store that
    cannot answer (PostgreSQL unreachable), gets `error` instead: the guard then refuses the
    write. Each glob named is answered too, after the paths (its `path` is its key), so the
    guard learns who holds it in the same round trip. Store calls in place (from an event
    loop: in a worker thread)."""
    answers: list[dict[str, Any]] = []
    globs: dict[str, None] = {}
    for path in paths:
        try:
            key = store.canonicalize(path)
            over = store.globs_over(key)
            state = _lock_state(store, key, agent)
            answers.append({"path": path, "filepath": key, **state, "globs": list(over)})
            globs.update(dict.fromkeys(over))
        except (LockStoreError, ValueError) as exc:
            answers.append({"path": path, "error": str(exc)})
    for glob in globs:
        try:
            answers.append({"path": glob, "filepath": glob, **_lock_state(store, glob, agent)})
        except LockStoreError as exc:
            answers.append({"path": glob, "error": str(exc)})
    return answers


def _lock_state(store: LockBackend, key: str, agent: str) -> dict[str, Any]:
    try:
        state: dict[str, Any] = {"holder": store.holder(key)}
    except CorruptRecordError:  # never granted nor broken: nobody may write it
        state = {"holder": None, "unreadable": True}
    try:
        state["lost"] = store.stale_grant(key, agent)
    except CorruptRecordError:
        state["lost"] = None
    try:
        state["readers"] = list(store.readers(key))
    except CorruptRecordError:  # a reader unknown: the holder may not write
        state["readers"] = ["(unreadable)"]
    if state["holder"] == agent and (is_directory_key(key) or is_glob_key(key)):
        try:  # its directory or glob lock may still wait for the holds below it
            state["below"] = store.holder_below(key, agent)
        except CorruptRecordError:
            state["below"] = "(unreadable)"
    return state
