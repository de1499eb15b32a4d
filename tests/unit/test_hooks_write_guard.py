"""The PreToolUse write guard, fed the exact dicts the CLI sends, on a real lock directory."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from lockyard.infra.hooks.write_guard.hook import (
    WRITE_TOOLS,
    WRITE_TOOLS_MATCHER,
    make_write_guard_hook,
)
from lockyard.infra.lockstore import LockStore


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("")
    return root


def pre(tool_name: str, tool_input: dict[str, Any], cwd: str | None = None) -> dict[str, Any]:
    """A PreToolUse input as the CLI sends it (sdk-facts §2)."""
    data: dict[str, Any] = {
        "session_id": "s1",
        "transcript_path": "/tmp/t.jsonl",
        "permission_mode": "default",
        "prompt_id": "p1",
        "hook_event_name": "PreToolUse",
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": "toolu_1",
    }
    if cwd is not None:
        data["cwd"] = cwd
    return data


def reason(output: dict[str, Any]) -> str:
    specific = output["hookSpecificOutput"]
    assert specific["hookEventName"] == "PreToolUse"
    assert specific["permissionDecision"] == "deny"
    return specific["permissionDecisionReason"]  # type: ignore[no-any-return]


def write_input(tool: str, path: str) -> dict[str, Any]:
    if tool == "NotebookEdit":
        return {"notebook_path": path, "new_source": "x"}
    if tool == "Write":
        return {"file_path": path, "content": "x"}
    if tool == "MultiEdit":
        return {"file_path": path, "edits": [{"old_string": "", "new_string": "x"}]}
    return {"file_path": path, "old_string": "", "new_string": "x"}


@pytest.mark.anyio
@pytest.mark.parametrize("tool", WRITE_TOOLS)
async def test_writes_to_an_unlocked_file_are_denied_with_the_exact_call(
    store: LockStore, repo: Path, tool: str
) -> None:
    guard = make_write_guard_hook(store, "a1")
    target = str(repo / "pkg" / "mod.py")
    text = reason(
        await guard(pre(tool, write_input(tool, target), str(repo)), "t", {"signal": None})
    )
    key = store.canonicalize("pkg/mod.py")
    assert f'mcp__lockyard__lock_acquire with {{"filepaths": ["{key}"]}}' in text
    assert "not locked by you" in text


@pytest.mark.anyio
@pytest.mark.parametrize("tool", WRITE_TOOLS)
async def test_writes_to_a_file_held_by_this_agent_pass(
    store: LockStore, repo: Path, tool: str
) -> None:
    assert store.try_lock("pkg/mod.py", "a1")
    guard = make_write_guard_hook(store, "a1")
    target = str(repo / "pkg" / "mod.py")
    assert await guard(pre(tool, write_input(tool, target), str(repo)), "t", {"signal": None}) == {}


@pytest.mark.anyio
async def test_the_deny_names_the_holder(store: LockStore, repo: Path) -> None:
    assert store.try_lock("pkg/mod.py", "a2")
    guard = make_write_guard_hook(store, "a1", "locks")
    text = reason(
        await guard(
            pre("Edit", write_input("Edit", "pkg/mod.py"), str(repo)), "t", {"signal": None}
        )
    )
    assert "locked by agent a2" in text
    assert "mcp__locks__lock_acquire" in text


@pytest.mark.anyio
async def test_relative_paths_resolve_against_the_cwd(store: LockStore, repo: Path) -> None:
    assert store.try_lock("pkg/mod.py", "a1")
    guard = make_write_guard_hook(store, "a1")
    inside_pkg = pre("Write", write_input("Write", "mod.py"), str(repo / "pkg"))
    assert await guard(inside_pkg, "t", {"signal": None}) == {}
    no_cwd = pre("Write", write_input("Write", "pkg/mod.py"))
    assert await guard(no_cwd, "t", {"signal": None}) == {}  # relative to the repo root


@pytest.mark.anyio
async def test_a_new_file_needs_a_lock_too(store: LockStore, repo: Path) -> None:
    guard = make_write_guard_hook(store, "a1")
    target = str(repo / "pkg" / "new_module.py")
    assert "not locked" in reason(await guard(pre("Write", write_input("Write", target)), "t", {}))
    assert store.try_lock(target, "a1")
    assert await guard(pre("Write", write_input("Write", target)), "t", {}) == {}


@pytest.mark.anyio
async def test_a_symlink_into_the_repo_is_judged_by_its_target(
    store: LockStore, repo: Path, tmp_path: Path
) -> None:
    link = tmp_path / "shortcut.py"
    link.symlink_to(repo / "pkg" / "mod.py")
    guard = make_write_guard_hook(store, "a1")
    assert "not locked" in reason(await guard(pre("Edit", write_input("Edit", str(link))), "t", {}))


@pytest.mark.anyio
async def test_files_outside_the_repo_are_allowed_unless_configured(
    store: LockStore, tmp_path: Path
) -> None:
    scratch = str(tmp_path / "scratch.txt")
    lenient = make_write_guard_hook(store, "a1")
    assert await lenient(pre("Write", write_input("Write", scratch)), "t", {}) == {}
    strict = make_write_guard_hook(store, "a1", allow_outside_repo=False)
    assert "outside the repository" in reason(
        await strict(pre("Write", write_input("Write", scratch)), "t", {})
    )


@pytest.mark.anyio
async def test_a_symlink_in_the_repo_to_a_file_outside_it_is_outside(
    store: LockStore, repo: Path, tmp_path: Path
) -> None:
    (tmp_path / "elsewhere.txt").write_text("")
    (repo / "link.txt").symlink_to(tmp_path / "elsewhere.txt")
    path = str(repo / "link.txt")
    assert (
        await make_write_guard_hook(store, "a1")(pre("Write", write_input("Write", path)), "t", {})
        == {}
    )
    strict = make_write_guard_hook(store, "a1", allow_outside_repo=False)
    assert "outside the repository" in reason(
        await strict(pre("Write", write_input("Write", path)), "t", {})
    )


@pytest.mark.anyio
async def test_a_store_that_keys_outside_files_still_lets_the_guard_tell_them_apart(
    repo: Path, lock_dir: Path, tmp_path: Path
) -> None:
    scratch = str(tmp_path / "scratch.txt")
    with LockStore(repo, lock_dir, allow_outside_repo=True) as lenient_store:
        assert lenient_store.canonicalize(scratch) == scratch  # keyed by its absolute path
        guard = make_write_guard_hook(lenient_store, "a1")
        assert await guard(pre("Write", write_input("Write", scratch)), "t", {}) == {}
        inside = str(repo / "pkg" / "mod.py")
        assert "not locked" in reason(
            await guard(pre("Edit", write_input("Edit", inside)), "t", {})
        )
        strict = make_write_guard_hook(lenient_store, "a1", allow_outside_repo=False)
        assert "outside the repository" in reason(
            await strict(pre("Write", write_input("Write", scratch)), "t", {})
        )


@pytest.mark.anyio
async def test_a_path_the_store_refuses_is_denied_inside_the_repo_and_allowed_outside(
    store: LockStore, repo: Path, tmp_path: Path
) -> None:
    guard = make_write_guard_hook(store, "a1")
    # A directory is no file to lock: refused inside the repository, none of its business
    # outside it.
    text = reason(await guard(pre("Write", write_input("Write", str(repo / "pkg"))), "t", {}))
    assert text.startswith("Cannot edit")
    (tmp_path / "outdir").mkdir()
    outside = str(tmp_path / "outdir")
    assert await guard(pre("Write", write_input("Write", outside)), "t", {}) == {}


@pytest.mark.anyio
@pytest.mark.parametrize(
    "input_data",
    [
        pre("Read", {"file_path": "/etc/passwd"}),
        pre("Bash", {"command": "echo > pkg/mod.py"}),
        pre("mcp__lockyard__lock_acquire", {"filepaths": ["pkg/mod.py"]}),
        pre("Write", {"content": "no path"}),
        pre("Write", "not a dict"),  # type: ignore[arg-type]
        "not a dict",
    ],
)
async def test_other_tools_and_malformed_inputs_pass(store: LockStore, input_data: Any) -> None:
    guard = make_write_guard_hook(store, "a1")
    assert await guard(input_data, "t", {"signal": None}) == {}


@pytest.mark.anyio
async def test_an_invalid_path_is_denied(store: LockStore) -> None:
    guard = make_write_guard_hook(store, "a1")
    text = reason(await guard(pre("Write", write_input("Write", "pkg/a\x00b")), "t", {}))
    assert text.startswith("Cannot edit")


@pytest.mark.anyio
async def test_an_unreadable_lock_fails_closed(
    store: LockStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(filepath: str) -> str | None:
        raise OSError("I/O error")

    monkeypatch.setattr(store, "holder", broken)
    guard = make_write_guard_hook(store, "a1")
    with caplog.at_level(logging.ERROR):
        text = reason(await guard(pre("Write", write_input("Write", "pkg/mod.py")), "t", {}))
    assert "Cannot check the lock" in text
    assert "could not read the lock" in caplog.text


@pytest.mark.anyio
async def test_the_guard_reads_only(store: LockStore, repo: Path) -> None:
    guard = make_write_guard_hook(store, "a1")
    await guard(pre("Write", write_input("Write", "pkg/mod.py")), "t", {})
    assert store.list_locks() == []


def test_the_matcher_is_an_exact_name_list() -> None:
    assert WRITE_TOOLS_MATCHER == "Write|Edit|MultiEdit|NotebookEdit"


def corrupt_lock(store: LockStore, path: str) -> None:
    """A lock entry holding two grants: the store refuses to guess who holds it."""
    from lockyard.infra.lockstore.paths import lock_name

    entry = store.lock_dir / f"{lock_name(store.namespace, store.canonicalize(path))}.lock"
    entry.mkdir()
    (entry / "one").write_text("{}")
    (entry / "two").write_text("{}")


@pytest.mark.anyio
async def test_an_unreadable_lock_denies_the_edit_without_parser_details(
    store: LockStore, repo: Path
) -> None:
    corrupt_lock(store, "pkg/mod.py")
    guard = make_write_guard_hook(store, "a1")
    text = reason(await guard(pre("Edit", write_input("Edit", str(repo / "pkg/mod.py"))), "t", {}))
    assert "is unreadable" in text
    assert "lockyard status" in text
    assert "entries" not in text  # the store's own explanation goes to the log, not the agent
