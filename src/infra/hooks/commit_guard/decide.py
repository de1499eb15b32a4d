"""The commit guard's decision: would this Bash `git commit` include files the agent has not locked?

We read the command (without running it) for what the commit would take:
- `git commit` alone: the staged files (`git diff --cached`);
- `-a` / `--all`: plus every modified tracked file;
- `git commit <paths>`: only those paths (git's `--only`), or with `-i` / `--include` the
  paths plus the staged files;
- `git add <paths>` / `git add -A` / `git add .` earlier in the same command line: what they
  would stage;
- `cd <dir>` and `git -C <dir>` are followed.
A command that cannot be parsed (unbalanced quotes) is judged on staged plus modified tracked
files. Shell indirection (aliases, scripts, `eval`, `sh -c`) is out of reach: this is a guard
rail for honest agents, not a sandbox.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from ...seen.stale import change_since_seen
from ..git_query import cached, run_git
from ..guard_common import (
    GuardStore,
    holder_over,
    inside_repo,
    lost_grant,
    other_readers,
    shared_note,
    still_draining,
)

logger = logging.getLogger(__name__)


@dataclass
class CommitPlan:
    """What a shell command line would put into a commit, read without running it.

    Paths are relative to the hook's cwd (or absolute), already joined with any `cd` / `-C`.
    """

    commits: bool = False
    directory: str = "."
    """Where `git commit` runs (after `cd` and `-C`)."""
    all_tracked: bool = False
    include: bool = False
    commit_paths: list[str] = field(default_factory=list)
    add_paths: list[str] = field(default_factory=list)
    add_everything: bool = False


_SEPARATORS: Final = frozenset(";&|()\n")
_WRAPPERS: Final = frozenset({"env", "sudo", "command", "exec", "nice", "time", "nohup"})
_GIT_OPTIONS_WITH_VALUE: Final = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})
_COMMIT_OPTIONS_WITH_VALUE: Final = frozenset(
    {"--message", "--file", "--reuse-message", "--reedit-message", "--author", "--date",
     "--fixup", "--squash", "--template", "--cleanup", "--trailer", "--pathspec-from-file"}
)  # fmt: skip
_SHORT_OPTIONS_WITH_VALUE: Final = frozenset("mFCct")
_ADD_EVERYTHING: Final = frozenset({"-A", "--all", "-u", "--update", ".", ":/", "*", ":/:"})


def plan_commit(command: str) -> CommitPlan | None:
    """Read a shell command line for `git commit`; None if it cannot be tokenized."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        lexer.commenters = ""
        tokens = list(lexer)
    except ValueError:
        return None
    plan = CommitPlan()
    current = "."
    for words in _segments(tokens):
        words = _strip_wrappers(words)
        if len(words) == 2 and words[0] in ("cd", "pushd"):
            current = os.path.normpath(os.path.join(current, words[1]))
        elif words and os.path.basename(words[0]) == "git":
            _read_git(words[1:], current, plan)
    return plan


def _segments(tokens: list[str]) -> Iterable[list[str]]:
    segment: list[str] = []
    for token in tokens:
        if set(token) <= _SEPARATORS:
            if segment:
                yield segment
            segment = []
        else:
            segment.append(token)
    if segment:
        yield segment


def _strip_wrappers(words: list[str]) -> list[str]:
    while words and (words[0] in _WRAPPERS or _is_assignment(words[0])):
        words = words[1:]
    return words


def _is_assignment(word: str) -> bool:
    name, sep, _ = word.partition("=")
    return bool(sep) and name.isidentifier()


def _read_git(args: list[str], current: str, plan: CommitPlan) -> None:
    directory = current
    index = 0
    while index < len(args) and args[index].startswith("-"):
        option = args[index]
        if option in _GIT_OPTIONS_WITH_VALUE and index + 1 < len(args):
            if option == "-C":
                directory = os.path.normpath(os.path.join(directory, args[index + 1]))
            index += 2
        else:
            index += 1
    if index >= len(args):
        return
    subcommand, rest = args[index], args[index + 1 :]
    if subcommand == "commit":
        plan.commits = True
        plan.directory = directory
        _read_commit_args(rest, directory, plan)
    elif subcommand in ("add", "stage"):
        for arg in rest:
            if arg in _ADD_EVERYTHING:
                plan.add_everything = True
            elif not arg.startswith("-"):
                plan.add_paths.append(os.path.normpath(os.path.join(directory, arg)))


def _read_commit_args(args: list[str], directory: str, plan: CommitPlan) -> None:
    index = 0
    only_paths = False
    while index < len(args):
        arg = args[index]
        index += 1
        if only_paths or not arg.startswith("-") or arg == "-":
            plan.commit_paths.append(os.path.normpath(os.path.join(directory, arg)))
        elif arg == "--":
            only_paths = True
        elif arg.startswith("--"):
            if arg == "--all":
                plan.all_tracked = True
            elif arg == "--include":
                plan.include = True
            elif arg in _COMMIT_OPTIONS_WITH_VALUE:
                index += 1  # its value is the next word
        else:
            index += _read_short_cluster(arg[1:], plan)


def _read_short_cluster(letters: str, plan: CommitPlan) -> int:
    """Read `-am`-style flags; return 1 when the last flag takes the next word as its value."""
    for position, letter in enumerate(letters):
        if letter == "a":
            plan.all_tracked = True
        elif letter == "i":
            plan.include = True
        elif letter in _SHORT_OPTIONS_WITH_VALUE:
            return 1 if position == len(letters) - 1 else 0  # else the value is attached
    return 0


# --- asking git ---------------------------------------------------------------------------


def _git(directory: str, *args: str) -> list[str] | None:
    """Run git in `directory` with the repository's programs disabled (`git_query`); the
    NUL-separated names it prints, or None if git failed."""
    out = run_git(directory, args, timeout=60)
    if out is None:
        return None
    return [name for name in out.decode(errors="surrogateescape").split("\0") if name]


_NO_PROGRAMS: Final = ("--no-ext-diff", "--no-textconv")
_STAGED: Final = ("diff", *_NO_PROGRAMS, "--cached", "--name-only", "-z", "--no-relative")
_UNTRACKED: Final = ("ls-files", "-z", "--full-name", "--others", "--exclude-standard")
_CHANGED_IN: Final = ("ls-files", "-z", "--full-name", "--modified", "--deleted")
"""Tracked files whose working copy differs from the index (`git diff` would write the index
back when it finds stale file times; `ls-files` only reads it)."""
_MODIFIED: Final = _CHANGED_IN


def files_in_commit(plan: CommitPlan | None, cwd: str) -> tuple[str, list[str]] | None:
    """(work tree root, paths relative to it) the commit would include; None if not in git.

    Runs git (blocking): async callers run it in a worker thread."""
    with cached():
        return _files_in_commit(plan, cwd)


def _files_in_commit(plan: CommitPlan | None, cwd: str) -> tuple[str, list[str]] | None:
    directory = cwd if plan is None else os.path.join(cwd, plan.directory)
    top = _git(directory, "rev-parse", "--show-toplevel")
    if not top:
        return None
    root = top[0].strip()
    if plan is None:  # unparseable: assume the worst a plain commit could do
        return root, sorted({*_names(root, _STAGED), *_names(root, _MODIFIED)})

    def absolute(paths: list[str]) -> list[str]:
        return [os.path.join(cwd, path) for path in paths]

    names: set[str] = set()
    if plan.add_everything:
        names.update(_names(root, _MODIFIED))
        names.update(_names(root, _UNTRACKED))
    if plan.add_paths:
        names.update(_names(root, _CHANGED_IN, "--others", "--", *absolute(plan.add_paths)))
    if plan.commit_paths:
        # `git commit <paths>` commits those paths only (unless --include).
        paths = absolute(plan.commit_paths)
        names.update(_names(root, _CHANGED_IN, "--", *paths))
        names.update(_names(root, _STAGED, "--", *paths))
        if not plan.include:
            return root, sorted(names)
    names.update(_names(root, _STAGED))
    if plan.all_tracked:
        names.update(_names(root, _MODIFIED))
    return root, sorted(names)


def _names(root: str, command: tuple[str, ...], *extra: str) -> list[str]:
    return _git(root, *command, *extra) or []


def commit_denial(
    store: GuardStore, agent_id: str, command: str, cwd: object, acquire: str
) -> str | None:
    """None unless `command` runs a `git commit` that would include repo files `agent_id` has
    not locked; then the reason to deny it. Blocking (it asks git)."""
    if "commit" not in command:
        return None
    plan = plan_commit(command)
    if plan is not None and not plan.commits:
        return None
    found = files_in_commit(plan, cwd if isinstance(cwd, str) and cwd else store.root)
    if found is None:
        return None
    keys = repo_keys(store, *found)
    problems = unlocked_files(store, agent_id, keys)
    if not problems:
        return unseen_changes(store, agent_id, keys)
    listed = ", ".join(
        f"{key} ({'not locked' if holder is None else f'locked by {holder}'})"
        for key, holder in problems
    )
    wanted = json.dumps([key for key, _ in problems])
    return (
        f"This git commit would include files you have not locked: {listed}. "
        f'Lock them first with {acquire} {{"filepaths": {wanted}}}, or leave them out of '
        "the commit (unstage them with `git restore --staged <file>`, do not use -a, or "
        "name only your files: `git commit <your files> -m ...`)."
    ) + shared_note(store, agent_id, [key for key, _ in problems], acquire)


def repo_keys(store: GuardStore, root: str, names: list[str]) -> list[str]:
    """The lock keys of the files in `names` (relative to `root`) inside the repository, each
    canonicalized once for both checks."""
    keys = []
    for name in names:
        path = os.path.join(root, name)
        if not inside_repo(path, store.root):
            continue
        try:
            keys.append(store.canonicalize(path))
        except ValueError:
            logger.warning("commit guard: cannot canonicalize %r", path)
    return keys


def unseen_changes(store: GuardStore, agent_id: str, keys: list[str]) -> str | None:
    """Why the commit would record a change `agent_id` has not seen (a file it read changed
    since, and not by its own writes: seen/stale.py), or None."""
    changes = [
        change
        for change in (change_since_seen(store.root, agent_id, key) for key in keys)
        if change is not None
    ]
    if not changes:
        return None
    said = "; ".join(f"{change.key} {change.says()}" for change in changes)
    listed = " ".join(change.key for change in changes)
    return (
        f"This git commit would record changes you have not seen: {said}. Read them again "
        f"(`git diff -- {listed}`), make sure they belong in your commit, then commit."
    )


def unlocked_files(
    store: GuardStore, agent_id: str, keys: list[str]
) -> list[tuple[str, str | None]]:
    """(lock key, holder) of each key that `agent_id` does not hold (itself, or by a
    directory lock over it)."""
    problems: list[tuple[str, str | None]] = []
    for key in keys:
        holder, via = holder_over(store, key, agent_id)
        if (
            holder != agent_id
            or lost_grant(store, via, agent_id) is not None
            or other_readers(store, via, agent_id)
            or (via != key and other_readers(store, key, agent_id))
            or still_draining(store, via, agent_id) is not None
        ):
            problems.append((key, holder))
    return problems
