"""`git` commands that rewrite the working tree, and the files they would rewrite.

Where git can say which files a command would change without changing them, it is asked
(read-only queries, run in the command's directory with none of the command's `-c` settings):
`checkout`/`restore` of pathspecs, `reset --hard`, `stash pop/apply/push`, `apply`, `rm`,
`clean`. Commands that rewrite the tree in ways that cannot be listed ahead (switching
branches, merge, pull, rebase, cherry-pick, revert, am) are unknown. `git mv` is read like
`mv`. Everything else (status, diff, log, add, commit, fetch, push...) writes no file in the
tree; `git commit` has its own guard.

Git's answers describe the repository as it is before the command line runs. A git command
that changes what they would be (the index, HEAD, branches, the stash: `git rm --cached`,
`git add`, `git commit`, `git fetch`...) makes every later query of the same line stale, e.g.
`git rm --cached a.txt; git clean -f` removes a.txt, which was tracked when git was asked:
such a later command is unknown, and the agent runs the two separately.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Final

from .effects import Arg, Effects, read_options
from .utilities import Place, mv

_GIT_VALUE_OPTIONS: Final = frozenset({"-C", "-c", "--namespace", "--exec-path", "--config-env"})
_UNLISTABLE: Final = {
    "merge": "merges",
    "pull": "pulls",
    "rebase": "rebases",
    "cherry-pick": "cherry-picks",
    "revert": "reverts",
    "am": "applies mails",
    "bisect": "bisects",
    "read-tree": "reads a tree",
    "checkout-index": "checks out the index",
}
_QUERY_TIMEOUT: Final = 10.0
_READ_ONLY: Final = frozenset(
    {
        "blame", "cat-file", "describe", "diff", "grep", "help", "log", "ls-files", "ls-tree",
        "rev-list", "rev-parse", "shortlog", "show", "status", "version",
    }
)  # fmt: skip
"""Subcommands that change nothing git would answer later (the index, refs, the stash)."""
_READ_ONLY_STASH: Final = frozenset({"list", "show"})


@dataclass(frozen=True)
class _GitPlace(Place):
    """Where a git command runs, and the earlier git command of the same command line that
    changed what git would answer now (None: none did)."""

    changed_by: str | None = None


class _StaleAnswerError(Exception):
    """A query whose answer an earlier command of the line will have changed."""


def changes_git_state(args: list[Arg]) -> bool:
    """Whether `git *args` may change what later git queries answer (index, refs, stash)."""
    index = _subcommand_index(args)
    if index is None or index >= len(args):
        return index is None  # an option only known when it runs: assume it does
    subcommand, rest = args[index], args[index + 1 :]
    if subcommand == "stash":
        return not rest or rest[0] not in _READ_ONLY_STASH
    return subcommand not in _READ_ONLY


def _subcommand_index(args: list[Arg]) -> int | None:
    """Where the subcommand is in `git *args` (len(args): none), None when unknown."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg is None:
            return None
        if not arg.startswith("-"):
            return index
        index += 2 if arg in _GIT_VALUE_OPTIONS else 1
    return len(args)


def git(args: list[Arg], place: Place, *, after: str | None = None) -> Effects:
    """What `git *args` writes in the tree. `after`: an earlier git command of the same
    command line that changed the repository's state (`changes_git_state`), whose effect the
    answers of git queried now would miss."""
    cwd = place.cwd
    index = 0
    while index < len(args):
        arg = args[index]
        if arg is None:
            return _unknown("`git` is given an option that is only known when it runs")
        if not arg.startswith("-"):
            break
        if arg in ("--git-dir", "--work-tree") or arg.startswith(("--git-dir=", "--work-tree=")):
            return _unknown(
                "`git --git-dir/--work-tree` works on a tree the guard does not follow: "
                "run git inside the repository"
            )
        if arg in _GIT_VALUE_OPTIONS:
            value = args[index + 1] if index + 1 < len(args) else None
            if arg == "-C":
                if value is None or cwd is None:
                    return _unknown("`git -C` runs in a directory only known when it runs")
                cwd = os.path.join(cwd, value)
            index += 2
        else:
            index += 1
    if index >= len(args):
        return Effects()
    subcommand, rest = args[index], args[index + 1 :]
    here = _GitPlace(cwd, place.home, changed_by=after)
    reader = _SUBCOMMANDS.get(subcommand or "")
    if reader is not None:
        try:
            effects = reader(rest, here)
        except _StaleAnswerError:
            return _unknown(
                f"`git {subcommand}` runs after `{after}` on the same command line: the guard "
                "asks git which files a command changes before anything runs, and the earlier "
                "command changes that answer. Run them as separate commands"
            )
    elif subcommand in _UNLISTABLE:
        effects = _unknown(
            f"`git {subcommand}` {_UNLISTABLE[subcommand]} into the working tree, rewriting files "
            "the guard cannot list before it runs: lock the files it will touch, then run it"
        )
    else:
        return Effects()
    if cwd != place.cwd and cwd is not None:
        # Paths git reports are relative to `cwd` (-C); make them absolute for the caller.
        effects.files = [os.path.join(cwd, f) for f in effects.files]
        effects.trees = [os.path.join(cwd, t) for t in effects.trees]
    return effects


def _unknown(reason: str) -> Effects:
    return Effects(unknown=[reason])


def _checkout(args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args,
        short_values="bBt",
        long_values=frozenset({"--orphan", "--conflict", "--pathspec-from-file"}),
    )
    if _raw_dashdash(args):
        before, pathspecs = _split_dashdash(args)
        revisions = read_options(before, short_values="bBt").operands
        return _changed(place, revisions[:1], pathspecs)
    operands = options.operands
    if options.has("-b", "-B", "--orphan") and not operands:
        return Effects()  # a new branch at HEAD: the tree stays as it is
    if operands and operands[0] is not None and _is_revision(place, operands[0]):
        if len(operands) == 1:
            return _unknown(
                f"`git checkout {operands[0]}` switches the whole working tree to another "
                "revision, rewriting files other agents may be editing: restore single files "
                "with `git checkout <rev> -- <file>` after locking them"
            )
        return _changed(place, operands[:1], operands[1:])
    return _changed(place, [], operands)


def _restore(args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args,
        short_values="s",
        long_values=frozenset({"--source", "--conflict", "--pathspec-from-file"}),
    )
    if options.has("-S", "--staged") and not options.has("-W", "--worktree"):
        return Effects()  # only the index
    return _changed(place, options.values("-s", "--source")[-1:], options.operands)


def _switch(args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args, short_values="cC", long_values=frozenset({"--create", "--force-create", "--orphan"})
    )
    if options.has("-c", "-C", "--create", "--force-create", "--orphan") and not options.operands:
        return Effects()
    return _unknown(
        "`git switch` changes the whole working tree to another branch, rewriting files other "
        "agents may be editing: do not switch branches in a shared checkout"
    )


def _reset(args: list[Arg], place: Place) -> Effects:
    options = read_options(args)
    if not options.has("--hard", "--merge", "--keep"):
        return Effects()  # soft and mixed resets move HEAD and the index only
    return _changed(place, options.operands[:1] or ["HEAD"], [])


def _stash(args: list[Arg], place: Place) -> Effects:
    """`pop`/`apply` write the stash's files; `push` (also `git stash` alone or with options)
    reverts the modified files (and with `-u`/`-a` removes the untracked ones)."""
    action = args[0] if args else "push"
    if action in ("pop", "apply"):
        ref = next((a for a in args[1:] if a is None or not a.startswith("-")), "stash@{0}")
        if ref is None:
            return _unknown("`git stash pop` of a stash only known when it runs")
        return _listed(
            place,
            ["stash", "show", "--name-only", "-z", "--include-untracked", ref],
            f"git stash {action}",
        )
    if action is not None and action not in ("push", "save") and not action.startswith("-"):
        return Effects()  # list, show, drop, clear, branch, create, store
    rest = args[1:] if action in ("push", "save") else args
    options = read_options(
        rest, short_values="m", long_values=frozenset({"--message", "--pathspec-from-file"})
    )
    effects = _changed(place, ["HEAD"], options.operands)
    if options.has("-u", "--include-untracked", "-a", "--all"):
        specs = [p for p in options.operands if p is not None]
        effects.merge(
            _listed(
                place,
                ["ls-files", "-z", "--full-name", "--others", "--exclude-standard", "--", *specs],
                "git stash -u",
            )
        )
    return effects


def _apply(args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args,
        short_values="pC",
        long_values=frozenset({"--directory", "--exclude", "--include", "--whitespace"}),
    )
    if options.has("--cached", "--check", "--stat", "--numstat", "--summary"):
        return Effects()
    patches = options.operands
    if not patches or any(p is None or p == "-" for p in patches):
        return _unknown(
            "`git apply` reads a patch from its input: save it to a file and `git apply FILE` "
            "so the guard can read which files it changes"
        )
    query = [
        a
        for a in args
        if a is not None and a not in ("--index", "-3", "--3way", "--reject", "-v", "--verbose")
    ]
    found = _git(place, ["apply", "--numstat", "-z", *query])
    if found is None:
        return _unknown("`git apply`: git could not read the patch (fix the patch first)")
    files: list[str] = []
    for record in found.split("\0"):
        fields = record.split("\t")
        if len(fields) == 3 and fields[2]:
            files.append(fields[2])
    return _from_root(place, files)


def _rm(args: list[Arg], place: Place) -> Effects:
    options = read_options(args, long_values=frozenset({"--pathspec-from-file"}))
    if options.has("--cached") or not options.operands:
        return Effects()
    if any(p is None for p in options.operands):
        return _unknown("`git rm` of paths only known when it runs")
    specs = [p for p in options.operands if p is not None]
    return _listed(place, ["ls-files", "-z", "--full-name", "--", *specs], "git rm")


def _clean(args: list[Arg], place: Place) -> Effects:
    options = read_options(args, short_values="e", long_values=frozenset({"--exclude"}))
    if options.has("-n", "--dry-run") or not options.has("-f", "--force"):
        return Effects()
    query = [_without_action_flags(a) for a in args if a is not None and a != "-"]
    found = _git(place, ["clean", "--dry-run", *[a for a in query if a]])
    if found is None:
        return _unknown("`git clean`: git could not list what it would remove")
    effects = Effects()
    for line in found.splitlines():
        name = line.removeprefix("Would remove ").strip()
        if name:
            (effects.trees if name.endswith("/") else effects.files).append(name)
    return effects


def _without_action_flags(arg: str) -> str:
    """An argument of `git clean` for its dry run: no force, no prompt, and not quiet (a quiet
    dry run lists nothing)."""
    if arg in ("-f", "--force", "-i", "--interactive", "-q", "--quiet"):
        return ""
    if arg.startswith("-") and not arg.startswith("--"):
        letters = "".join(c for c in arg[1:] if c not in "fiq")
        return f"-{letters}" if letters else ""
    return arg


def _mv(args: list[Arg], place: Place) -> Effects:
    return mv(
        [a for a in args if a not in ("-k", "-n", "--dry-run", "-v", "--verbose", "-f", "--force")],
        place,
    )


def _changed(place: Place, revisions: list[Arg], pathspecs: list[Arg]) -> Effects:
    """Files whose working-tree copy differs from the index (or from `revisions[0]`) under
    `pathspecs`: exactly those a checkout or restore would rewrite."""
    if any(p is None for p in [*revisions, *pathspecs]):
        return _unknown("this git command names paths or a revision only known when it runs")
    specs = [p for p in pathspecs if p is not None]
    revision = [r for r in revisions if r is not None]
    effects = _listed(
        place, ["diff", "--name-only", "-z", "--no-relative", *revision, "--", *specs], "git"
    )
    if revision and not effects.unknown:
        # Files the revision has and the working tree lacks come back too.
        effects.merge(
            _listed(
                place,
                ["ls-tree", "-r", "-z", "--name-only", "--full-name", revision[0], "--", *specs],
                "git",
                missing_only=True,
            )
        )
    return effects


def _listed(place: Place, query: list[str], what: str, *, missing_only: bool = False) -> Effects:
    found = _git(place, query)
    if found is None:
        return _unknown(f"`{what}`: git could not list the files it would change here")
    names = [name for name in found.split("\0") if name]
    effects = _from_root(place, names)
    if missing_only:
        effects.files = [f for f in effects.files if not os.path.lexists(f)]
    return effects


def _from_root(place: Place, names: list[str]) -> Effects:
    root = _git(place, ["rev-parse", "--show-toplevel"])
    if root is None:
        return _unknown("git could not find the repository")
    top = root.strip()
    return Effects(files=[os.path.join(top, name) for name in names])


def _is_revision(place: Place, name: str) -> bool:
    if place.cwd is not None and os.path.lexists(os.path.join(place.cwd, name)):
        return False  # a path that exists: git itself prefers the path only with --
    return (
        _git(place, ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}"])
        is not None
    )


def _raw_dashdash(args: list[Arg]) -> bool:
    return "--" in args


def _split_dashdash(args: list[Arg]) -> tuple[list[Arg], list[Arg]]:
    at = args.index("--")
    return args[:at], args[at + 1 :]


def _git(place: Place, query: list[str]) -> str | None:
    """Run a read-only git query in the command's directory; its output, or None on failure.
    Raises _StaleAnswerError when an earlier command of the line changes the answer."""
    if isinstance(place, _GitPlace) and place.changed_by is not None:
        raise _StaleAnswerError(place.changed_by)
    if place.cwd is None or not os.path.isdir(place.cwd):
        return None
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}
    try:
        done = subprocess.run(
            ["git", "-C", place.cwd, *query],
            capture_output=True,
            timeout=_QUERY_TIMEOUT,
            check=False,
            env=env,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode(errors="surrogateescape")


_SUBCOMMANDS: Final = {
    "checkout": _checkout,
    "restore": _restore,
    "switch": _switch,
    "reset": _reset,
    "stash": _stash,
    "apply": _apply,
    "rm": _rm,
    "clean": _clean,
    "mv": _mv,
}
