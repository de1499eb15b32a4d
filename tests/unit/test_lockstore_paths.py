"""Repository-relative lock keys and the typed errors for bad input (which change nothing)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from lockyard.infra.lockstore import (
    InvalidAgentIdError,
    InvalidPathError,
    InvalidTimeoutError,
    LockStore,
    LockStoreError,
    PathOutsideRepoError,
    canonicalize_path,
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    (path / "src").mkdir(parents=True)
    return path


def test_relative_paths_resolve_against_the_repo_not_the_cwd(
    store: LockStore, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert store.canonicalize("src/a.py") == "src/a.py"
    assert store.canonicalize("./src/../src/./a.py") == "src/a.py"
    assert store.canonicalize(str(repo / "src" / "a.py")) == "src/a.py"


def test_a_key_passed_back_in_names_the_same_file(store: LockStore, repo: Path) -> None:
    (repo / "__init__.py").touch()
    (repo / "__build__").touch()  # a file named like a literal key is that file
    for path in ("src/a.py", "__init__.py", str(repo / "__build__"), "__db__"):
        key = store.canonicalize(path)
        assert store.canonicalize(key) == key
    assert store.canonicalize(str(repo / "__build__")) == "./__build__"
    assert store.canonicalize("__build__") == "__build__"  # the literal lock, not the file


def test_symlinks_in_existing_ancestors_of_new_files_are_resolved(
    store: LockStore, repo: Path
) -> None:
    (repo / "link").symlink_to(repo / "src")
    assert store.canonicalize("link/new_file.py") == "src/new_file.py"
    (repo / "src" / "exists.py").touch()
    (repo / "alias.py").symlink_to(repo / "src" / "exists.py")
    assert store.canonicalize("alias.py") == "src/exists.py"


def test_a_symlink_then_dotdot_resolves_physically(store: LockStore, repo: Path) -> None:
    (repo / "src" / "deep").mkdir()
    (repo / "shortcut").symlink_to(repo / "src" / "deep")
    assert store.canonicalize("shortcut/../x.py") == "src/x.py"


def test_shell_escaped_dollar_is_unescaped_only_when_that_file_exists(
    store: LockStore, repo: Path
) -> None:
    assert store.canonicalize("src/\\$tmp.py") == "src/\\$tmp.py"
    (repo / "src" / "$tmp.py").touch()
    assert store.canonicalize("src/\\$tmp.py") == "src/$tmp.py"


def test_literal_keys_pass_through(store: LockStore) -> None:
    assert store.canonicalize("__schema__") == "__schema__"
    assert store.try_lock("__schema__", "alice")
    assert store.holder("__schema__") == "alice"
    assert store.canonicalize("__a/b__") == "__a/b__"  # not a literal key: a path in the repo
    assert store.try_lock("__a/b__", "alice")
    assert {info.lock_path for info in store.list_locks()} == {"__schema__", "__a/b__"}


def test_two_spellings_of_one_repo_share_one_set_of_locks(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "repo-link").symlink_to(repo)
    first = LockStore(repo, tmp_path / "locks")
    second = LockStore(f"{tmp_path}/repo-link/src/../", tmp_path / "locks")
    assert first.namespace == second.namespace == str(repo)  # not a git checkout: its path
    assert first.try_lock("src/a.py", "alice")
    assert not second.try_lock(str(tmp_path / "repo-link" / "src" / "a.py"), "bob")
    assert second.holder("src/a.py") == "alice"


def test_paths_outside_the_repo_are_refused_unless_opted_in(
    store: LockStore, repo: Path, tmp_path: Path
) -> None:
    (repo / "escape").symlink_to(tmp_path)
    for outside in ("../other.py", "/etc/passwd", "escape/x.py"):
        with pytest.raises(PathOutsideRepoError, match="outside the checkout"):
            store.try_lock(outside, "alice")
    assert store.list_locks() == []
    opted_in = LockStore(repo, tmp_path / "locks", allow_outside_repo=True)
    assert opted_in.try_lock("../other.py", "alice")
    assert opted_in.holder(str(tmp_path / "other.py")) == "alice"
    assert opted_in.canonicalize("../other.py") == str(tmp_path / "other.py")  # absolute


DIRECTORIES = [".", "src", "./src/..", "linked-src", "src/deeper/..", "REPO", "./", "src/.."]
"""Directories written without the trailing slash a directory lock's key needs, and the
checkout's root (never a lockable directory)."""


@pytest.mark.parametrize("path", DIRECTORIES)
def test_directories_without_their_slash_are_refused_and_change_nothing(
    store: LockStore, repo: Path, path: str
) -> None:
    (repo / "src" / "deeper").mkdir()
    (repo / "linked-src").symlink_to(repo / "src")
    path = str(repo) if path == "REPO" else path
    before = sorted(os.listdir(store.lock_dir))
    for call in (
        lambda: store.try_lock(path, "alice"),
        lambda: store.acquire(path, "alice", 1),
        lambda: store.canonicalize(path),
    ):
        with pytest.raises(InvalidPathError, match=r"is the (directory|whole checkout)") as raised:
            call()
        assert not isinstance(raised.value, PathOutsideRepoError)
    assert sorted(os.listdir(store.lock_dir)) == before


def test_files_in_directories_and_files_not_yet_created_are_still_lock_keys(
    store: LockStore, repo: Path
) -> None:
    (repo / "src" / "app.py").write_text("")
    (repo / "src" / "dangling").symlink_to(repo / "nowhere")
    assert store.try_lock("src/app.py", "alice")
    assert store.try_lock("src/new_module.py", "alice")
    assert store.try_lock("src/new_package/__init__.py", "alice")
    assert store.try_lock("src/dangling", "alice")
    assert store.try_lock("__schema__", "alice")  # a literal key is never a directory
    assert {info.lock_path for info in store.list_locks()} == {
        "src/app.py",
        "src/new_module.py",
        "src/new_package/__init__.py",
        "nowhere",
        "__schema__",
    }


def test_contract_canonicalize_path_uses_the_repo_namespace(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKYARD_LOCK_DIR", str(tmp_path / "env-locks"))
    assert canonicalize_path("src/a.py", str(repo)) == "src/a.py"
    assert canonicalize_path(str(repo / "src" / "a.py"), str(repo)) == "src/a.py"
    assert canonicalize_path("__db__", str(repo)) == "__db__"
    monkeypatch.chdir(repo)
    assert canonicalize_path("src/a.py") == "src/a.py"  # the working directory's checkout


BAD_PATHS: list[object] = ["", "   ", "a\x00b", "x" * 5000, None, 42, b"bytes.py"]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_bad_paths_raise_a_typed_error_and_change_nothing(store: LockStore, path: object) -> None:
    before = sorted(os.listdir(store.lock_dir))
    for call in (
        lambda: store.try_lock(path, "alice"),  # type: ignore[arg-type]
        lambda: store.release(path, "alice"),  # type: ignore[arg-type]
        lambda: store.holder(path),  # type: ignore[arg-type]
        lambda: store.acquire(path, "alice", 1),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidPathError):
            call()
    assert sorted(os.listdir(store.lock_dir)) == before


BAD_AGENTS: list[object] = ["", "  ", "a\nb", "a\x00b", "x" * 300, None, 7]


@pytest.mark.parametrize("agent", BAD_AGENTS)
def test_bad_agent_ids_raise_a_typed_error_and_change_nothing(
    store: LockStore, agent: object
) -> None:
    assert store.try_lock("held.py", "owner")
    before = sorted(os.listdir(store.lock_dir))
    for call in (
        lambda: store.try_lock("a.py", agent),  # type: ignore[arg-type]
        lambda: store.release("held.py", agent),  # type: ignore[arg-type]
        lambda: store.cleanup_agent_locks(agent),  # type: ignore[arg-type]
        lambda: store.acquire("held.py", agent, 1),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidAgentIdError):
            call()
    assert sorted(os.listdir(store.lock_dir)) == before
    assert store.holder("held.py") == "owner"


BAD_TIMEOUTS: list[object] = [-1, -0.001, math.nan, math.inf, 10**9, True, "5", None]


@pytest.mark.parametrize("bad_timeout", BAD_TIMEOUTS)
@pytest.mark.anyio
async def test_bad_timeouts_raise_a_typed_error_and_change_nothing(
    store: LockStore, bad_timeout: object
) -> None:
    assert store.try_lock("held.py", "owner")
    before = sorted(os.listdir(store.lock_dir))
    with pytest.raises(InvalidTimeoutError):
        await store.acquire_async("held.py", "bob", bad_timeout)  # type: ignore[arg-type]
    with pytest.raises(InvalidTimeoutError):
        store.acquire("free.py", "bob", bad_timeout)  # type: ignore[arg-type]
    assert sorted(os.listdir(store.lock_dir)) == before


@pytest.mark.parametrize("poll", [0, -5, 10**7, math.nan, False, "100"])
def test_bad_poll_intervals_raise_a_typed_error(store: LockStore, poll: object) -> None:
    with pytest.raises(InvalidTimeoutError, match="poll_interval_ms"):
        store.acquire("a.py", "alice", 1, poll)  # type: ignore[arg-type]
    assert not store.is_locked("a.py")


def test_every_input_error_is_a_lock_store_error_and_a_value_error() -> None:
    for error in (InvalidPathError, PathOutsideRepoError, InvalidAgentIdError, InvalidTimeoutError):
        assert issubclass(error, LockStoreError)
        assert issubclass(error, ValueError)


def test_a_bad_repo_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidPathError, match="repo_namespace"):
        LockStore("", tmp_path / "locks")


def test_an_empty_namespace_is_refused_asking_for_the_repository(tmp_path: Path) -> None:
    with pytest.raises(InvalidPathError) as refused:
        LockStore("", tmp_path / "locks")
    message = str(refused.value)
    assert message.startswith("repo_namespace is empty;")
    assert "repository's root directory" in message
    assert "file path" not in message
    assert not (tmp_path / "locks").exists()
