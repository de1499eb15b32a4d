"""`lockyard hook pre-tool-use`: every answer on a real lock directory, bad input included.

Most calls run the command's `main` in this process (stdin replaced); a few go through the
installed entry point to check what only a real process shows (start-up imports)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lockyard.cli import hook
from lockyard.infra.agentcli.formats import FORMATS
from lockyard.infra.agentcli.guard_address import MAX_PAYLOAD_BYTES
from lockyard.infra.lockstore import LockStore
from lockyard.infra.session.process_tree import ProcessRef, ancestors, process_ref
from lockyard.infra.session.registry import SessionRegistry, new_record

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.py").write_text("a\n")
    return root


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> LockStore:
    return LockStore(repo, lock_dir)


def run_hook(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stdin: bytes,
    *args: str,
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = hook.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def claude_reason(out: str) -> str | None:
    if not out.strip():
        return None
    specific = json.loads(out)["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny"
    return str(specific["permissionDecisionReason"])


def payload(tool: str, tool_input: dict[str, Any], cwd: Path) -> bytes:
    return json.dumps({"tool_name": tool, "tool_input": tool_input, "cwd": str(cwd)}).encode()


@pytest.fixture
def as_alice(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    repo: Path,
    lock_dir: Path,
) -> Any:
    def call(stdin: bytes, cli: str = "claude-code") -> tuple[int, str]:
        code, out, _err = run_hook(
            monkeypatch, capsys, stdin, "pre-tool-use", "--cli", cli,
            "--agent-id", "alice", "--repo", str(repo), f"--lock-dir={lock_dir}",
        )  # fmt: skip
        return code, out

    return call


def test_a_write_to_a_file_the_agent_holds_is_allowed_silently(
    as_alice: Any, store: LockStore, repo: Path
) -> None:
    assert store.try_lock("a.py", "alice")
    assert as_alice(payload("Write", {"file_path": "a.py"}, repo)) == (0, "")


def test_a_write_to_another_agents_file_is_denied_naming_the_holder(
    as_alice: Any, store: LockStore, repo: Path
) -> None:
    assert store.try_lock("a.py", "bob")
    code, out = as_alice(payload("Edit", {"file_path": str(repo / "a.py")}, repo))
    assert code == 0
    reason = claude_reason(out)
    assert reason is not None
    assert reason.startswith("a.py is locked by agent bob")


def test_each_cli_gets_its_deny_in_its_own_format(as_alice: Any, repo: Path) -> None:
    _, out = as_alice(payload("write_file", {"file_path": "a.py"}, repo), "gemini")
    answer = json.loads(out)
    assert answer["decision"] == "deny"
    assert "a.py is not locked by you. Call mcp_lockyard_lock_acquire" in answer["reason"]
    patch = "*** Begin Patch\n*** Update File: a.py\n@@\n-a\n+b\n*** End Patch\n"
    _, out = as_alice(payload("apply_patch", {"command": patch}, repo), "codex")
    assert "Call mcp__lockyard__lock_acquire" in str(claude_reason(out))
    _, out = as_alice(payload("edit", {"filePath": "a.py"}, repo), "opencode")
    assert "Call lockyard_lock_acquire" in json.loads(out)["reason"]


def test_writes_outside_the_repository_are_not_lockyards_business(
    as_alice: Any, repo: Path, tmp_path: Path
) -> None:
    assert as_alice(payload("Write", {"file_path": str(tmp_path / "scratch.txt")}, repo)) == (0, "")


def test_a_write_to_a_directory_is_denied_with_the_stores_reason(as_alice: Any, repo: Path) -> None:
    _, out = as_alice(payload("Write", {"file_path": "pkg"}, repo))
    assert "write it with a trailing slash" in str(claude_reason(out))


@pytest.mark.parametrize(
    ("stdin", "expected"),
    [
        (b"", "the hook input is empty"),
        (b"   \n", "the hook input is empty"),
        (b"{not json", "the hook input is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "the hook input is not JSON"),
        (b'"Write"', "JSON str, not an object"),
        (b'{"tool_input": {"file_path": "a.py"}}', "no 'tool_name'"),
        (b'{"tool_name": "Write"}', "no 'tool_input' object"),
        (b'{"tool_name": "Write", "tool_input": {}}', "names no file"),
        (b'{"tool_name": "Bash", "tool_input": {}}', "no command string"),
        (b"\xff\xfe garbage", "the hook input is not JSON"),
    ],
    # Named: the deep nesting's own id would be 200,000 characters, and pytest puts the id in
    # every child's environment (PYTEST_CURRENT_TEST), where git refuses it (E2BIG).
    ids=[
        "empty",
        "blank",
        "not-json",
        "deep-nesting",
        "a-string",
        "no-tool-name",
        "no-tool-input",
        "no-file",
        "no-command",
        "not-utf8",
    ],
)
def test_malformed_payloads_fail_closed_with_a_clear_reason(
    as_alice: Any, stdin: bytes, expected: str
) -> None:
    code, out = as_alice(stdin)
    assert code == 0
    reason = str(claude_reason(out))
    assert expected in reason
    assert "so it is refused" in reason


def test_a_huge_payload_is_refused_unread(as_alice: Any) -> None:
    code, out = as_alice(b" " * (MAX_PAYLOAD_BYTES + 1))
    assert code == 0
    assert "too large for lockyard's guard" in str(claude_reason(out))


def test_a_tool_that_writes_nothing_is_allowed(as_alice: Any, repo: Path) -> None:
    assert as_alice(payload("Read", {"file_path": "a.py"}, repo)) == (0, "")


def test_a_git_commit_of_an_unlocked_file_is_denied_and_of_a_held_one_allowed(
    as_alice: Any, store: LockStore, repo: Path
) -> None:
    subprocess.run(["git", "-C", str(repo), "add", "a.py"], check=True)
    command = {"command": "git commit -m wip"}
    _, out = as_alice(payload("Bash", command, repo))
    assert "This git commit would include files you have not locked" in str(claude_reason(out))
    assert store.try_lock("a.py", "alice")
    assert as_alice(payload("Bash", command, repo)) == (0, "")
    assert as_alice(payload("Bash", {"command": "ls -la"}, repo)) == (0, "")


def test_without_a_session_writes_are_denied_with_what_to_check(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], repo: Path, lock_dir: Path
) -> None:
    monkeypatch.delenv("LOCKYARD_AGENT_ID", raising=False)
    code, out, _ = run_hook(
        monkeypatch, capsys, payload("Write", {"file_path": "a.py"}, repo),
        "pre-tool-use", "--lock-dir", str(lock_dir),
    )  # fmt: skip
    assert code == 0
    reason = str(claude_reason(out))
    assert "No lockyard session runs for this agent CLI" in reason
    assert str(lock_dir) in reason


def test_a_hook_finds_the_session_of_its_nearest_ancestor_that_anchors_one(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    repo: Path,
    lock_dir: Path,
    store: LockStore,
) -> None:
    chain = list(ancestors())
    me = process_ref(os.getpid())
    assert me is not None
    registry = SessionRegistry(lock_dir)
    # A session anchored further up (a shell both CLIs were started from) and one at our
    # parent: the nearest wins.
    registry.register(new_record("far-session", "codex", chain[-1], str(repo)))
    registry.register(new_record("near-session", "claude-code", chain[0], str(repo)))
    registry.register(new_record("stranger", "gemini", ProcessRef(me.pid, me.start_time + 1), "/"))
    assert store.try_lock("a.py", "near-session")
    code, out, _ = run_hook(
        monkeypatch, capsys, payload("Write", {"file_path": "a.py"}, repo),
        "pre-tool-use", "--lock-dir", str(lock_dir),
    )  # fmt: skip
    assert (code, out) == (0, "")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "usage: lockyard hook"),
        (["post-tool-use"], "unknown hook event 'post-tool-use'"),
        (["pre-tool-use", "--cli", "vim"], "unknown --cli 'vim'"),
        (["pre-tool-use", "--bogus", "1"], "unknown option '--bogus'"),
        (["pre-tool-use", "--cli"], "--cli needs a value"),
    ],
)
def test_usage_errors_exit_2_which_every_cli_reads_as_blocked(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    code, out, err = run_hook(monkeypatch, capsys, b"{}", *args)
    assert code == 2
    assert message in out + err


def test_help_exits_0(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_hook(monkeypatch, capsys, b"", "--help")
    assert (code, out.startswith("usage: lockyard hook")) == (0, True)
    named = out.partition("NAME: ")[2].partition(". ")[0].replace("\n", " ").split(", ")
    assert sorted(named) == sorted(FORMATS)  # every CLI the hook judges for, no other


def test_the_hook_process_loads_neither_pydantic_mcp_typer_nor_the_sdk(
    repo: Path, lock_dir: Path, store: LockStore
) -> None:
    assert store.try_lock("a.py", "alice")
    probe = (
        "import sys\n"
        "sys.argv = ['lockyard', 'hook', 'pre-tool-use', '--agent-id', 'alice',"
        f" '--repo', {str(repo)!r}, '--lock-dir', {str(lock_dir)!r}]\n"
        "from lockyard.cli.entry import main\n"
        "try:\n    main()\nexcept SystemExit as done:\n    code = done.code\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'pydantic', 'mcp', 'claude_agent_sdk', 'typer', 'rich', 'anyio'})\n"
        "sys.stderr.write(repr((code, heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input=payload("Write", {"file_path": "a.py"}, repo),
        capture_output=True,
        check=True,
    )
    assert done.stdout == b""
    assert done.stderr.decode().endswith("(0, [])")


def test_the_installed_command_answers_through_the_entry_point(repo: Path, lock_dir: Path) -> None:
    done = subprocess.run(
        [LOCKYARD, "hook", "pre-tool-use", "--cli", "gemini", "--agent-id", "alice",
         "--repo", str(repo), "--lock-dir", str(lock_dir)],
        input=payload("replace", {"file_path": "a.py"}, repo),
        capture_output=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0
    assert json.loads(done.stdout)["decision"] == "deny"
    listed = subprocess.run([LOCKYARD, "--help"], capture_output=True, text=True, check=True)
    assert "hook" in listed.stdout


def test_a_shell_command_that_writes_an_unlocked_file_is_denied_by_the_shell_guard(
    as_alice: Any, store: LockStore, repo: Path
) -> None:
    _, out = as_alice(payload("Bash", {"command": "sed -i s/a/b/ a.py"}, repo))
    reason = str(claude_reason(out))
    assert "This command writes files you have not locked: a.py" in reason
    assert "mcp__lockyard__lock_acquire" in reason
    _, out = as_alice(payload("run_shell_command", {"command": "echo x > a.py"}, repo), "gemini")
    assert "Call mcp_lockyard_lock_acquire" in json.loads(out)["reason"]
    assert store.try_lock("a.py", "alice")
    assert as_alice(payload("Bash", {"command": "sed -i s/a/b/ a.py"}, repo)) == (0, "")
