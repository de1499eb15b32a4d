"""Checkouts and their repositories: namespaces (derived from git, explicit, or a
directory's path) and repository-relative keys, on real git checkouts (`git init`,
`git worktree add`, submodules)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lockyard.infra.lockstore import (
    InvalidNamespaceError,
    InvalidPathError,
    LockStore,
    LockStoreError,
    canonicalize_path,
)
from lockyard.infra.lockstore.checkout import (
    MAX_NAMESPACE_CHARS,
    NAMESPACE_ENV,
    derived_namespace,
    find_git_checkout,
    open_checkout,
    validate_namespace,
)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    return done.stdout.strip()


def make_repo(path: Path) -> Path:
    (path / "src").mkdir(parents=True)
    (path / "src" / "app.py").write_text("v1\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "t")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "init")
    return path


@pytest.fixture(autouse=True)
def _no_namespace_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAMESPACE_ENV, raising=False)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "proj")


def git_common_dir(checkout: Path) -> str:
    """What git itself says the repository's common dir is (the namespace's source)."""
    return os.path.realpath(checkout / git(checkout, "rev-parse", "--git-common-dir"))


# --- namespaces -------------------------------------------------------------------------


def test_every_worktree_of_a_clone_has_the_clones_namespace(clone: Path, tmp_path: Path) -> None:
    git(clone, "worktree", "add", "-q", str(tmp_path / "wt2"), "-b", "two")
    git(clone, "worktree", "add", "-q", str(tmp_path / "nested" / "wt3"), "-b", "three")
    main = open_checkout(clone)
    second = open_checkout(tmp_path / "wt2")
    third = open_checkout(tmp_path / "nested" / "wt3" / "src")  # any directory inside
    assert main.namespace == second.namespace == third.namespace
    assert main.source == "git"
    assert main.namespace == derived_namespace(git_common_dir(tmp_path / "wt2"))
    assert main.namespace.startswith("proj-")
    assert (main.root, second.root, third.root) == (
        str(clone),
        str(tmp_path / "wt2"),
        str(tmp_path / "nested" / "wt3"),
    )


def test_two_clones_and_a_copied_checkout_are_different_repositories_unless_named(
    clone: Path, tmp_path: Path
) -> None:
    git(tmp_path, "clone", "-q", str(clone), "other-clone")
    shutil.copytree(clone, tmp_path / "container" / "workspace", symlinks=True)
    spots = [clone, tmp_path / "other-clone", tmp_path / "container" / "workspace"]
    derived = {open_checkout(spot).namespace for spot in spots}
    assert len(derived) == 3  # by default each clone keeps its locks to itself
    named = {open_checkout(spot, "proj").namespace for spot in spots}
    assert named == {"proj"}
    assert open_checkout(spots[2], "proj").root == str(spots[2])


def test_the_namespace_comes_from_the_environment_when_not_passed(
    clone: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NAMESPACE_ENV, "team-proj")
    assert open_checkout(clone).namespace == "team-proj"
    assert open_checkout(clone, "given").namespace == "given"  # the argument wins
    assert LockStore(clone, clone.parent / "locks").namespace == "team-proj"


def test_a_directory_that_is_no_git_checkout_is_its_own_namespace(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    (plain / "sub").mkdir(parents=True)
    checkout = open_checkout(plain)
    assert (checkout.namespace, checkout.root, checkout.source) == (
        str(plain),
        str(plain),
        "directory",
    )
    assert open_checkout(plain / "sub").root == str(plain / "sub")  # no checkout above


def test_a_worktree_whose_git_dir_is_not_there_is_a_directory_namespace(
    clone: Path, tmp_path: Path
) -> None:
    """A worktree's checkout seen from a container: its `.git` file names a host path."""
    git(clone, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "wt")
    seen = tmp_path / "container" / "wt"
    shutil.copytree(tmp_path / "wt", seen, symlinks=True)
    (seen / ".git").write_text("gitdir: /nowhere/.git/worktrees/wt\n")
    checkout = open_checkout(seen / "src")
    assert (checkout.namespace, checkout.root, checkout.source) == (
        str(seen),
        str(seen),
        "directory",
    )
    assert open_checkout(seen, "proj").namespace == "proj"


def test_the_namespace_and_root_are_read_from_the_files_not_from_git_variables(
    clone: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = make_repo(tmp_path / "other")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))  # what a git hook would see
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    assert open_checkout(clone).root == str(clone)
    assert open_checkout(clone).namespace != open_checkout(other).namespace


BAD_NAMESPACES = ["", "   ", "a/b", "/abs", "a\x00b", "a\nb", "tab\there", "esc\x1b[31m"]
BAD_NAMESPACES += ["\x85next", " x", "x ", "n" * (MAX_NAMESPACE_CHARS + 1)]


@pytest.mark.parametrize("bad", BAD_NAMESPACES)
def test_a_bad_explicit_namespace_is_refused_and_nothing_is_created(
    bad: str, clone: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock_dir = tmp_path / "locks"
    with pytest.raises(InvalidNamespaceError) as raised:
        LockStore(clone, lock_dir, namespace=bad)
    assert "namespace" in str(raised.value)
    assert not lock_dir.exists()
    if "\x00" in bad:
        return  # no environment variable can hold a NUL byte
    monkeypatch.setenv(NAMESPACE_ENV, bad)
    with pytest.raises(InvalidNamespaceError, match=NAMESPACE_ENV):
        LockStore(clone, lock_dir)
    assert not lock_dir.exists()


@pytest.mark.parametrize("bad", [None, 7, b"proj"])
def test_a_namespace_that_is_not_text_is_refused(bad: object) -> None:
    with pytest.raises(InvalidNamespaceError, match="must be a string"):
        validate_namespace(bad)


def test_namespace_errors_are_lock_store_errors_and_value_errors() -> None:
    assert issubclass(InvalidNamespaceError, LockStoreError)
    assert issubclass(InvalidNamespaceError, ValueError)
    assert validate_namespace("n" * MAX_NAMESPACE_CHARS) == "n" * MAX_NAMESPACE_CHARS
    assert validate_namespace("team:proj.v2") == "team:proj.v2"


@given(st.text(min_size=1, max_size=300).map(lambda tail: "/" + tail.replace("\x00", "")))
def test_a_derived_namespace_is_always_a_valid_short_name(common_dir: str) -> None:
    name = derived_namespace(common_dir)
    assert validate_namespace(name) == name
    assert name == derived_namespace(common_dir)  # stable


def test_a_repo_path_that_is_not_a_directory_is_refused(clone: Path, tmp_path: Path) -> None:
    lock_dir = tmp_path / "locks"
    with pytest.raises(InvalidPathError, match=r"not an existing directory \(it is a file\)"):
        LockStore(clone / "src" / "app.py", lock_dir)
    with pytest.raises(InvalidPathError, match=r"not an existing directory \(No such file"):
        LockStore(tmp_path / "missing", lock_dir)
    assert not lock_dir.exists()


# --- keys -------------------------------------------------------------------------------


def test_keys_are_relative_to_the_checkout_root_in_every_worktree(
    clone: Path, tmp_path: Path
) -> None:
    git(clone, "worktree", "add", "-q", str(tmp_path / "wt2"), "-b", "two")
    main = LockStore(clone, tmp_path / "locks")
    second = LockStore(tmp_path / "wt2" / "src", tmp_path / "locks")  # opened on a subdir
    assert main.canonicalize(str(clone / "src" / "app.py")) == "src/app.py"
    assert second.canonicalize(str(tmp_path / "wt2" / "src" / "app.py")) == "src/app.py"
    assert second.canonicalize("src/app.py") == "src/app.py"  # relative to the root
    assert main.try_lock("src/app.py", "alice")
    assert not second.try_lock("src/app.py", "bob")
    assert second.holder(str(tmp_path / "wt2" / "src" / "app.py")) == "alice"


def test_the_contract_function_returns_the_short_key(
    clone: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKYARD_LOCK_DIR", str(tmp_path / "locks"))
    assert canonicalize_path(str(clone / "src" / "app.py"), str(clone)) == "src/app.py"
    assert canonicalize_path("__schema__", str(clone)) == "__schema__"
    monkeypatch.setenv(NAMESPACE_ENV, "shared")
    assert canonicalize_path("src/../src/app.py", str(clone)) == "src/app.py"


def test_a_file_of_a_nested_repository_is_keyed_in_the_outer_checkout(
    clone: Path, tmp_path: Path
) -> None:
    nested = make_repo(clone / "vendor" / "lib")
    outer = LockStore(clone, tmp_path / "locks")
    inner = LockStore(nested, tmp_path / "locks")
    assert outer.canonicalize(str(nested / "src" / "app.py")) == "vendor/lib/src/app.py"
    assert inner.canonicalize(str(nested / "src" / "app.py")) == "src/app.py"
    assert outer.namespace != inner.namespace  # the nested repository is its own


def test_a_submodule_is_keyed_in_the_superproject_and_is_its_own_repository(
    clone: Path, tmp_path: Path
) -> None:
    library = make_repo(tmp_path / "library")
    git(clone, "submodule", "add", "-q", str(library), "lib")
    assert (clone / "lib" / ".git").is_file()  # a `gitdir:` file into .git/modules/lib
    outer = LockStore(clone, tmp_path / "locks")
    sub = LockStore(clone / "lib", tmp_path / "locks")
    assert outer.canonicalize("lib/src/app.py") == "lib/src/app.py"
    assert sub.root == str(clone / "lib")
    assert sub.namespace == derived_namespace(git_common_dir(clone / "lib"))
    assert sub.namespace.startswith("lib-")
    assert find_git_checkout(str(clone / "lib" / "src")) == (
        str(clone / "lib"),
        git_common_dir(clone / "lib"),
    )


def test_status_records_name_the_holders_checkout(clone: Path, tmp_path: Path) -> None:
    git(clone, "worktree", "add", "-q", str(tmp_path / "wt2"), "-b", "two")
    second = LockStore(tmp_path / "wt2", tmp_path / "locks")
    assert second.try_lock("src/app.py", "bob")
    [info] = LockStore(clone, tmp_path / "locks").list_locks()
    assert info.lock_path == "src/app.py"
    assert info.namespace == second.namespace
    assert info.holder is not None
    assert info.holder.checkout == str(tmp_path / "wt2")
