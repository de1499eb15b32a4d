"""What the PreToolUse guards share: the store they read, the deny output, the repo test.

Standard library only at import time: the agent CLI hooks (`lockyard hook`, one process per
tool call) use these too, and must start fast.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..lockstore import (
    CorruptRecordError,
    JournalRecord,
    directory_ancestors,
    is_directory_key,
    is_glob_key,
)
from ..seen.stale import note_write, stale_reason, write_change
from ..tools.holder_text import UNREADABLE_HOLDER

if TYPE_CHECKING:
    from claude_agent_sdk import HookContext
    from claude_agent_sdk.types import SyncHookJSONOutput

logger = logging.getLogger(__name__)

HookFn = Callable[[Any, "str | None", "HookContext"], Any]


class GuardStore(Protocol):
    """What the guards read from the lock store (they never take or release a lock)."""

    @property
    def namespace(self) -> str: ...
    @property
    def root(self) -> str: ...
    def canonicalize(self, filepath: str) -> str: ...
    def holder(self, filepath: str) -> str | None: ...
    def holds_of(self, keys: Sequence[str]) -> dict[str, tuple[str | None, tuple[str, ...]]]: ...
    def stale_grant(self, filepath: str, agent_id: str) -> str | None: ...
    def readers(self, filepath: str) -> tuple[str, ...]: ...
    def globs_over(self, key: str) -> tuple[str, ...]: ...
    def holder_below(self, key: str, agent_id: str) -> str | None: ...
    def grant_fence(self, filepath: str, agent_id: str) -> int | None: ...
    def journal_write(self, record: JournalRecord) -> None: ...


def lost_grant(store: GuardStore, key: str, agent_id: str) -> str | None:
    """Why the agent's own grant of `key` is stale (a newer fencing number, a lost session),
    or None. A store that cannot tell (an unreadable record) denies as the holder check does."""
    try:
        return store.stale_grant(key, agent_id)
    except CorruptRecordError:
        return None


def revoked_over(store: GuardStore, key: str, agent_id: str) -> tuple[str | None, str]:
    """A directory or glob lock over `key` that `agent_id` was granted and lost (revoked,
    not yet told): (`revoked: REASON`, that lock's key); (None, key) when none. Asked only
    for a write of a file nobody's lock covers, so the agent writing under a lock it lost
    hears why, not "not locked by you"."""
    for scope in (*directory_ancestors(key), *store.globs_over(key)):
        stale = lost_grant(store, scope, agent_id)
        if stale is not None:
            return stale, scope
    return None, key


def stale_refusal(
    store: GuardStore, agent_id: str, keys: Iterable[str], acquire: str
) -> tuple[str | None, tuple[str, ...]]:
    """Why writing `keys` (files `agent_id` holds) would erase a change the agent has not
    seen (seen/stale.py), or None; and the keys whose write the book must note once the whole
    call is allowed (`note_writes`). Only reads: a guard's decision writes nothing."""
    changes, to_note = [], []
    for key in dict.fromkeys(keys):
        change, unnoted = write_change(store.root, agent_id, key)
        if change is not None:
            changes.append(change)
        elif unnoted:
            to_note.append(key)
    if changes:
        return " ".join(stale_reason(change, acquire) for change in changes), ()
    return None, tuple(to_note)


def note_writes(store: GuardStore, agent_id: str, keys: Iterable[str]) -> None:
    """Note in the book that `agent_id` was allowed to write `keys` (the keys a decision
    returned): the hook's step after an allowed call. Never raises."""
    for key in keys:
        try:
            fence = store.grant_fence(key, agent_id)
        except Exception:  # a grant number is a courtesy of the reason texts, never needed
            fence = None
        note_write(store.root, agent_id, key, None if fence is None else f"#{fence}")


def holder_or_unreadable(store: GuardStore, key: str) -> str | None:
    """The lock's holder, or `UNREADABLE_HOLDER` when its record cannot be read: the agent gets
    the same fixed text the tools give, never the parser's details (those are logged)."""
    try:
        return store.holder(key)
    except CorruptRecordError as exc:
        logger.warning("guard: lock record of %s: %s", key, exc)
        return UNREADABLE_HOLDER


def holder_over(store: GuardStore, key: str, agent_id: str) -> tuple[str | None, str]:
    """(who decides a write of `key` for `agent_id`, the key whose lock says so): the holder
    of `key` itself, else of the outermost directory (or glob matching it) another agent
    holds or reads, else of one `agent_id` holds (a directory or glob lock covers its files);
    (None, key) when nothing covers it. `UNREADABLE_HOLDER` for a record that cannot be read.
    The agent's own lock of `key` decides: nobody else holds a directory over a file someone
    holds (a directory lock waits for the holds under it). All these locks are read in one
    look (`holds_of`: one query on PostgreSQL, where each was two round trips)."""
    return _first_holder(store, key, agent_id, with_key=True)


def directory_holder(store: GuardStore, key: str, agent_id: str) -> tuple[str | None, str]:
    """`holder_over` for a `key` whose own lock nobody holds (read already): the directories
    over it, then the globs that match it, in one look."""
    return _first_holder(store, key, agent_id, with_key=False)


def _first_holder(
    store: GuardStore, key: str, agent_id: str, *, with_key: bool
) -> tuple[str | None, str]:
    scopes = (*directory_ancestors(key), *store.globs_over(key))
    try:
        holds = store.holds_of((key, *scopes) if with_key else scopes)
    except CorruptRecordError:  # one record unreadable: each lock alone, to name it
        return _one_by_one(store, key, agent_id, scopes, with_key=with_key)
    if with_key and holds[key][0] is not None:
        return holds[key][0], key
    own = None
    for scope in scopes:
        over, readers = holds[scope]
        if over is not None and over != agent_id:
            return over, scope
        others = [reader for reader in readers if reader != agent_id]
        if others:
            return others[0], scope
        if over == agent_id and own is None:
            own = scope
    return (None, key) if own is None else (agent_id, own)


def _one_by_one(
    store: GuardStore, key: str, agent_id: str, scopes: tuple[str, ...], *, with_key: bool
) -> tuple[str | None, str]:
    """`_first_holder`, asking each lock alone (an unreadable one is `UNREADABLE_HOLDER`)."""
    if with_key and (holder := holder_or_unreadable(store, key)) is not None:
        return holder, key
    own = None
    for scope in scopes:
        over = holder_or_unreadable(store, scope)
        if over is not None and over != agent_id:
            return over, scope
        readers = other_readers(store, scope, agent_id)
        if readers:
            return readers[0], scope
        if over == agent_id and own is None:
            own = scope
    return (None, key) if own is None else (agent_id, own)


def other_readers(store: GuardStore, key: str, agent_id: str) -> tuple[str, ...]:
    """The agents other than `agent_id` holding `key` shared: while any is left, even the
    lock's holder may not write (it still waits for them). Fails closed: an unreadable
    reader's record counts as a reader."""
    try:
        readers = store.readers(key)
    except CorruptRecordError:
        return ("(an unreadable record)",)
    return tuple(reader for reader in readers if reader != agent_id)


def still_draining(store: GuardStore, via: str, agent_id: str) -> str | None:
    """Who still holds something below the directory or glob `via`, which `agent_id`'s own
    lock of it waits for (it holds its line, "draining": its acquire call has not returned,
    and may time out); None once granted, and for a file's lock. Fails closed: an unreadable
    record counts as a hold."""
    if not (is_directory_key(via) or is_glob_key(via)):
        return None
    try:
        return store.holder_below(via, agent_id)
    except CorruptRecordError:
        return "(an unreadable record)"


def draining_reason(store: GuardStore, via: str, agent_id: str, acquire: str) -> str | None:
    """Why `agent_id` may not write under its own lock of `via` yet (`still_draining`)."""
    below = still_draining(store, via, agent_id)
    if below is None:
        return None
    return (
        f"Your lock of {via} is not granted yet: it waits for {below} to release what it "
        f"holds under {via} (your {acquire} call has not returned yet). Retry after it has."
    )


def readers_reason(key: str, readers: Iterable[str], acquire: str) -> str:
    """Why the holder of `key` may not write it yet: readers still hold it shared."""
    return (
        f"{key} is still held shared by {', '.join(readers)}: your exclusive lock waits for "
        f"them to release it (your {acquire} call has not returned yet). Retry after it has."
    )


def shared_note(store: GuardStore, agent_id: str, keys: Iterable[str], acquire: str) -> str:
    """A sentence for the refused `keys` that `agent_id` holds shared (reading only), else
    "": a reader's write needs the exclusive lock, which it gets by locking again."""
    reading = []
    for key in keys:
        try:
            if agent_id in store.readers(key):
                reading.append(key)
        except Exception:  # a courtesy of the reason text: the refusal stands without it
            logger.exception("guard could not read the shared holds of %s", key)
    if not reading:
        return ""
    return (
        f" You hold {', '.join(reading)} shared (for reading only): writing needs the "
        f'exclusive lock. Upgrade by calling {acquire} with {{"filepaths": '
        f'{json.dumps(reading)}, "mode": "exclusive"}} (it waits for the other readers).'
    )


def deny(reason: str) -> SyncHookJSONOutput:
    """The PreToolUse output that blocks the call; the model sees `reason` as the tool error."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def repo_key(store: GuardStore, path: str) -> str | None:
    """The store's lock key of the absolute `path`, or None when it lies outside the
    repository; ValueError when the store refuses a path inside it (a directory, say).

    The path is resolved once, by the store's key: a key is relative exactly when the
    resolved path lies inside the checkout (a store that keys outside files keys them by
    their absolute path). Only a path the store refuses is resolved again, to tell a file
    outside the repository from a bad path inside it."""
    try:
        key = store.canonicalize(path)
    except ValueError:
        if inside_repo(path, store.root):
            raise
        return None
    return None if key.startswith("/") else key


def inside_repo(path: str, repo: str) -> bool:
    """Whether `path` lies in the checkout rooted at `repo`, symlinks resolved. Relative
    paths count as inside. (`os.path`, not pathlib: a long-lived guard runs this per call.)"""
    if not os.path.isabs(path):
        return True
    try:
        resolved = os.path.realpath(path)
    except (OSError, ValueError):
        return True  # let the store judge it
    given = repo.rstrip("/")
    if resolved == given or resolved.startswith(given + "/"):
        # Every leading part of a resolved path is a real directory, so `repo` resolves to
        # itself here: resolving it too (a system call per part, per tool call) would agree.
        return True
    root = os.path.realpath(repo)
    return resolved == root or resolved.startswith(root.rstrip("/") + "/")
