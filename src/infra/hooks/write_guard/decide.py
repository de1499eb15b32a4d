"""The write guard's decision: may this agent edit this file now? (standard library only)

Shared by the SDK hook (`locking.make_write_guard_hook`) and the agent CLI hooks
(`lockyard hook`), so both give the same answer and the same reason texts.
"""

from __future__ import annotations

import logging
import os

from ...tools.holder_text import UNREADABLE_HOLDER
from ..guard_common import (
    GuardStore,
    directory_holder,
    draining_reason,
    holder_or_unreadable,
    lost_grant,
    other_readers,
    readers_reason,
    repo_key,
    revoked_over,
    shared_note,
    stale_refusal,
)

logger = logging.getLogger(__name__)


def write_denial(
    store: GuardStore,
    agent_id: str,
    raw_path: str,
    cwd: object,
    acquire: str,
    *,
    allow_outside_repo: bool = True,
) -> str | None:
    """None when `agent_id` may write `raw_path` (relative to `cwd`), else the reason it may not
    (`judge_write`'s reason). Only reads."""
    return judge_write(
        store, agent_id, raw_path, cwd, acquire, allow_outside_repo=allow_outside_repo
    )[0]


def judge_write(
    store: GuardStore,
    agent_id: str,
    raw_path: str,
    cwd: object,
    acquire: str,
    *,
    allow_outside_repo: bool = True,
) -> tuple[str | None, tuple[str, ...]]:
    """Why `agent_id` may not write `raw_path` (relative to `cwd`), or None; and the keys the
    hook notes in the book as the agent's write once the call is allowed
    (`guard_common.note_writes`). Only reads: judging writes nothing.

    Files outside the repository are allowed unless `allow_outside_repo=False`; paths the
    store rejects (a directory, say) are denied; an unreadable lock is never a granted lock;
    a file changed since the agent last read it is refused (`stale_refusal`).
    `acquire` is the lock tool's name as the model sees it, for the reason texts.
    """
    path = absolute(raw_path, cwd)
    try:
        key = repo_key(store, path)
    except ValueError as exc:
        return f"Cannot edit {raw_path}: {exc}.", ()
    if key is None:
        if allow_outside_repo:
            return None, ()
        return f"{raw_path} is outside the repository {store.root}: edit files inside it.", ()
    if (held := _held(store, agent_id, key, acquire)) is not None:
        return held, ()
    return stale_refusal(store, agent_id, [key], acquire)


def _held(store: GuardStore, agent_id: str, key: str, acquire: str) -> str | None:
    """Why `agent_id` does not hold the lock of `key` (or holds it by a lost grant), or None."""
    try:
        holder, via = holder_or_unreadable(store, key), key
        if holder is None:  # a directory lock over it may decide
            holder, via = directory_holder(store, key, agent_id)
    except Exception as exc:  # fail closed: an unreadable lock is not a granted lock
        logger.exception("write guard could not read the lock of %s", key)
        return f"Cannot check the lock of {key} ({exc}); retry the edit shortly."
    if holder == UNREADABLE_HOLDER:
        return (
            f"The lock of {via} is unreadable, so nobody may edit it: ask the operator to "
            "run `lockyard status`, and work on other files meanwhile."
        )
    stale = lost_grant(store, via, agent_id)
    if stale is None and holder is None:  # a directory or glob lock it lost may cover it
        stale, via = revoked_over(store, key, agent_id)
    if stale is not None:
        return (
            f"{stale}: the lock you were granted was lost, so your edit could overwrite "
            f'another agent\'s. Call {acquire} with {{"filepaths": ["{via}"]}}, re-read '
            "the file, then edit."
        )
    if holder == agent_id:
        readers = other_readers(store, via, agent_id)
        if not readers and via != key:
            readers = other_readers(store, key, agent_id)
        if readers:
            return readers_reason(via, readers, acquire)
        return draining_reason(store, via, agent_id, acquire)
    return not_locked_reason(key, holder, acquire, via) + shared_note(
        store, agent_id, [key], acquire
    )


def not_locked_reason(key: str, holder: str | None, acquire: str, via: str | None = None) -> str:
    """Why a write of `key` is refused: nobody holds it for the writer, or `holder` holds
    it (or the directory `via` over it)."""
    call = f'{acquire} with {{"filepaths": ["{key}"]}}'
    if holder is None:
        return f"{key} is not locked by you. Call {call} first, then retry this edit."
    if via in (None, key):
        where = key
    elif via.endswith("/"):
        where = f"{key} is under the directory {via}, which"
    else:
        where = f"{key} matches the glob {via}, which"
    return (
        f"{where} is locked by agent {holder}. Call {call} (it waits for {holder} to release "
        "it), or work on other files first; then retry this edit."
    )


def absolute(path: str, cwd: object) -> str:
    if os.path.isabs(path) or not isinstance(cwd, str) or not cwd:
        return path
    return os.path.join(cwd, path)
