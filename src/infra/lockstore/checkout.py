"""Which repository a checkout belongs to, and the repository-relative key of a file in it.

A lock names a file *in a repository*, not on one disk: the pair (namespace, key).

- The **namespace** names the repository. For a git checkout it is derived from the
  repository's common git directory (`git rev-parse --git-common-dir`), which every worktree
  of one clone shares: `proj-3f2a9c1b7e40`. An explicit name (`namespace=`, or the
  `LOCKYARD_NAMESPACE` environment variable) replaces it, so that clones on other hosts and
  in containers share locks. A directory that is not a git checkout is its own namespace:
  its canonical path.
- The **key** is the file's path relative to the checkout's root (POSIX separators), the
  same in every worktree and clone: `src/app.py`. Literal keys `__name__` name locks that are
  not files and stay as they are.

The git layout is read from the file system (a `.git` directory, or a `.git` file pointing at
a worktree's git directory, whose `commondir` names the shared one) once per checkout and
remembered: no `git` process runs, neither per call nor at all, and `GIT_DIR` and friends set
by git hooks cannot redirect it.

A file in a nested repository or a submodule is keyed by its path inside the checkout that
names it (`vendor/lib/x.py` in the outer repository's namespace): a lock belongs to the
checkout the agent works in, whatever repository the file belongs to on disk.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from ..clone_state import git_dirs
from .errors import InvalidNamespaceError, InvalidPathError, PathOutsideRepoError
from .paths import (
    MAX_PATH_CHARS,
    is_literal_key,
    refuse_non_utf8,
    resolve_entry,
    unescape_dollars,
    validate_path_text,
)
from .scope_keys import glob_problem, is_glob_key, split_glob

NAMESPACE_ENV: Final = "LOCKYARD_NAMESPACE"
MAX_NAMESPACE_CHARS: Final = 128
"""Explicit names are short labels; a path-like namespace (a non-git directory) is not one."""

_UNPRINTABLE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_LABEL_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
_HASH_CHARS: Final = 12

NamespaceSource = Literal["explicit", "git", "directory"]


@dataclass(frozen=True, slots=True)
class Checkout:
    """One checkout of one repository: where it is, and which repository it is.

    `root` is the checkout's root (canonical path; for a git checkout its top level, whichever
    directory inside it was given): relative file paths are resolved in it and keys are
    relative to it, so a key passed back in names the same file (`key(key) == key`).
    """

    namespace: str
    root: str
    source: NamespaceSource
    git_common_dir: str | None = None
    _root_slash: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_root_slash", self.root.rstrip("/") + "/")

    def key(
        self,
        filepath: object,
        *,
        allow_outside_repo: bool = False,
        resolve: Callable[[str], tuple[str, bool]] = resolve_entry,
    ) -> str:
        """The repository-relative lock key of `filepath` (see the module docstring).

        Relative paths are resolved in `root`, never the working directory; symlinks and `..`
        are resolved and case is taken as the file system has it. A path that resolves
        outside the checkout is refused, unless `allow_outside_repo` (its key is then its
        absolute path); a directory is refused (a lock on it would protect none of its files).
        `resolve` is `paths.resolve_entry` or one that answers the same, only faster.
        """
        text = validate_path_text(filepath)
        if text.startswith("__") and is_literal_key(text):
            return text
        glob = split_glob(text)
        if glob is not None:
            return self._glob_key(text, *glob, resolve)
        # os.path.join, spelled out (it costs a fifth of the whole computation): an absolute
        # `text` replaces the root.
        joined = text if text.startswith("/") else self._root_slash + text
        directory = text.endswith("/")  # a directory lock's key ends with a slash too
        if directory:
            joined = joined.rstrip("/") or "/"
        resolved, is_dir = resolve(unescape_dollars(joined))
        if resolved.startswith(self._root_slash):
            key = resolved[len(self._root_slash) :]
            if key.startswith("__") and is_literal_key(key):
                key = "./" + key  # a file named like a literal key is not that literal lock
        elif resolved == self.root:
            key, is_dir = resolved, True
        elif allow_outside_repo:
            key = resolved
        else:
            raise PathOutsideRepoError(
                f"{text!r} resolves to {resolved!r}, outside the checkout {self.root!r}; "
                "lock files inside the repository (or create the store with "
                "allow_outside_repo=True)"
            )
        if directory:
            key = self._directory_key(text, key, resolved, is_dir)
        elif resolved == self.root:
            raise InvalidPathError(
                f"{text!r} is the whole checkout: lock the files, or the directories (written "
                "with a trailing slash: src/api/), you will change"
            )
        elif is_dir:
            raise InvalidPathError(
                f"{text!r} is the directory {resolved!r}: to lock it and everything under "
                f"it, write it with a trailing slash ({text.rstrip('/')}/), or lock its files"
            )
        if len(key) > MAX_PATH_CHARS:
            raise InvalidPathError(f"{text!r} resolves to a path longer than {MAX_PATH_CHARS}")
        if not key.isascii():  # ASCII is UTF-8: the message is only built when needed
            refuse_non_utf8(key, f"{text!r} resolves to")
        return key

    def _directory_key(self, text: str, key: str, resolved: str, is_dir: bool) -> str:
        """The key of a directory lock (`text` ended with a slash): refused for a file and
        for the checkout's root."""
        if resolved == self.root or key in ("", "/"):
            raise InvalidPathError(
                f"{text!r} is the whole checkout: lock the directories you will change "
                "(for example src/api/), not the repository's root"
            )
        if not is_dir and os.path.lexists(resolved):
            raise InvalidPathError(
                f"{text!r} ends with a slash but {resolved!r} is a file: drop the slash to "
                "lock the file"
            )
        return key.rstrip("/") + "/"

    def _glob_key(
        self, text: str, literal: str, pattern: str, resolve: Callable[[str], tuple[str, bool]]
    ) -> str:
        """The key of a glob lock: its literal directory resolved like any path (symlinks and
        `..` name the directory they reach), then its pattern as written."""
        problem = glob_problem(text, pattern)
        if problem is not None:
            raise InvalidPathError(f"{text!r}: {problem}")
        prefix = ""
        if literal:
            joined = literal if literal.startswith("/") else self._root_slash + literal
            resolved, is_dir = resolve(unescape_dollars(joined.rstrip("/") or "/"))
            if resolved.startswith(self._root_slash):
                prefix = resolved[len(self._root_slash) :] + "/"
            elif resolved != self.root:
                raise PathOutsideRepoError(
                    f"{text!r} starts at {resolved!r}, outside the checkout {self.root!r}: "
                    "a glob covers files inside the repository only"
                )
            if not is_dir and os.path.lexists(resolved):
                raise InvalidPathError(f"{text!r}: {resolved!r} is a file, not a directory")
            if is_glob_key(prefix):
                raise InvalidPathError(
                    f"{text!r}: its directory {prefix!r} has * or ? in its name; lock a "
                    "glob from a directory above it, with ? for those characters"
                )
        key = prefix + pattern
        if len(key) > MAX_PATH_CHARS:
            raise InvalidPathError(f"{text!r} resolves to a path longer than {MAX_PATH_CHARS}")
        if not key.isascii():
            refuse_non_utf8(key, f"{text!r} resolves to")
        return key

    def path_of(self, key: str) -> str:
        """Where this checkout has the file of `key` (literal keys are no files: unchanged)."""
        if key.startswith("/") or is_literal_key(key):
            return key
        return self._root_slash + key.removeprefix("./")

    def contains(self, path: str) -> bool:
        """Whether the absolute, resolved `path` lies inside this checkout."""
        return path == self.root or path.startswith(self._root_slash)


def validate_namespace(name: object, what: str = "namespace") -> str:
    """An explicit namespace: a short printable name without `/`, or a clear error."""
    if not isinstance(name, str):
        raise InvalidNamespaceError(
            f"{what} must be a string, got {type(name).__name__}; pass a short name such as "
            "'myproject'"
        )
    if not name.strip():
        raise InvalidNamespaceError(
            f"{what} is empty; pass a short name such as 'myproject', or leave it unset to "
            "use the name derived from the repository"
        )
    if "\x00" in name:
        raise InvalidNamespaceError(f"{what} contains a NUL byte; remove it")
    if _UNPRINTABLE.search(name):
        raise InvalidNamespaceError(
            f"{what} {name!r} contains control characters (newline, tab, escape...); "
            "use printable characters only"
        )
    if "/" in name:
        raise InvalidNamespaceError(
            f"{what} {name!r} contains '/'; a namespace is a name, not a path: pass the "
            "repository path as the repo, and a name such as 'myproject' as the namespace"
        )
    if name != name.strip():
        raise InvalidNamespaceError(
            f"{what} {name!r} starts or ends with blanks; remove them (two spellings of one "
            "name would be two namespaces)"
        )
    if len(name) > MAX_NAMESPACE_CHARS:
        raise InvalidNamespaceError(
            f"{what} is {len(name)} characters long; the limit is {MAX_NAMESPACE_CHARS}"
        )
    return name


def namespace_from_env() -> str | None:
    """`LOCKYARD_NAMESPACE`, validated; None when unset."""
    value = os.environ.get(NAMESPACE_ENV)
    if value is None:
        return None
    return validate_namespace(value, NAMESPACE_ENV)


def canonical_repo_path(repo_path: str | os.PathLike[str] | None) -> str:
    """The repository path as given, absolute with `..` folded and symlinks resolved.

    `None` means the current working directory.
    """
    if repo_path is None:
        text = os.getcwd()
    elif isinstance(repo_path, str | os.PathLike):
        text = validate_path_text(
            os.fspath(repo_path),
            "repo_namespace",
            "pass the repository's root directory (or None for the current directory)",
        )
    else:
        raise InvalidPathError(
            f"repo_namespace must be the repository's path (str or os.PathLike), got "
            f"{type(repo_path).__name__}; pass the path, or None for the working directory"
        )
    path = os.path.realpath(os.path.abspath(os.path.expanduser(text)))
    refuse_non_utf8(path, "repository")
    return path


def open_checkout(
    repo_path: str | os.PathLike[str] | None = None, namespace: str | None = None
) -> Checkout:
    """The checkout at `repo_path` (default: the working directory).

    `namespace`, when given, is the explicit name; otherwise `LOCKYARD_NAMESPACE`; otherwise
    the name derived from the repository. Raises `InvalidPathError` when `repo_path` is not an
    existing directory, `InvalidNamespaceError` for a bad explicit name.
    """
    explicit = validate_namespace(namespace) if namespace is not None else namespace_from_env()
    return checkout_at(canonical_repo_path(repo_path), explicit)


@functools.lru_cache(maxsize=256)
def checkout_at(directory: str, explicit: str | None) -> Checkout:
    """`open_checkout` for a canonical `directory`, remembered (a checkout's git layout is
    read once per process; moving a `.git` under a running agent is not supported)."""
    why: str | None
    try:
        info = os.stat(directory)
    except OSError as exc:
        why = exc.strerror or "cannot be opened"
    else:
        why = None if stat.S_ISDIR(info.st_mode) else "it is a file"
    if why is not None:
        raise InvalidPathError(
            f"repository {directory!r} is not an existing directory ({why}); pass the path of "
            "the repository's checkout"
        )
    found = find_git_checkout(directory)
    root, common = (directory, None) if found is None else found
    if explicit is not None:
        return Checkout(explicit, root, "explicit", common)
    if common is None:
        return Checkout(root, root, "directory", None)
    return Checkout(derived_namespace(common), root, "git", common)


def derived_namespace(common_dir: str) -> str:
    """A short, stable, printable name for the repository whose common git dir this is:
    a readable label (the repository's directory name) and a hash of the common dir."""
    name = os.path.basename(common_dir)
    if name == ".git":
        name = os.path.basename(os.path.dirname(common_dir))
    name = name.removesuffix(".git")
    label = _LABEL_UNSAFE.sub("_", name).strip("._-")[:40] or "repo"
    digest = hashlib.sha256(common_dir.encode(errors="surrogateescape")).hexdigest()
    return f"{label}-{digest[:_HASH_CHARS]}"


def find_git_checkout(directory: str) -> tuple[str, str | None] | None:
    """(checkout root, common git dir) of the checkout containing the canonical `directory`,
    or None outside any checkout. The common dir is None when the `.git` file points at a
    git directory that is not there (a worktree's checkout seen from a container); a `.git`
    directory without HEAD is no checkout (the search goes on upwards)."""
    current = directory
    while True:
        dot_git = os.path.join(current, ".git")
        if os.path.isdir(dot_git):
            if os.path.isfile(os.path.join(dot_git, "HEAD")):
                return current, os.path.realpath(dot_git)
        elif os.path.isfile(dot_git):
            dirs = git_dirs(current)
            if dirs is None or not os.path.isfile(os.path.join(dirs.git_dir, "HEAD")):
                return current, None
            return current, os.path.realpath(dirs.common_dir)
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
