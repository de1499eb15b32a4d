"""The decision: may this agent run this shell command now?

Every file the command writes inside the repository must be locked by the agent; files
outside it are not lockyard's business. A directory created or removed changes no file, so it
needs no lock, unless another agent holds a lock on that very path. When the guard cannot
name what a command writes, `ShellGuardPolicy.undetermined` decides (deny by default) and the
reason tells the agent how to go on.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass
from typing import Final, Literal

from ...clone_state import checkout_root
from ...tools.holder_text import UNREADABLE_HOLDER
from ..git_query import cached
from ..guard_common import (
    GuardStore,
    draining_reason,
    holder_over,
    inside_repo,
    lost_grant,
    other_readers,
    readers_reason,
    revoked_over,
    shared_note,
    stale_refusal,
)
from .git_turn import lockyard_program, turn_prefix, turn_refusal, waiting_refusal
from .targets import GitTurnUse, Target, WriteTargets, write_targets

logger = logging.getLogger(__name__)

UndeterminedPolicy = Literal["deny", "allow"]

MAX_COMMAND_CHARS: Final = 256 * 1024
"""A longer command line is not read at all: undetermined (denied by default), at once."""


@dataclass(frozen=True)
class ShellGuardPolicy:
    undetermined: UndeterminedPolicy = "deny"
    """What to do with a command that writes somewhere the guard cannot name."""
    git_turns: bool = False
    """Whether a line that runs a repository-locking git command must take git's turn first
    (`lockyard git-turn`; docs/no-lost-edits.md, 'Git takes turns')."""


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
    refused: tuple[str, ...] = ()
    """Why it is refused whatever the agent locks (it frees or changes other agents' locks,
    or makes git run a program): the operator's business, whatever the policy."""
    to_note: tuple[str, ...] = ()
    """Lock keys the hook notes in the clone's book as the agent's writes once the call is
    allowed (`guard_common.note_writes`): deciding writes nothing."""
    viewed: tuple[str, ...] = ()
    """Files the command shows the agent (`cat f`, `sed -n 1,9p f`, `< f`), which the hook
    notes as read once the call is allowed (`read_note.note_reads`)."""
    git_turn: str | None = None
    """The prefix the line must start with to take git's turn, when that is why it is refused."""


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
    lock_dir: str | os.PathLike[str] | None = None,
) -> Decision:
    """Whether `agent_id` may run `command` in directory `cwd` (default: the repository).

    Only reads: the lock store (holders), the file system (globs, directories) and, for git
    commands that rewrite the tree, read-only git queries (with the repository's programs
    disabled). The denial names the lock tool `acquire_tool` (default:
    `mcp__<server_key>__lock_acquire`, server key "lockyard"). `home` is `$HOME` for `~`
    (default: this process's HOME). `lock_dir` is the lock directory, whose entries no
    command may write (default: the store's own, when it has one).
    """
    if len(command) > MAX_COMMAND_CHARS:
        found = WriteTargets(
            undetermined=[
                f"the command is {len(command):,} characters long, more than the guard reads "
                f"({MAX_COMMAND_CHARS:,}): write long content with the file-editing tools, "
                "or split the command"
            ]
        )
    else:
        directory = os.fspath(cwd) if cwd else store.root
        home = home if home is not None else os.environ.get("HOME")
        with cached():
            found = write_targets(command, directory, home, root=store.root)
    if lock_dir is None:
        lock_dir = getattr(store, "lock_dir", None)
    decision = judge(
        found,
        agent_id,
        store,
        policy=policy,
        server_key=server_key,
        acquire_tool=acquire_tool,
        lock_dir=lock_dir,
    )
    return _with_git_turn(decision, found.git_turn, command, cwd, agent_id, policy)


def _with_git_turn(
    decision: Decision,
    turn: GitTurnUse,
    command: str,
    cwd: str | os.PathLike[str] | None,
    agent_id: str,
    policy: ShellGuardPolicy,
) -> Decision:
    """`decision`, refused also when the line must take git's turn first, or holds one while
    it waits for file locks."""
    said: str | None = None
    prefix: str | None = None
    holds_turn = turn.taken or (policy.git_turns and turn.needed_by is not None)
    if turn.lock_waiter is not None and holds_turn:
        said = waiting_refusal(turn.lock_waiter)
    elif policy.git_turns and turn.needed_by is not None:
        program = lockyard_program()
        if program is None:  # no lockyard to name: git runs as without turns
            return decision
        prefix = turn_prefix(program, agent_id, _other_checkout(turn.needed_in, cwd))
        said = turn_refusal(turn.needed_by, prefix, command)
    if said is None:
        return decision
    reason = said if decision.reason is None else f"{decision.reason} {said}"
    return dataclasses.replace(decision, allowed=False, reason=reason, to_note=(), git_turn=prefix)


def _other_checkout(directory: str | None, cwd: str | os.PathLike[str] | None) -> str | None:
    """`directory` when it is in another checkout than `cwd` (the turn is taken there)."""
    if directory is None or cwd is None:
        return None
    here = checkout_root(os.fspath(cwd))
    there = checkout_root(directory)
    return None if there is None or there == here else directory


def judge(
    found: WriteTargets,
    agent_id: str,
    store: GuardStore,
    *,
    policy: ShellGuardPolicy = DEFAULT_POLICY,
    server_key: str | None = None,
    acquire_tool: str | None = None,
    lock_dir: str | os.PathLike[str] | None = None,
) -> Decision:
    """The decision on write targets already found (see `decide_shell_command`)."""
    unlocked: dict[str, str | None] = {}
    covered: dict[str, str] = {}  # unlocked key -> the directory lock over it that decides
    lost: dict[str, str | None] = {}
    locked: list[str] = []
    problems: list[str] = []
    still_waiting: list[str] = []  # its own locks that still wait (for readers, holds below)
    refused = list(found.refused)
    unlisted: list[str] = []
    # Resolved once there is a target: a command that writes nothing costs no system call.
    records = os.path.realpath(lock_dir) if lock_dir is not None and found.targets else None
    for target in found.targets:
        if records is not None and _touches(target, records):
            said = f"`{_short(target.command)}` writes in the lock directory ({target.path})"
            if said not in refused:
                refused.append(said)
            continue
        if not inside_repo(target.path, store.root):
            continue
        if target.kind == "tree" or (target.kind == "directory" and os.path.isdir(target.path)):
            # Its files are targets of their own; the directory itself is refused only
            # under another agent's directory lock.
            tool = acquire_tool if acquire_tool is not None else _acquire_tool_name(server_key)
            _judge_directory(
                store, agent_id, target.path, tool, unlocked, covered, problems, still_waiting
            )
            continue
        if target.kind == "unlisted":
            said = f"`{_short(target.command)}`: {target.reason} ({target.path})"
            if said not in unlisted:
                unlisted.append(said)
            continue
        if os.path.isdir(target.path):
            continue  # an existing directory: its files were listed one by one where written
        try:
            key = store.canonicalize(target.path)
            holder, via = holder_over(store, key, agent_id)
            # A file it does not hold may have been taken from it (revoked): say why.
            mine = holder == agent_id or (target.kind == "file" and holder != UNREADABLE_HOLDER)
            stale = lost_grant(store, via, agent_id) if mine else None
            if stale is None and holder is None and target.kind == "file":
                stale, via = revoked_over(store, key, agent_id)  # under a lock it lost
        except ValueError as exc:
            problems.append(f"{target.path}: {exc}")
            continue
        except Exception as exc:  # fail closed: an unreadable lock is not a granted lock
            logger.exception("shell guard could not read the lock of %s", target.path)
            problems.append(f"cannot check the lock of {target.path} ({exc}); retry shortly")
            continue
        if stale is not None:
            lost.setdefault(key, holder)  # granted to it, but lost or revoked since
            problems.append(
                f"{stale}: the lock of {key} you were granted was lost, so your write could "
                f"overwrite another agent's; lock it again and re-read it"
            )
        elif holder == agent_id:
            tool = acquire_tool if acquire_tool is not None else _acquire_tool_name(server_key)
            waiting = _own_wait(store, agent_id, via, tool)
            if waiting is not None:  # its grant still waits: for readers, or holds below
                if waiting not in still_waiting:
                    still_waiting.append(waiting)
            elif target.kind == "file":
                locked.append(key)
        elif target.kind == "file" or holder is not None:
            unlocked.setdefault(key, holder)
            if via != key:
                covered[key] = via
    every_unknown = (*found.undetermined, *unlisted)
    undetermined = every_unknown if policy.undetermined == "deny" else ()
    tool = acquire_tool if acquire_tool is not None else _acquire_tool_name(server_key)
    if not unlocked and not undetermined and not problems and not refused and not still_waiting:
        stale, to_note = stale_refusal(store, agent_id, locked, tool)
        if stale is not None:
            return Decision(False, stale, locked=tuple(dict.fromkeys(locked)))
        return Decision(
            True,
            locked=tuple(dict.fromkeys(locked)),
            undetermined=every_unknown,
            to_note=to_note,
            viewed=tuple(found.viewed),
        )
    reason = _reason(unlocked, undetermined, problems, tool, refused, covered)
    reason = " ".join([*still_waiting, reason]) if reason else " ".join(still_waiting)
    reason += shared_note(store, agent_id, unlocked, tool)
    return Decision(
        False,
        reason,
        unlocked=(*unlocked.items(), *lost.items()),
        undetermined=every_unknown,
        locked=tuple(dict.fromkeys(locked)),
        refused=tuple(refused),
    )


def _own_wait(store: GuardStore, agent_id: str, via: str, acquire: str) -> str | None:
    """Why `agent_id`'s own lock of `via` does not let it write yet: readers still hold it,
    or (a directory or glob) other agents still hold something below it; None: granted."""
    readers = other_readers(store, via, agent_id)
    if readers:
        return readers_reason(via, readers, acquire)
    return draining_reason(store, via, agent_id, acquire)


def _judge_directory(
    store: GuardStore,
    agent_id: str,
    path: str,
    acquire: str,
    unlocked: dict[str, str | None],
    covered: dict[str, str],
    problems: list[str],
    still_waiting: list[str],
) -> None:
    """A whole directory written (removed, formatted, checked out): refused while another
    agent holds a directory lock on it or over it, or while the agent's own lock of it
    still waits."""
    try:
        key = store.canonicalize(path.rstrip("/") + "/")
        holder, via = holder_over(store, key, agent_id)
    except ValueError:
        return  # not a directory after all (a file, or the root): its files decide
    except Exception as exc:  # fail closed: an unreadable lock is not a granted lock
        logger.exception("shell guard could not read the lock of %s", path)
        problems.append(f"cannot check the lock of {path} ({exc}); retry shortly")
        return
    if holder is not None and holder != agent_id:
        unlocked.setdefault(key, holder)
        if via != key:
            covered[key] = via
    elif holder == agent_id:
        waiting = _own_wait(store, agent_id, via, acquire)
        if waiting is not None and waiting not in still_waiting:
            still_waiting.append(waiting)


def _touches(target: Target, records: str) -> bool:
    """Whether writing `target` changes something under the lock directory `records` (a
    removed tree that holds it counts)."""
    path = target.path
    if path == records or path.startswith(records + "/"):
        return True
    return target.kind == "tree" and records.startswith(path.rstrip("/") + "/")


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _acquire_tool_name(server_key: str | None) -> str:
    # Imported here: the tool schemas load pydantic; CLI hooks pass `acquire_tool` themselves.
    from ...tools.naming import DEFAULT_SERVER_KEY, acquire_tool_name

    return acquire_tool_name(server_key if server_key is not None else DEFAULT_SERVER_KEY)


def _lockable(keys: list[str]) -> list[str]:
    """The keys to ask for: a directory's lock covers the files under it (`rm -r src/x`
    asks for `src/x/`, not for it and each of its files too)."""
    directories = [key for key in keys if key.endswith("/")]
    return [
        key for key in keys if not any(key != top and key.startswith(top) for top in directories)
    ]


def _reason(
    unlocked: dict[str, str | None],
    undetermined: tuple[str, ...],
    problems: list[str],
    acquire: str,
    refused: list[str],
    covered: dict[str, str],
) -> str:
    parts: list[str] = []
    unreadable = UNREADABLE_HOLDER
    if refused:
        parts.append(
            "This command is refused whatever you lock: "
            + "; ".join(refused)
            + ". Agents never free or change each other's locks, lockyard's records or "
            "git's programs: ask the operator to do it."
        )
    if unlocked:
        listed = ", ".join(
            f"{key} ({_under(covered.get(key))}{_holder_text(holder, unreadable)})"
            for key, holder in unlocked.items()
        )
        keys = json.dumps(_lockable(list(unlocked)))
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


def _under(directory: str | None) -> str:
    if directory is None:
        return ""
    return (
        f"under the directory {directory}, "
        if directory.endswith("/")
        else f"matching the glob {directory}, "
    )


def _holder_text(holder: str | None, unreadable: str) -> str:
    if holder is None:
        return "not locked"
    if holder == unreadable:
        return "its lock is unreadable: ask the operator to run `lockyard status`"
    return f"locked by {holder}"
