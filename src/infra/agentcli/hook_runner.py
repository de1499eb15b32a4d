"""`lockyard hook pre-tool-use`: judge one tool call of an agent CLI session.

A write tool's call is judged by the write guard; a shell tool's by the shell guard (what
files the command writes, parsed) and then the `git commit` guard (what a commit would take).

The CLI runs this once per matched tool call, with the call as JSON on stdin. The answer
follows that CLI's protocol (`formats.py`). Whatever goes wrong (an empty, huge or damaged
payload, no session, an unreadable lock directory) ends in a clear deny, never in a crash
or a silent allow: a guard that cannot judge a write refuses it.

Start-up is the cost that matters (one process per tool call): everything imported here is
standard library plus lockyard's light modules (no pydantic, mcp or SDK).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Final

from ..hooks.commit_guard.decide import commit_denial
from ..hooks.guard_common import GuardStore, journal_denial
from ..hooks.write_guard.decide import write_denial
from ..lockstore import default_lock_dir
from ..session.registry import SessionRegistry
from .formats import CliFormat, HookAnswer, PayloadError, ToolCall
from .lockdir_reader import LockDirReader

logger = logging.getLogger(__name__)

MAX_PAYLOAD_BYTES: Final = 32 * 1024 * 1024
"""Larger hook inputs are refused unread (a write that large should be split anyway)."""


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
    """The answer to one PreToolUse-style hook call. Never raises."""
    try:
        return _judge(fmt, raw, settings)
    except Exception as exc:  # the guard must answer, and a guard that cannot judge refuses
        logger.exception("lockyard hook failed")
        return fmt.deny(
            f"lockyard's guard failed while checking this call ({type(exc).__name__}: {exc}), "
            "so it is refused. Retry it; if it fails again, ask the operator to run "
            "`lockyard status`."
        )


def _judge(fmt: CliFormat, raw: bytes, settings: HookSettings) -> HookAnswer:
    if len(raw) > MAX_PAYLOAD_BYTES:
        return fmt.deny(
            f"This tool call is larger than {MAX_PAYLOAD_BYTES // (1024 * 1024)} MiB, too large "
            "for lockyard's guard to check, so it is refused: write the file in smaller parts."
        )
    try:
        call = fmt.parse(_load(raw))
    except PayloadError as exc:
        return fmt.deny(
            f"lockyard's guard could not read this tool call ({exc}), so it is refused. "
            f"Retry the call; if it is refused again, {fmt.display}'s hook input format may "
            "have changed: tell the operator."
        )
    if call.kind == "other":
        return fmt.allow()
    if settings.ipc:  # a sandbox: no lock directory, the host answers through the folder
        from .ipc_guard_store import judge_in_sandbox

        return judge_in_sandbox(fmt, call, settings.ipc, settings.repo, _denial)
    lock_dir = settings.lock_dir or str(default_lock_dir())
    try:
        agent = judged_agent(settings, lock_dir)
    except NoSessionError as exc:
        return fmt.deny(f"{exc} Until then lockyard refuses edits and commits in this session.")
    reader = LockDirReader(agent.repo, lock_dir)
    try:
        reason = _denial(fmt, call, reader, agent.agent_id)
    finally:
        reader.close()
    return fmt.allow() if reason is None else fmt.deny(reason)


def _load(raw: bytes) -> object:
    if not raw.strip():
        raise PayloadError("the hook input is empty")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise PayloadError(f"the hook input is not JSON: {str(exc)[:120]}") from None


def _denial(fmt: CliFormat, call: ToolCall, reader: GuardStore, agent_id: str) -> str | None:
    """Why the call is refused (journalled: the guard, the files, the reason), or None."""
    if call.kind == "write":
        for path in call.paths:
            reason = write_denial(reader, agent_id, path, call.cwd, fmt.acquire_tool)
            if reason is not None:
                journal_denial(reader, agent_id, "write", [path], reason)
                return reason
        return None
    assert call.command is not None
    # The shell guard parses the command (tree-sitter): loaded for shell calls only, so a
    # write's hook does not pay for it.
    from ..hooks.shell_guard.decide import decide_shell_command

    decision = decide_shell_command(
        call.command, call.cwd, agent_id, reader, acquire_tool=fmt.acquire_tool
    )
    if not decision.allowed:
        reason = decision.reason or "denied by the shell guard"
        journal_denial(reader, agent_id, "shell", [k for k, _ in decision.unlocked], reason)
        return reason
    reason = commit_denial(reader, agent_id, call.command, call.cwd, fmt.acquire_tool)
    if reason is not None:
        journal_denial(reader, agent_id, "commit", (), reason)
    return reason


def judged_agent(settings: HookSettings, lock_dir: str) -> JudgedAgent:
    """The agent id and repository this hook judges for: given explicitly, else the session
    of the agent CLI process this hook runs under."""
    if settings.agent_id:
        repo = settings.repo or os.getcwd()
        return JudgedAgent(settings.agent_id, repo)
    record = SessionRegistry(lock_dir).find_for_this_process()
    if record is None:
        raise NoSessionError(
            "No lockyard session runs for this agent CLI: its MCP server (`lockyard serve`) is "
            f"not running, or uses another lock directory than {lock_dir}. Check the CLI's MCP "
            "servers (lockyard must be connected), then retry."
        )
    return JudgedAgent(record.agent_id, record.repo)
