"""The write guard inside a sandbox: `lockyard hook pre-tool-use --ipc DIR` asks a real
`lockyard ipc-host` process through the sandbox's IPC folder, and the guards decide as they
do everywhere else. The sandbox has its own checkout; the host has its own."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ipc_support import (
    LOCKYARD,
    HostProcess,
    answer_now,
    call_body,
    child_env,
    heartbeat,
    host_process,
    result_of,
    sandbox,
    write_request,
)

from lockyard.infra.lockstore import JournalQuery, LockStore, open_journal
from polling_support import wait_until


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The host's checkout."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for name in ("src/a.py", "src/b.py"):
        (root / name).write_text(f"# {name}\n")
    return root


@pytest.fixture
def workspace(tmp_path: Path, repo: Path) -> Path:
    """The sandbox's own checkout of the same repository."""
    copy = tmp_path / "workspace"
    shutil.copytree(repo, copy)
    return copy


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "ipc"
    (path / "alice").mkdir(parents=True)
    (path / "bob").mkdir()
    return path


@pytest.fixture
def host(root: Path, repo: Path, lock_dir: Path) -> Iterator[HostProcess]:
    with host_process(root, repo, "--lock-dir", str(lock_dir), "--stale-after", "1",
                      serving=("alice", "bob")) as running:  # fmt: skip
        yield running


def write_payload(path: str, cwd: Path) -> bytes:
    return json.dumps(
        {"hook_event_name": "PreToolUse", "tool_name": "Write", "cwd": str(cwd),
         "tool_input": {"file_path": path, "content": "x = 1\n"}}
    ).encode()  # fmt: skip


def guard(folder: Path, workspace: Path, payload: bytes, *options: str) -> dict[str, Any] | None:
    """The hook's decision as Claude Code reads it: None (allowed) or the deny output."""
    done = subprocess.run(
        [LOCKYARD, "hook", "pre-tool-use", "--cli", "claude-code", "--ipc", str(folder),
         *options],
        input=payload, capture_output=True, cwd=workspace, env=child_env(), timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    if not done.stdout.strip():
        return None
    decision: dict[str, Any] = json.loads(done.stdout)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny", decision
    return decision


def lock(folder: Path, request_id: str, *names: str) -> dict[str, Any]:
    arguments = {"filepaths": list(names), "timeout_seconds": 0}
    write_request(folder, request_id, call_body(request_id, "lock_acquire", arguments))
    return result_of(answer_now(folder, request_id))


def test_the_sandbox_hook_allows_what_the_folders_agent_holds_and_denies_the_rest(
    root: Path, workspace: Path, host: HostProcess
) -> None:
    alice, bob = sandbox(root, "alice"), sandbox(root, "bob")
    with heartbeat(alice), heartbeat(bob):
        assert lock(alice, "alice-takes-a", "src/a.py")["all_acquired"] is True
        mine = guard(alice, workspace, write_payload(str(workspace / "src/a.py"), workspace))
        relative = guard(alice, workspace / "src", write_payload("a.py", workspace / "src"))
        free = guard(alice, workspace, write_payload("src/b.py", workspace))
        theirs = guard(bob, workspace, write_payload("src/a.py", workspace))
        outside = guard(alice, workspace, write_payload("/tmp/elsewhere.txt", workspace))
    assert mine is None
    assert relative is None
    assert free is not None
    assert "src/b.py is not locked by you" in free["permissionDecisionReason"]
    assert "mcp__lockyard__lock_acquire" in free["permissionDecisionReason"]
    assert theirs is not None
    assert "src/a.py is locked by agent alice" in theirs["permissionDecisionReason"]
    assert outside is None, "files outside the checkout are not the guard's"
    assert host.running(), host.log()


def test_the_agent_is_the_folders_whatever_the_hook_is_told(
    root: Path, workspace: Path, host: HostProcess
) -> None:
    alice, bob = sandbox(root, "alice"), sandbox(root, "bob")
    with heartbeat(alice), heartbeat(bob):
        assert lock(alice, "alice-takes-a", "src/a.py")["all_acquired"] is True
        payload = json.loads(write_payload("src/a.py", workspace))
        payload["agent_id"] = payload["session_id"] = "alice"  # bob's hook claims to be alice
        claimed = guard(bob, workspace, json.dumps(payload).encode())
    assert claimed is not None
    assert "locked by agent alice" in claimed["permissionDecisionReason"]


def test_a_shell_command_is_judged_in_the_sandbox_with_the_hosts_answers(
    root: Path, workspace: Path, host: HostProcess
) -> None:
    alice = sandbox(root, "alice")
    with heartbeat(alice):
        assert lock(alice, "alice-takes-a", "src/a.py")["all_acquired"] is True

        def bash(command: str) -> dict[str, Any] | None:
            payload = json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash",
                                  "cwd": str(workspace),
                                  "tool_input": {"command": command}}).encode()  # fmt: skip
            return guard(alice, workspace, payload)

        allowed = bash("echo x >> src/a.py")
        denied = bash("echo x >> src/a.py && sed -i s/a/b/ src/b.py")
    assert allowed is None
    assert denied is not None
    assert "src/b.py" in denied["permissionDecisionReason"]


def test_the_sandbox_hook_honours_glob_locks_as_the_direct_store_does(
    root: Path, workspace: Path, host: HostProcess
) -> None:
    alice, bob = sandbox(root, "alice"), sandbox(root, "bob")

    def bash(folder: Path, command: str) -> dict[str, Any] | None:
        payload = json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash",
                              "cwd": str(workspace),
                              "tool_input": {"command": command}}).encode()  # fmt: skip
        return guard(folder, workspace, payload)

    with heartbeat(alice), heartbeat(bob):
        assert lock(alice, "alice-takes-a-glob", "src/**/*.py")["all_acquired"] is True
        mine = guard(alice, workspace, write_payload("src/a.py", workspace))
        created = bash(alice, "mkdir -p src/new && echo x > src/new/later.py")
        unmatched = guard(alice, workspace, write_payload("src/notes.md", workspace))
        theirs = guard(bob, workspace, write_payload("src/new/later.py", workspace))
        shell = bash(bob, "rm src/b.py")
    assert mine is None
    assert created is None, "a file created later under the glob is covered"
    assert unmatched is not None
    assert "src/notes.md is not locked by you" in unmatched["permissionDecisionReason"]
    assert theirs is not None
    assert (
        "matches the glob src/**/*.py, which is locked by agent alice"
        in (theirs["permissionDecisionReason"])
    )
    assert shell is not None
    assert (
        "src/b.py (matching the glob src/**/*.py, locked by alice)"
        in (shell["permissionDecisionReason"])
    )


def test_without_a_host_the_sandbox_hook_refuses_and_says_why(root: Path, workspace: Path) -> None:
    folder = sandbox(root, "alice")
    denied = guard(folder, workspace, write_payload("src/a.py", workspace))
    assert denied is not None
    reason = denied["permissionDecisionReason"]
    assert "no lockyard ipc-host serves the IPC folder" in reason
    assert "refused" in reason
    read_only = guard(
        folder,
        workspace,
        json.dumps(
            {
                "hook_event_name": "PreToolUse",
                "tool_name": "Read",
                "cwd": str(workspace),
                "tool_input": {"file_path": "src/a.py"},
            }
        ).encode(),
    )
    assert read_only is None, "a read is never refused, even with no host to note it"


def test_a_sandbox_whose_locks_were_reclaimed_is_refused_its_next_write(
    root: Path, workspace: Path, host: HostProcess, repo: Path, lock_dir: Path
) -> None:
    alice = sandbox(root, "alice")
    with heartbeat(alice):
        assert lock(alice, "alice-takes-a", "src/a.py")["all_acquired"] is True
        assert guard(alice, workspace, write_payload("src/a.py", workspace)) is None
    # Silent (paused): the host reclaims its locks after 1 s.
    with LockStore(repo, lock_dir) as store:
        wait_until(lambda: store.holder("src/a.py") is None, host.log)
    denied = guard(alice, workspace, write_payload("src/a.py", workspace))
    assert denied is not None
    assert "src/a.py is not locked by you" in denied["permissionDecisionReason"]


def test_usage_errors_of_the_sandbox_hook(root: Path, workspace: Path) -> None:
    done = subprocess.run(
        [LOCKYARD, "hook", "pre-tool-use", "--ipc", str(root / "alice"), "--agent-id", "x"],
        input=b"{}", capture_output=True, env=child_env(), timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--ipc takes the agent from the sandbox's folder" in done.stderr.decode()


def test_a_write_the_sandbox_hook_refuses_is_in_the_hosts_journal_as_the_folders_agent(
    root: Path, repo: Path, lock_dir: Path, workspace: Path, host: HostProcess
) -> None:
    alice, bob = sandbox(root, "alice"), sandbox(root, "bob")
    with heartbeat(alice), heartbeat(bob):
        assert lock(alice, "alice-takes-a", "src/a.py")["all_acquired"] is True
        payload = json.loads(write_payload("src/a.py", workspace))
        payload["session_id"] = "alice"  # bob's payload cannot make the record alice's
        refused = guard(bob, workspace, json.dumps(payload).encode())
    assert refused is not None
    store = LockStore(repo, lock_dir=lock_dir)
    journal = open_journal(store)
    try:
        denied = journal.latest(JournalQuery.of(kinds=["denied"]))
    finally:
        journal.close()
    assert [(r.agent, r.file, r.guard) for r in denied] == [("bob", "src/a.py", "write")]
    assert denied[0].reason == refused["permissionDecisionReason"]
    assert host.running(), host.log()
