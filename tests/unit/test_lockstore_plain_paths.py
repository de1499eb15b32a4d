"""One-call resolution of symlink-free paths answers what full resolution answers, or nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.lockdir.keys import is_plain_file, resolve_plain
from lockyard.infra.lockstore.paths import resolve_entry

if resolve_plain("/") is None:  # pragma: no cover - a kernel or sandbox without openat2
    pytest.skip("openat2 is not available here", allow_module_level=True)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """a/b/f.py, a/g.py, link -> a/b, a/loop -> a/loop, dangling -> nowhere."""
    root = tmp_path_factory.mktemp("tree")
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.py").write_text("")
    (root / "a" / "g.py").write_text("")
    (root / "link").symlink_to(root / "a" / "b")
    (root / "a" / "loop").symlink_to(root / "a" / "loop")
    (root / "dangling").symlink_to(root / "nowhere")
    return root


def test_a_plain_file_resolves_to_itself(tree: Path) -> None:
    assert resolve_plain(f"{tree}/a/b/f.py") == (f"{tree}/a/b/f.py", False)
    assert resolve_plain(f"{tree}/a/./b/../g.py") == (f"{tree}/a/g.py", False)
    assert resolve_plain(f"{tree}/a/b") == (f"{tree}/a/b", True)
    assert resolve_plain(f"{tree}/a//b/f.py") == (f"{tree}/a/b/f.py", False)
    assert resolve_plain(f"{tree}/a/b/") == (f"{tree}/a/b", True)


def test_a_file_not_created_yet_resolves_to_itself_in_a_plain_directory(tree: Path) -> None:
    assert resolve_plain(f"{tree}/a/b/new.py") == (f"{tree}/a/b/new.py", False)
    assert resolve_plain(f"{tree}/a/./b/../new.py") == (f"{tree}/a/new.py", False)
    assert resolve_plain(f"{tree}/a//new.py") == (f"{tree}/a/new.py", False)
    assert resolve_plain(f"{tree}/a/b/new.py") == resolve_entry(f"{tree}/a/b/new.py")


@pytest.mark.parametrize(
    "relative",
    [
        "link/f.py",
        "link/new.py",
        "a/loop",
        "dangling",
        "missing/new.py",
        "a/g.py/x",
        "a/b/f.py/",
        "a/new/",
        "a/new/..",
    ],
)
def test_anything_but_a_plain_path_is_left_to_full_resolution(tree: Path, relative: str) -> None:
    assert resolve_plain(f"{tree}/{relative}") is None


def test_relative_and_double_slash_paths_are_left_to_full_resolution(tree: Path) -> None:
    assert resolve_plain("a/b/f.py") is None
    assert resolve_plain(f"/{tree}/a/b/f.py") is None  # POSIX keeps a leading `//`


parts = st.lists(
    st.sampled_from(["a", "b", "f.py", "g.py", "link", "..", ".", "x", ""]), max_size=6
)


@settings(max_examples=300, deadline=None)
@given(parts=parts)
def test_whenever_it_answers_it_answers_what_full_resolution_does(
    tree: Path, parts: list[str]
) -> None:
    path = "/".join([str(tree), *parts])
    found = resolve_plain(path)
    if found is not None:
        assert found == resolve_entry(path)
        assert found[0] == os.path.realpath(path)
    elif "link" not in parts and ".." not in parts and os.path.exists(path):
        raise AssertionError(f"{path} is plain and exists, yet was not resolved")


def test_the_store_keys_a_plain_path_and_a_symlinked_one_alike(repo: Path, lock_dir: Path) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("")
    (repo / "alias").symlink_to(repo / "src")
    store = LockStore(repo, lock_dir)
    assert store.canonicalize("src/app.py") == "src/app.py"
    assert store.canonicalize("alias/app.py") == "src/app.py"
    assert store.canonicalize(f"{repo}/src/../src/app.py") == "src/app.py"
    assert store.try_lock("alias/app.py", "alice")
    assert not store.try_lock("src/app.py", "bob")


def _a_component_on_the_way_is_a_file(path: str) -> bool:
    parts = path.split("/")
    return any(os.path.isfile("/".join(parts[:end])) for end in range(2, len(parts)))


@settings(max_examples=300, deadline=None)
@given(parts=parts)
def test_the_plain_file_check_agrees_with_resolution(tree: Path, parts: list[str]) -> None:
    path = "/".join([str(tree), *parts])
    plain = resolve_plain(path)
    plain_existing_file = plain is not None and not plain[1] and os.path.lexists(path)
    if is_plain_file(path):
        assert plain_existing_file or _a_component_on_the_way_is_a_file(path)
    else:
        assert not plain_existing_file


def test_the_plain_file_check_says_no_to_directories_symlinks_and_missing_files(
    tree: Path,
) -> None:
    assert is_plain_file(f"{tree}/a/b/f.py")
    assert is_plain_file(os.fsencode(f"{tree}/a/b/f.py"))  # as the store remembers it
    assert is_plain_file(f"{tree}/a/./b/../g.py")
    for relative in ("a/b", "link/f.py", "dangling", "a/loop", "a/b/new.py", "missing/f.py"):
        assert not is_plain_file(f"{tree}/{relative}")
