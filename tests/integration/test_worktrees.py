"""One lock per file wherever the repository is checked out: real `git worktree add`
checkouts, and a copied checkout at another path standing in for a container.

Agents in different checkouts contend for one lock, are granted in arrival order, deadlock
across checkouts (found by the in-process and the cross-process monitor, and resolved), and
see each other's locks in their write and commit guards; `lockyard serve` in two worktrees
shares locks, and `lockyard status` shows the namespace and each holder's checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from lockyard.domain.monitor import DeadlockMonitor
from lockyard.infra.crossproc.monitor_loop import CrossProcessMonitor, PassReport
from lockyard.infra.crossproc.notices import FileVictimNotices
from lockyard.infra.crossproc.state import WaitForReader, node_key
from lockyard.infra.hooks.commit_guard.hook import make_commit_guard_hook
from lockyard.infra.hooks.write_guard.hook import make_write_guard_hook
from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.checkout import NAMESPACE_ENV
from lockyard.infra.tools.lock_tools import LockTools
from polling_support import wait_until_async

pytestmark = pytest.mark.anyio

LOCKYARD = str(Path(sys.executable).parent / "lockyard")
FILES = ("src/app.py", "src/models.py")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
    )  # fmt: skip
    return done.stdout.strip()


@dataclass(frozen=True)
class Checkouts:
    """A clone, a second worktree of it, and a copy of it at another path (a container's
    view of the repository), all locking in one lock directory."""

    main: Path
    worktree: Path
    container: Path
    lock_dir: Path

    def store(self, checkout: Path, **settings: Any) -> LockStore:
        return LockStore(checkout, self.lock_dir, liveness_interval=0.05, **settings)


@pytest.fixture(autouse=True)
def _no_namespace_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAMESPACE_ENV, raising=False)


@pytest.fixture
def checkouts(tmp_path: Path) -> Checkouts:
    main = tmp_path / "proj"
    (main / "src").mkdir(parents=True)
    for name in FILES:
        (main / name).write_text("v1\n")
    git(main, "init", "-q", "-b", "main")
    git(main, "config", "user.email", "t@example.com")
    git(main, "config", "user.name", "t")
    git(main, "add", ".")
    git(main, "commit", "-q", "-m", "init")
    worktree = tmp_path / "proj-wt2"
    git(main, "worktree", "add", "-q", str(worktree), "-b", "second")
    container = tmp_path / "container" / "workspace"
    shutil.copytree(main, container, symlinks=True)
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir(mode=0o700)
    return Checkouts(main, worktree, container, lock_dir)


# --- contention and arrival order ------------------------------------------------------


async def test_worktrees_contend_for_one_lock_and_are_granted_in_arrival_order(
    checkouts: Checkouts,
) -> None:
    first = checkouts.store(checkouts.main)
    second = checkouts.store(checkouts.worktree)
    third = checkouts.store(checkouts.worktree / "src")  # another agent of the second worktree
    assert first.namespace == second.namespace == third.namespace
    assert first.try_lock(str(checkouts.main / "src" / "app.py"), "alice")
    assert not second.try_lock(str(checkouts.worktree / "src" / "app.py"), "bob")
    assert second.holder("src/app.py") == "alice"

    granted: list[str] = []

    async def wait(store: LockStore, agent: str) -> None:
        assert await store.acquire_async("src/app.py", agent, 30)
        granted.append(agent)
        assert store.release("src/app.py", agent)

    async with anyio.create_task_group() as group:
        group.start_soon(wait, second, "bob")
        await wait_until_async(lambda: [w.agent_id for w in first.waiters("src/app.py")] == ["bob"])
        group.start_soon(wait, third, "carol")
        await wait_until_async(lambda: len(first.waiters("src/app.py")) == 2)
        assert first.release("src/app.py", "alice")
    assert granted == ["bob", "carol"]
    assert first.holder("src/app.py") is None


async def test_a_copied_checkout_shares_locks_by_an_explicit_name_only(
    checkouts: Checkouts,
) -> None:
    host = checkouts.store(checkouts.main, namespace="proj")
    container = checkouts.store(checkouts.container, namespace="proj")
    unnamed = checkouts.store(checkouts.container)
    assert host.try_lock("src/app.py", "alice")
    assert not container.try_lock(str(checkouts.container / "src" / "app.py"), "bob")
    assert container.holder("src/app.py") == "alice"
    assert unnamed.namespace != host.namespace
    assert unnamed.try_lock("src/app.py", "carol")  # another repository as far as it knows

    granted: list[str] = []

    async def wait(agent: str) -> None:
        assert await container.acquire_async("src/app.py", agent, 30)
        granted.append(agent)
        container.release("src/app.py", agent)

    async with anyio.create_task_group() as group:
        group.start_soon(wait, "bob")
        await wait_until_async(lambda: len(host.waiters("src/app.py")) == 1)
        group.start_soon(wait, "dave")
        await wait_until_async(lambda: len(host.waiters("src/app.py")) == 2)
        host.release("src/app.py", "alice")
    assert granted == ["bob", "dave"]


# --- deadlocks spanning two worktrees ----------------------------------------------------


async def test_a_deadlock_spanning_two_worktrees_is_found_and_resolved_in_process(
    checkouts: Checkouts,
) -> None:
    monitor = DeadlockMonitor()
    alice = LockTools(checkouts.store(checkouts.main), "alice",
                      emit_lock_event=monitor.handle_event, victim_notices=monitor)  # fmt: skip
    bob = LockTools(checkouts.store(checkouts.worktree), "bob",
                    emit_lock_event=monitor.handle_event, victim_notices=monitor)  # fmt: skip
    monitor.register_agent("alice")
    monitor.register_agent("bob")
    assert json.loads((await alice.acquire({"filepaths": ["src/app.py"]})).text)["all_acquired"]
    assert json.loads((await bob.acquire({"filepaths": ["src/models.py"]})).text)["all_acquired"]
    results: dict[str, dict[str, Any]] = {}

    async def blocked(name: str, tools: LockTools, path: str) -> None:
        outcome = await tools.acquire({"filepaths": [path], "timeout_seconds": 30})
        results[name] = json.loads(outcome.text)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(blocked, "alice", alice, str(checkouts.main / "src" / "models.py"))
            group.start_soon(blocked, "bob", bob, str(checkouts.worktree / "src" / "app.py"))

    [victim] = [name for name, result in results.items() if "deadlock" in result]
    winner = "alice" if victim == "bob" else "bob"
    deadlock = results[victim]["deadlock"]
    assert sorted(deadlock["files"]) == sorted(FILES)  # the short keys, not two disks' paths
    assert results[winner]["all_acquired"] is True


async def test_a_deadlock_spanning_two_worktrees_is_resolved_by_the_cross_process_monitor(
    checkouts: Checkouts,
) -> None:
    stores = {"alice": checkouts.store(checkouts.main), "bob": checkouts.store(checkouts.worktree)}
    state = WaitForReader(stores["alice"])
    tools = {
        name: LockTools(store, name, victim_notices=FileVictimNotices(
            checkouts.lock_dir, state.still_waiting, poll_interval=0.05))
        for name, store in stores.items()
    }  # fmt: skip
    assert stores["alice"].try_lock("src/app.py", "alice")
    await anyio.sleep(0.01)  # bob's lock is the younger: he is the victim
    assert stores["bob"].try_lock("src/models.py", "bob")
    results: dict[str, dict[str, Any]] = {}
    reports: list[PassReport] = []

    async def blocked(name: str, path: str) -> None:
        outcome = await tools[name].acquire({"filepaths": [path], "timeout_seconds": 30})
        results[name] = json.loads(outcome.text)

    monitor = CrossProcessMonitor(checkouts.lock_dir)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: monitor.run(reports.append, poll_interval=0.05, rescan_seconds=0.5)
            )
            async with anyio.create_task_group() as agents:
                agents.start_soon(blocked, "alice", "src/models.py")
                agents.start_soon(blocked, "bob", "src/app.py")
            group.cancel_scope.cancel()

    [resolution] = [r for report in reports for r in report.resolutions]
    namespace = stores["alice"].namespace
    assert {step.lock_path for step in resolution.deadlock.cycle} == {
        node_key(namespace, key) for key in FILES
    }  # one node per file for both worktrees
    assert results["bob"]["deadlock"]["victim"] == "bob"
    assert sorted(results["bob"]["deadlock"]["files"]) == sorted(FILES)
    assert results["alice"]["all_acquired"] is True
    assert stores["bob"].holder("src/app.py") == "alice"


# --- the guards -----------------------------------------------------------------------


def pre_tool(tool_name: str, tool_input: dict[str, Any], cwd: Path) -> dict[str, Any]:
    return {
        "session_id": "s1", "transcript_path": "/tmp/t.jsonl", "cwd": str(cwd),
        "permission_mode": "default", "hook_event_name": "PreToolUse",
        "tool_name": tool_name, "tool_input": tool_input, "tool_use_id": "toolu_1",
    }  # fmt: skip


def denial(output: Any) -> str | None:
    if output == {}:
        return None
    return output["hookSpecificOutput"]["permissionDecisionReason"]  # type: ignore[no-any-return]


async def test_the_write_guard_sees_a_lock_taken_in_another_worktree(
    checkouts: Checkouts,
) -> None:
    mine = checkouts.store(checkouts.main)
    theirs = checkouts.store(checkouts.worktree)
    guard = make_write_guard_hook(mine, "alice")
    target = str(checkouts.main / "src" / "app.py")
    write = pre_tool("Write", {"file_path": target, "content": "x"}, checkouts.main)
    assert theirs.try_lock("src/app.py", "bob")
    reason = denial(await guard(write, "t", {"signal": None}))
    assert reason is not None
    assert reason.startswith("src/app.py is locked by agent bob")
    assert theirs.release("src/app.py", "bob")
    assert mine.try_lock("src/app.py", "alice")
    assert denial(await guard(write, "t", {"signal": None})) is None
    # and the other way round: bob's guard in his worktree sees alice's lock
    bob_guard = make_write_guard_hook(theirs, "bob")
    edit = pre_tool("Edit", {"file_path": "src/app.py", "old_string": "v1", "new_string": "v2"},
                    checkouts.worktree)  # fmt: skip
    reason = denial(await bob_guard(edit, "t", {"signal": None}))
    assert reason is not None
    assert "locked by agent alice" in reason


async def test_the_commit_guard_sees_a_lock_taken_in_another_worktree(
    checkouts: Checkouts,
) -> None:
    mine = checkouts.store(checkouts.main)
    theirs = checkouts.store(checkouts.worktree)
    guard = make_commit_guard_hook(mine, "alice")
    (checkouts.main / "src" / "app.py").write_text("v2\n")
    commit = pre_tool("Bash", {"command": "git commit -am change"}, checkouts.main)
    assert theirs.try_lock("src/app.py", "bob")
    reason = denial(await guard(commit, "t", {"signal": None}))
    assert reason is not None
    assert "src/app.py (locked by bob)" in reason
    theirs.release("src/app.py", "bob")
    assert mine.try_lock("src/app.py", "alice")
    assert denial(await guard(commit, "t", {"signal": None})) is None


# --- `lockyard serve` in two worktrees, and status --------------------------------------


def serve_params(agent: str, checkout: Path, lock_dir: Path) -> StdioServerParameters:
    env = {"LOCKYARD_LOCK_DIR": str(lock_dir), "PATH": os.environ["PATH"]}
    env.update({k: v for k, v in os.environ.items() if k.startswith(("COVERAGE_", "PYTHONPATH"))})
    return StdioServerParameters(
        command=LOCKYARD, args=["serve", "--agent-id", agent, "--repo", str(checkout)], env=env
    )


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result
    parsed: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return parsed


async def lockyard(*args: str) -> str:
    """The `lockyard` command's stdout (it must succeed), on a wide terminal."""
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [LOCKYARD, *args], check=False, env={**os.environ, "COLUMNS": "200"}
        )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


async def test_serve_processes_in_two_worktrees_share_locks_and_status_shows_where(
    checkouts: Checkouts,
) -> None:
    namespace = checkouts.store(checkouts.main).namespace
    async with (
        Client(serve_params("alice", checkouts.main, checkouts.lock_dir)) as alice,
        Client(serve_params("bob", checkouts.worktree, checkouts.lock_dir)) as bob,
    ):
        got = await call(alice, "lock_acquire", {"filepaths": ["src/app.py"]})
        assert got["results"] == [{"filepath": "src/app.py", "acquired": True, "holder": "alice"}]
        absolute = str(checkouts.worktree / "src" / "app.py")
        refused = await call(bob, "lock_acquire", {"filepaths": [absolute], "timeout_seconds": 0})
        assert refused["results"] == [
            {"filepath": "src/app.py", "acquired": False, "holder": "alice"}
        ]
        assert (await call(bob, "lock_acquire", {"filepaths": ["src/models.py"]}))["all_acquired"]

        payload = json.loads(
            await lockyard("status", "--json", "--lock-dir", str(checkouts.lock_dir))
        )
        assert payload["namespaces"] == [namespace]
        where = {lock["lock_path"]: lock["holder"]["checkout"] for lock in payload["locks"]}
        assert where == {
            "src/app.py": str(checkouts.main),
            "src/models.py": str(checkouts.worktree),
        }
        text = await lockyard("status", "--lock-dir", str(checkouts.lock_dir))
        assert f"namespace {namespace}" in text
        assert str(checkouts.worktree) in text
        assert "src/models.py" in text

        released = await call(alice, "lock_release", {"all": True})
        assert released == {"released": ["src/app.py"], "count": 1}
        assert (await call(bob, "lock_acquire", {"filepaths": ["src/app.py"]}))["all_acquired"]


@pytest.mark.parametrize("bad", ["", "a/b", "n" * 129, "tab\there"])
async def test_serve_refuses_a_bad_namespace_before_serving(checkouts: Checkouts, bad: str) -> None:
    done = await anyio.run_process(
        [LOCKYARD, "serve", "--agent-id", "a", "--repo", str(checkouts.main),
         "--lock-dir", str(checkouts.lock_dir), "--namespace", bad],
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    [line] = done.stderr.decode().strip().splitlines()  # one line: agent CLIs show the last
    assert "namespace" in line
    assert "--namespace NAME" in line
    assert done.stdout == b""
