"""The agent CLI guard's one decision: judge one tool call of an agent CLI session.

A write tool's call is judged by the write guard; a shell tool's by the shell guard (what
files the command writes, parsed) and then the `git commit` guard (what a commit would take).

`judge_tool_call` is reached two ways, with the same answer: by `lockyard guard`'s HTTP
server in every `lockyard serve` (`guard_server.py`: Claude Code's HTTP hooks, and the
command hook's fast path, `hook_client.py`), and in the command hook's own process when no
server answers (`run_pre_tool_use`). The answer follows the CLI's protocol (`formats.py`).
Whatever goes wrong (an empty, huge or damaged payload, no session, an unreadable lock
directory) ends in a clear deny, never in a crash or a silent allow: a guard that cannot
judge a write refuses it.

Everything imported here is standard library plus lockyard's light modules (no pydantic,
mcp or SDK), for the command hook's own process.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..hooks.commit_guard.decide import commit_denial
from ..hooks.guard_common import GuardStore, note_writes
from ..hooks.read_note.note import note_reads
from ..hooks.write_guard.decide import judge_write
from ..lockstore import default_lock_dir, journal_denied_writes, stamp_activity
from ..session.process_tree import ProcessRef, ancestors
from ..session.registry import SessionRegistry
from .formats import CliFormat, HookAnswer, PayloadError, ToolCall
from .guard_address import MAX_PAYLOAD_BYTES
from .lockdir_reader import LockDirReader, ReaderCache

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HookSettings:
    """What the hook command was told; all optional: the session supplies the rest."""

    lock_dir: str | None = None
    agent_id: str | None = None
    repo: str | None = None
    ipc: str | None = None
    """Inside a sandbox: its IPC folder; the host answers for the folder's agent."""


@dataclass(frozen=True)
class JudgedAgent:
    """The agent a hook judges a tool call for, and the checkout it works in."""

    agent_id: str
    repo: str


class NoSessionError(Exception):
    """No agent id could be found for this hook process."""


def run_pre_tool_use(fmt: CliFormat, raw: bytes, settings: HookSettings) -> HookAnswer:
    """The answer to one PreToolUse-style hook call, judged in this process (the session is
    the one this process runs under, or the one `settings` names). Never raises."""
    if settings.ipc:  # a sandbox: no lock directory, the host answers through the folder
        read = read_tool_call(fmt, raw)
        if isinstance(read, HookAnswer):
            return read
        try:
            from .ipc_guard_store import judge_in_sandbox

            # The clone's git-turn switch is the host's: a sandbox's agents are not asked.
            denial = functools.partial(_denial, clone_switch=False)
            return judge_in_sandbox(fmt, read, settings.ipc, settings.repo, denial)
        except Exception as exc:  # the guard must answer, and a guard that cannot judge refuses
            return _failed(fmt, exc, read)
    try:
        lock_dir = settings.lock_dir or str(default_lock_dir())
    except Exception as exc:
        return _failed(fmt, exc)
    return judge_tool_call(fmt, raw, lock_dir, lambda: judged_agent(settings, lock_dir))


def judge_tool_call(
    fmt: CliFormat, raw: bytes, lock_dir: str, find_agent: Callable[[], JudgedAgent]
) -> HookAnswer:
    """The guard's answer to one tool call (`raw`, the CLI's hook payload) of the session
    `find_agent` finds (NoSessionError: none), on `lock_dir`. Never raises."""
    read = read_tool_call(fmt, raw)
    if isinstance(read, HookAnswer):
        return read
    return judge_read_call(fmt, read, lock_dir, find_agent)


def read_tool_call(fmt: CliFormat, raw: bytes) -> ToolCall | HookAnswer:
    """The tool call in a hook payload, or the answer when that is all it takes (a payload
    that cannot be read is refused, a tool no guard judges is allowed). Never raises."""
    try:
        if len(raw) > MAX_PAYLOAD_BYTES:
            return fmt.deny(
                f"This tool call is larger than {MAX_PAYLOAD_BYTES // (1024 * 1024)} MiB, too "
                "large for lockyard's guard to check, so it is refused: write the file in "
                "smaller parts."
            )
        try:
            call = fmt.parse(_load(raw))
        except PayloadError as exc:
            return fmt.deny(
                f"lockyard's guard could not read this tool call ({exc}), so it is refused. "
                f"Retry the call; if it is refused again, {fmt.display}'s hook input format may "
                "have changed: tell the operator."
            )
        return fmt.allow() if call.kind == "other" else call
    except Exception as exc:  # the guard must answer, and a guard that cannot judge refuses
        return _failed(fmt, exc)


def judge_read_call(
    fmt: CliFormat,
    call: ToolCall,
    lock_dir: str,
    find_agent: Callable[[], JudgedAgent],
    readers: ReaderCache | None = None,
) -> HookAnswer:
    """The guard's answer to a read, write or shell call read by `read_tool_call` (the lock
    directory read through `readers` when given, else a reader of its own). Never raises.
    A read is always allowed, noted or not: its note is a courtesy of the stale-read check."""
    try:
        try:
            agent = find_agent()
        except NoSessionError as exc:
            if call.kind == "read":
                return fmt.allow()
            return fmt.deny(f"{exc} Until then lockyard refuses edits and commits in this session.")
        if readers is not None:
            reason = _denial(fmt, call, readers.get(agent.repo), agent.agent_id)
        else:
            reader = LockDirReader(agent.repo, lock_dir)
            try:
                reason = _denial(fmt, call, reader, agent.agent_id)
            finally:
                reader.close()
        # The step after the decision: every judged call, allowed or refused, is a heartbeat.
        stamp_activity(lock_dir, agent.agent_id)
        return fmt.allow() if reason is None else fmt.deny(reason)
    except Exception as exc:  # the guard must answer, and a guard that cannot judge refuses
        return _failed(fmt, exc, call)


def _failed(fmt: CliFormat, exc: Exception, call: ToolCall | None = None) -> HookAnswer:
    """The refusal of a call the guard could not judge; a read is allowed all the same."""
    if call is not None and call.kind == "read":
        logger.warning("could not note a read of %s", call.paths, exc_info=exc)
        return fmt.allow()
    logger.error("lockyard hook failed", exc_info=exc)
    return fmt.deny(
        f"lockyard's guard failed while checking this call ({type(exc).__name__}: {exc}), "
        "so it is refused. Retry it; if it fails again, ask the operator to run "
        "`lockyard status`."
    )


def _load(raw: bytes) -> object:
    if not raw.strip():
        raise PayloadError("the hook input is empty")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise PayloadError(f"the hook input is not JSON: {str(exc)[:120]}") from None


def _denial(
    fmt: CliFormat, call: ToolCall, reader: GuardStore, agent_id: str, clone_switch: bool = True
) -> str | None:
    """Why the call is refused (journalled: the guard, the files, the reason), or None. Once
    the whole call is allowed, and only then, what it reads and writes is noted in the
    clone's book (`lockyard.infra.seen`), so the guards can refuse a write made from a stale
    read: the decision itself writes nothing. A read is never refused."""
    reason, written, viewed = _decision(fmt, call, reader, agent_id, clone_switch)
    if reason is not None:
        return reason
    note_writes(reader, agent_id, written)
    if call.kind == "read":
        note_reads(reader, agent_id, call.paths, call.cwd)
    else:
        note_reads(reader, agent_id, viewed, None)
    return None


def _decision(
    fmt: CliFormat, call: ToolCall, reader: GuardStore, agent_id: str, clone_switch: bool
) -> tuple[str | None, tuple[str, ...], tuple[str, ...]]:
    """Why the call is refused (journalled), or None, the keys of the writes to note and the
    files a shell command shows (its reads to note)."""
    if call.kind == "read":
        return None, (), ()
    if call.kind == "write":
        written: list[str] = []
        for path in call.paths:
            reason, keys = judge_write(reader, agent_id, path, call.cwd, fmt.acquire_tool)
            if reason is not None:
                journal_denied_writes(reader, agent_id, "write", [path], reason)
                return reason, (), ()
            written.extend(keys)
        return None, tuple(written), ()
    assert call.command is not None
    # The shell guard parses the command (tree-sitter): loaded for shell calls only, so a
    # write's hook does not pay for it.
    from ..gitturn.switch import turns_switched_on
    from ..hooks.shell_guard.decide import ShellGuardPolicy, decide_shell_command
    from ..hooks.shell_guard.git_turn import turns_from_environment

    # The clone's switch (`init --git-turns`) or the CLI's environment: some CLIs (Codex)
    # pass their hooks only a few variables of their own.
    turns = turns_from_environment() or (clone_switch and turns_switched_on(reader.root))
    policy = ShellGuardPolicy(git_turns=turns)
    decision = decide_shell_command(
        call.command, call.cwd, agent_id, reader, policy=policy, acquire_tool=fmt.acquire_tool
    )
    if not decision.allowed:
        reason = decision.reason or "denied by the shell guard"
        journal_denied_writes(reader, agent_id, "shell", [k for k, _ in decision.unlocked], reason)
        return reason, (), ()
    reason = commit_denial(reader, agent_id, call.command, call.cwd, fmt.acquire_tool)
    if reason is not None:
        journal_denied_writes(reader, agent_id, "commit", (), reason)
        return reason, (), ()
    return None, decision.to_note, decision.viewed


def judged_agent(settings: HookSettings, lock_dir: str) -> JudgedAgent:
    """The agent id and repository this hook judges for: given explicitly, else the session
    of the agent CLI process this hook runs under."""
    if settings.agent_id:
        repo = settings.repo or os.getcwd()
        return JudgedAgent(settings.agent_id, repo)
    return session_agent(lock_dir, ancestors())


def session_agent(
    lock_dir: str, chain: Iterable[ProcessRef], registry: SessionRegistry | None = None
) -> JudgedAgent:
    """The session anchored at the nearest process of `chain` (a process and its ancestors)
    that anchors one in `lock_dir`; NoSessionError when none does. A long-lived `registry`
    (of `lock_dir`) answers from the records it read before while their files are unchanged."""
    if registry is None:
        record = SessionRegistry(lock_dir).find_for(chain)
    else:
        record = registry.find_for(chain, again=True)
    if record is None:
        raise NoSessionError(
            "No lockyard session runs for this agent CLI: its MCP server (`lockyard serve`) is "
            f"not running, or uses another lock directory than {lock_dir}. Check the CLI's MCP "
            "servers (lockyard must be connected), then retry."
        )
    return JudgedAgent(record.agent_id, record.repo)
