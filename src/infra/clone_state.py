"""Where a clone keeps lockyard's machine-local state: `<git common dir>/lockyard/`.

Found by reading the `.git` entry, never by running git (hook processes and `lockyard
git-turn` run on every tool call or git command line). A linked worktree's `.git` file points
at its own git dir, whose `commondir` names the clone's; a submodule's git dir is its own
common dir. Every worktree of a clone therefore finds the same state directory. Standard
library only.
"""

from __future__ import annotations

import os
from typing import NamedTuple


class GitDirs(NamedTuple):
    """The git directories of one checkout."""

    git_dir: str
    """This worktree's own (its index, HEAD)."""
    common_dir: str
    """The clone's, shared by every worktree (refs, packed-refs, config, objects)."""


def git_dirs(root: str) -> GitDirs | None:
    """The git directories of the checkout whose top is `root`, or None when `root` holds no
    `.git` entry that names one."""
    dot_git = os.path.join(root, ".git")
    if os.path.isdir(dot_git):
        return GitDirs(dot_git, dot_git)
    try:
        with open(dot_git, encoding="utf-8") as file:
            line = file.readline().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not line.startswith("gitdir:"):
        return None
    git_dir = os.path.normpath(os.path.join(root, line.removeprefix("gitdir:").strip()))
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as file:
            common = os.path.normpath(os.path.join(git_dir, file.readline().strip()))
    except (OSError, UnicodeDecodeError):
        common = git_dir  # a submodule's git dir is its own common dir
    return GitDirs(git_dir, common)


def checkout_root(start: str) -> str | None:
    """The top of the checkout holding directory `start` (the nearest directory, `start`
    included, with a `.git` entry), or None outside any."""
    current = os.path.abspath(start)
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def clone_state_dir(root: str) -> str:
    """`<git common dir>/lockyard` of the checkout at `root`; outside git, a directory of this
    user's under the temp directory, one per root."""
    dirs = git_dirs(root)
    if dirs is not None:
        return os.path.join(dirs.common_dir, "lockyard")
    # Only here, not in every hook process: tempfile imports shutil and the compression
    # modules, and hashlib its C library.
    import hashlib
    import tempfile

    digest = hashlib.blake2b(root.encode(errors="surrogatepass"), digest_size=16).hexdigest()
    return os.path.join(tempfile.gettempdir(), f"lockyard-{os.getuid()}", digest)
