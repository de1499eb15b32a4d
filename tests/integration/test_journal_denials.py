"""Every guard journals the writes it denies (guard, file, reason), from an orchestrator's
hooks (on both backends) and from an agent CLI's short hook process alike, and never lets the
journal decide."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lockyard.infra.hooks.shell_guard.hook import make_shell_guard_hook
from lockyard.infra.hooks.write_guard.hook import make_write_guard_hook
from lockyard.infra.lockstore import (
    FileJournal,
    JournalQuery,
    LockBackend,
    LockStore,
    open_journal,
)

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "src" / "a.py").write_text("a\n")
    return root


def denials(where: Path | LockBackend) -> list[tuple[str, str, str, str]]:
    journal = FileJournal(where) if isinstance(where, Path) else open_journal(where)
    try:
        records = list(journal.records(JournalQuery.of(kinds=["denied"])))
    finally:
        journal.close()
    return [(r.agent, r.guard or "", r.file, r.reason or "") for r in records]


def tool_call(tool: str, tool_input: dict[str, Any], cwd: Path) -> dict[str, Any]:
    return {"tool_name": tool, "tool_input": tool_input, "cwd": str(cwd)}


@pytest.mark.anyio
async def test_an_orchestrators_guards_journal_what_they_deny(
    backend_store: LockBackend, repo: Path
) -> None:
    assert backend_store.try_lock("src/a.py", "bob")
    write = make_write_guard_hook(backend_store, "alice")
    shell = make_shell_guard_hook(backend_store, "alice")
    denied = await write(tool_call("Write", {"file_path": "src/a.py"}, repo), None, {})  # type: ignore[arg-type]
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    await shell(tool_call("Bash", {"command": "echo x > src/b.py"}, repo), None, {})  # type: ignore[arg-type]
    allowed = await write(tool_call("Write", {"file_path": "/tmp/scratch"}, repo), None, {})  # type: ignore[arg-type]
    assert allowed == {}
    found = denials(backend_store)
    assert [(agent, guard, file) for agent, guard, file, _ in found] == [
        ("alice", "write", "src/a.py"),
        ("alice", "shell", "src/b.py"),
    ]
    assert "bob" in found[0][3]  # the reason the agent was given, as given
    journal = open_journal(backend_store)
    try:
        record = journal.latest(JournalQuery.of(kinds=["denied"]), 1)[0]
    finally:
        journal.close()
    assert record.session
    assert record.pid > 0
    assert record.namespace == backend_store.namespace


def test_an_agent_cli_hook_process_journals_its_denial(repo: Path, lock_dir: Path) -> None:
    LockStore(repo, lock_dir)  # the lock directory exists, as a session's server makes it
    done = subprocess.run(
        [LOCKYARD, "hook", "pre-tool-use", "--cli", "claude-code", "--agent-id", "alice",
         "--repo", str(repo), "--lock-dir", str(lock_dir)],
        input=json.dumps(tool_call("Edit", {"file_path": "src/a.py"}, repo)).encode(),
        capture_output=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0
    reason = json.loads(done.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert denials(lock_dir) == [("alice", "write", "src/a.py", reason)]
