"""The decision: may this agent run this shell command now?

Every file the command writes inside the repository must be locked by the agent; files
outside it are not lockyard's business. A directory created or removed changes no file, so it
needs no lock, unless another agent holds a lock on that very path. When the guard cannot
name what a command writes, `ShellGuardPolicy.undetermined` decides (deny by default) and the
reason tells the agent how to go on.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Final, Literal

from ...tools.holder_text import UNREADABLE_HOLDER
from ..guard_common import GuardStore, holder_or_unreadable, inside_repo, lost_grant
from .targets import WriteTargets, write_targets

logger = logging.getLogger(__name__)

UndeterminedPolicy = Literal["deny", "allow"]


@dataclass(frozen=True)
class ShellGuardPolicy:
    undetermined: UndeterminedPolicy = "deny"
    """What to do with a command that writes somewhere the guard cannot name."""


DEFAULT_POLICY: Final = ShellGuardPolicy()


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str | None = None
    """Why it is denied, written for the agent (None when allowed)."""
    unlocked: tuple[tuple[str, str | None], ...] = ()
    """(lock key, holder or None) of each file written that the agent does not hold (or holds
    by a grant that was lost: a newer fencing number, a lost database session)."""
    undetermined: tuple[str, ...] = ()
    """What the command writes that the guard cannot name, one sentence each."""
    locked: tuple[str, ...] = ()
    """Lock keys of the repository files it writes that the agent holds."""


def decide_shell_command(
    command: str,
    cwd: str | os.PathLike[str] | None,
    agent_id: str,
    store: GuardStore,
    *,
    policy: ShellGuardPolicy = DEFAULT_POLICY,
    server_key: str | None = None,
    acquire_tool: str | None = None,
    home: str | None = None,
) -> Decision:
    """Whether `agent_id` may run `command` in directory `cwd` (default: the repository).

    Only reads: the lock store (holders), the file system (globs, directories) and, for git
    commands that rewrite the tree, read-only git queries. The denial names the lock tool
    `acquire_tool` (default: `mcp__<server_key>__lock_acquire`, server key "lockyard").
    `home` is `$HOME` for `~` (default: this process's HOME).
    """
    directory = os.fspath(cwd) if cwd else store.root
    found = write_targets(command, directory, home if home is not None else os.environ.get("HOME"))
    return judge(
        found, agent_id, store, policy=policy, server_key=server_key, acquire_tool=acquire_tool
    )


def judge(
    found: WriteTargets,
    agent_id: str,
    store: GuardStore,
    *,
    policy: ShellGuardPolicy = DEFAULT_POLICY,
    server_key: str | None = None,
    acquire_tool: str | None = None,
) -> Decision:
    """The decision on write targets already found (see `decide_shell_command`)."""
    unlocked: dict[str, str | None] = {}
    lost: dict[str, str | None] = {}
    locked: list[str] = []
    problems: list[str] = []
    for target in found.targets:
        if not inside_repo(target.path, store.root):
            continue
        if os.path.isdir(target.path):
            continue  # an existing directory: its files were listed one by one where written
        try:
            key = store.canonicalize(target.path)
            holder = holder_or_unreadable(store, key)
            stale = lost_grant(store, key, agent_id) if holder == agent_id else None
        except ValueError as exc:
            problems.append(f"{target.path}: {exc}")
            continue
        except Exception as exc:  # fail closed: an unreadable lock is not a granted lock
            logger.exception("shell guard could not read the lock of %s", target.path)
            problems.append(f"cannot check the lock of {target.path} ({exc}); retry shortly")
            continue
        if stale is not None:
            lost.setdefault(key, holder)  # held, but by a grant that was lost since
            problems.append(
                f"{stale}: the lock of {key} you were granted was lost, so your write could "
                f"overwrite another agent's; lock it again and re-read it"
            )
        elif holder == agent_id:
            if target.kind == "file":
                locked.append(key)
        elif target.kind == "file" or holder is not None:
            unlocked.setdefault(key, holder)
    undetermined = tuple(found.undetermined) if policy.undetermined == "deny" else ()
    if not unlocked and not undetermined and not problems:
        return Decision(
            True, locked=tuple(dict.fromkeys(locked)), undetermined=tuple(found.undetermined)
        )
    tool = acquire_tool if acquire_tool is not None else _acquire_tool_name(server_key)
    reason = _reason(unlocked, undetermined, problems, tool)
    return Decision(
        False,
        reason,
        unlocked=(*unlocked.items(), *lost.items()),
        undetermined=tuple(found.undetermined),
        locked=tuple(dict.fromkeys(locked)),
    )


def _acquire_tool_name(server_key: str | None) -> str:
    # Imported here: the tool schemas load pydantic; CLI hooks pass `acquire_tool` themselves.
    from ...tools.naming import DEFAULT_SERVER_KEY, acquire_tool_name

    return acquire_tool_name(server_key if server_key is not None else DEFAULT_SERVER_KEY)


def _reason(
    unlocked: dict[str, str | None],
    undetermined: tuple[str, ...],
    problems: list[str],
    acquire: str,
) -> str:
    parts: list[str] = []
    unreadable = UNREADABLE_HOLDER
    if unlocked:
        listed = ", ".join(
            f"{key} ({_holder_text(holder, unreadable)})" for key, holder in unlocked.items()
        )
        keys = json.dumps(list(unlocked))
        others = sorted({h for h in unlocked.values() if h is not None and h != unreadable})
        wait = f" (it waits for {', '.join(others)} to release them)" if others else ""
        parts.append(
            f"This command writes files you have not locked: {listed}. Call {acquire} with "
            f'{{"filepaths": {keys}}} first{wait}, then retry the command.'
        )
    if undetermined:
        parts.append(
            "The guard cannot tell which files this command writes: "
            + "; ".join(undetermined)
            + ". Lock the files you mean to change, and write the command so its targets can "
            "be read before it runs (literal paths; no eval, no variables set outside the "
            "command, no xargs or find -exec/-delete for writes)."
        )
    if problems:
        parts.append("Cannot check: " + "; ".join(problems) + ".")
    return " ".join(parts)


def _holder_text(holder: str | None, unreadable: str) -> str:
    if holder is None:
        return "not locked"
    if holder == unreadable:
        return "its lock is unreadable: ask the operator to run `lockyard status`"
    return f"locked by {holder}"
