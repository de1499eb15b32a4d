"""No write from a stale read: `lockyard hook pre-tool-use` as two agents on one real checkout.

Alice reads a file, Bob locks it, changes it and releases it, Alice locks it and writes: her
write would erase Bob's change, so it is refused, naming Bob, until she reads the file again.
The hook runs in this process (stdin replaced) on a real lock directory and a real git
checkout, whose `.git/lockyard/seen/` keeps what each agent saw.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lockyard.cli import hook
from lockyard.infra.hooks.shell_guard.decide import decide_shell_command
from lockyard.infra.hooks.write_guard.decide import write_denial
from lockyard.infra.lockstore import LockStore
from lockyard.infra.tools.lock_tools import LockTools

Hook = Callable[..., str | None]
"""(agent, tool, tool_input, cli="claude-code") -> the deny reason, or None when allowed."""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "app.py").write_text("def main():\n    return 1\n")
    return root


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> LockStore:
    return LockStore(repo, lock_dir)


@pytest.fixture
def call(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], repo: Path, lock_dir: Path
) -> Hook:
    def run(
        agent: str, tool: str, tool_input: dict[str, Any], cli: str = "claude-code"
    ) -> str | None:
        stdin = json.dumps({"tool_name": tool, "tool_input": tool_input, "cwd": str(repo)})
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        code = hook.main(
            ["pre-tool-use", "--cli", cli, "--agent-id", agent, "--repo", str(repo),
             f"--lock-dir={lock_dir}"]
        )  # fmt: skip
        out = capsys.readouterr().out
        assert code == 0
        if not out.strip():
            return None
        answer = json.loads(out)
        if "hookSpecificOutput" in answer:
            return str(answer["hookSpecificOutput"]["permissionDecisionReason"])
        assert answer["decision"] == "deny"
        return str(answer["reason"])

    return run


def bob_changes(call: Hook, store: LockStore, repo: Path, text: str) -> None:
    """Bob locks app.py, writes it (his write allowed by the guard) and releases it."""
    assert store.try_lock("app.py", "bob")
    assert call("bob", "Write", {"file_path": "app.py", "content": text}) is None
    (repo / "app.py").write_text(text)
    assert store.release("app.py", "bob")


def test_a_write_from_a_stale_read_is_refused_naming_who_changed_it_until_a_reread(
    call: Hook, store: LockStore, repo: Path
) -> None:
    assert call("alice", "Read", {"file_path": str(repo / "app.py")}) is None
    bob_changes(call, store, repo, "def main():\n    return 2\n")
    assert store.try_lock("app.py", "alice")
    reason = call("alice", "Write", {"file_path": "app.py", "content": "x"})
    assert reason is not None
    assert reason.startswith("app.py changed since you read it at ")
    assert "agent bob wrote it at " in reason
    assert "Read app.py again, then make your edit on what it holds now" in reason
    assert "You keep your lock" in reason
    assert (repo / "app.py").read_text().endswith("return 2\n")  # nothing lost
    assert call("alice", "Read", {"file_path": "app.py"}) is None
    assert call("alice", "Write", {"file_path": "app.py", "content": "x"}) is None


def test_a_file_the_agent_never_read_may_be_created_or_overwritten(
    call: Hook, store: LockStore, repo: Path
) -> None:
    bob_changes(call, store, repo, "bob's\n")
    assert store.try_lock("app.py", "alice")
    assert store.try_lock("new.py", "alice")
    assert call("alice", "Write", {"file_path": "app.py", "content": "x"}) is None
    assert call("alice", "Write", {"file_path": "new.py", "content": "x"}) is None


def test_an_agents_own_edits_never_count_as_someone_elses_change(
    call: Hook, store: LockStore, repo: Path
) -> None:
    assert store.try_lock("app.py", "alice")
    assert call("alice", "Read", {"file_path": "app.py"}) is None
    for n in range(4):
        assert call("alice", "Edit", {"file_path": "app.py"}) is None
        (repo / "app.py").write_text(f"edit {n}\n")


def test_an_agent_that_only_wrote_a_file_is_refused_once_another_agent_changed_it(
    call: Hook, store: LockStore, repo: Path
) -> None:
    assert store.try_lock("app.py", "alice")
    assert call("alice", "Write", {"file_path": "app.py", "content": "alice's"}) is None
    (repo / "app.py").write_text("alice's\n")
    assert store.release("app.py", "alice")
    bob_changes(call, store, repo, "bob's\n")
    assert store.try_lock("app.py", "alice")
    reason = call("alice", "Write", {"file_path": "app.py", "content": "alice's again"})
    assert reason is not None
    assert reason.startswith("app.py changed since you wrote it at ")
    assert "agent bob wrote it at " in reason


def test_a_change_no_lockyard_write_made_is_refused_saying_so(
    call: Hook, store: LockStore, repo: Path
) -> None:
    assert call("alice", "Read", {"file_path": "app.py"}) is None
    (repo / "app.py").write_text("a person's edit, same size!\n"[:25])
    assert store.try_lock("app.py", "alice")
    reason = call("alice", "Edit", {"file_path": "app.py"})
    assert reason is not None
    assert "by no write lockyard allowed (a person or a tool outside lockyard)" in reason


def test_a_deleted_file_is_refused_asking_whether_it_was_removed_on_purpose(
    call: Hook, store: LockStore, repo: Path
) -> None:
    assert call("alice", "Read", {"file_path": "app.py"}) is None
    (repo / "app.py").unlink()
    assert store.try_lock("app.py", "alice")
    reason = call("alice", "Write", {"file_path": "app.py", "content": "x"})
    assert reason is not None
    assert reason.startswith("app.py deleted since you read it")
    assert "was it removed on purpose?" in reason


def test_a_shell_write_from_a_stale_shell_read_is_refused(
    call: Hook, store: LockStore, repo: Path
) -> None:
    assert call("alice", "Bash", {"command": "cat app.py | head -5"}) is None
    bob_changes(call, store, repo, "bob's\n")
    assert store.try_lock("app.py", "alice")
    reason = call("alice", "Bash", {"command": "sed -i s/1/3/ app.py"})
    assert reason is not None
    assert reason.startswith("app.py changed since you read it at ")
    assert call("alice", "Bash", {"command": "sed -n 1,40p app.py"}) is None
    assert call("alice", "Bash", {"command": "sed -i s/1/3/ app.py"}) is None


def test_deciding_writes_nothing_and_only_an_allowed_call_is_noted_in_the_book(
    call: Hook, store: LockStore, repo: Path
) -> None:
    book = repo / ".git" / "lockyard" / "seen"

    def entries() -> dict[str, bytes]:
        return {str(p.relative_to(book)): p.read_bytes() for p in book.rglob("*") if p.is_file()}

    assert call("alice", "Read", {"file_path": "app.py"}) is None
    assert store.try_lock("app.py", "alice")
    read = entries()
    assert read
    # The decisions (what the HTTP guard, the SDK hooks and the command hook run) only read.
    assert write_denial(store, "alice", "app.py", str(repo), "lock_acquire") is None
    assert decide_shell_command("sed -i s/1/2/ app.py", str(repo), "alice", store).allowed
    assert entries() == read
    # A refused call notes nothing: neither bob's read in it nor his write.
    assert call("bob", "Bash", {"command": "cat app.py && sed -i s/1/2/ app.py"}) is not None
    assert entries() == read
    # An allowed call's hook notes its write after the decision.
    assert call("alice", "Edit", {"file_path": "app.py"}) is None
    assert entries() != read


def test_every_cli_s_read_tool_is_noted(call: Hook, store: LockStore, repo: Path) -> None:
    reads = {
        "gemini": ("read_file", {"absolute_path": str(repo / "app.py")}),
        "opencode": ("read", {"filePath": str(repo / "app.py")}),
    }
    writes = {"gemini": ("write_file", "file_path"), "opencode": ("write", "filePath")}
    for cli, (tool, tool_input) in reads.items():
        agent = f"alice-{cli}"
        assert call(agent, tool, tool_input, cli) is None
        bob_changes(call, store, repo, f"bob's for {cli}\n")
        assert store.try_lock("app.py", agent)
        write_tool, field = writes[cli]
        reason = call(agent, write_tool, {field: "app.py", "content": "x"}, cli)
        assert reason is not None, cli
        assert "agent bob wrote it" in reason, cli
        assert store.release("app.py", agent)


def test_a_commit_of_changes_the_agent_has_not_seen_is_refused(
    call: Hook, store: LockStore, repo: Path
) -> None:
    assert call("alice", "Read", {"file_path": "app.py"}) is None
    bob_changes(call, store, repo, "bob's\n")
    subprocess.run(["git", "-C", str(repo), "add", "app.py"], check=True)
    assert store.try_lock("app.py", "alice")
    reason = call("alice", "Bash", {"command": "git commit -m mine"})
    assert reason is not None
    assert reason.startswith("This git commit would record changes you have not seen: app.py")
    assert "git diff -- app.py" in reason


@pytest.mark.anyio
async def test_lock_acquire_says_per_file_whether_it_changed_since_the_agent_read_it(
    call: Hook, store: LockStore, repo: Path
) -> None:
    (repo / "unread.py").write_text("")
    (repo / "same.py").write_text("")
    assert call("alice", "Read", {"file_path": "app.py"}) is None
    assert call("alice", "Read", {"file_path": "same.py"}) is None
    bob_changes(call, store, repo, "bob's\n")
    outcome = await LockTools(store, "alice").acquire(
        {"filepaths": ["app.py", "same.py", "unread.py"]}
    )
    results = {item["filepath"]: item for item in json.loads(outcome.text)["results"]}
    assert results["same.py"]["changed_since_read"] is False
    assert "changed_since_read" not in results["unread.py"]  # never read: nothing to say
    assert results["app.py"]["changed_since_read"] is True
    change = results["app.py"]["change"]
    assert change.startswith("app.py changed since you read it at ")
    assert "agent bob wrote it at" in change
    assert change.endswith("Read it again before you edit it.")
