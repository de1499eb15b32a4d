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
import shlex
from dataclasses import dataclass
from typing import Final

from .. import git_query
from .effects import Arg, Effects, read_options
from .git_settings import RUNS_NOW, is_program_key
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
    "filter-branch": "rewrites history",
    "sparse-checkout": "changes the sparse checkout",
    "submodule": "updates submodules",
    "lfs": "fetches large files",
}
_READ_ONLY_LFS: Final = frozenset({"ls-files", "status", "env", "version", "logs", "locks"})
_BUILTINS: Final = frozenset(
    {
        "add", "am", "annotate", "apply", "archive", "bisect", "blame", "branch", "bundle",
        "cat-file", "check-attr", "check-ignore", "check-mailmap", "check-ref-format",
        "checkout", "checkout-index", "cherry", "cherry-pick", "clean", "clone", "column",
        "commit", "commit-graph", "commit-tree", "config", "count-objects", "describe",
        "diagnose", "diff", "diff-files", "diff-index", "diff-tree", "difftool",
        "fast-export", "fast-import", "fetch", "fetch-pack", "filter-branch",
        "for-each-ref", "for-each-repo", "format-patch", "fsck", "gc", "get-tar-commit-id",
        "grep", "hash-object", "help", "index-pack", "init", "instaweb", "interpret-trailers",
        "log", "ls-files", "ls-remote", "ls-tree", "mailinfo", "mailsplit", "maintenance",
        "merge", "merge-base", "merge-file", "merge-index", "merge-tree", "mergetool",
        "mktag", "mktree", "mv", "name-rev", "notes", "pack-objects", "pack-refs",
        "patch-id", "prune", "pull", "push", "range-diff", "read-tree", "rebase", "reflog",
        "remote", "repack", "replace", "request-pull", "rerere", "reset", "restore",
        "rev-list", "rev-parse", "revert", "rm", "send-email", "shortlog", "show",
        "show-branch", "show-index", "show-ref", "sparse-checkout", "stage", "stash",
        "status", "stripspace", "submodule", "switch", "symbolic-ref", "tag",
        "update-index", "update-ref", "update-server-info", "var", "verify-commit",
        "verify-pack", "verify-tag", "version", "whatchanged", "worktree", "write-tree",
        "lfs", "gui", "citool", "gitk", "p4", "svn", "credential",
    }
)  # fmt: skip
"""Git's own commands (an alias cannot shadow them); any other name may be an alias."""

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


def asks_git(args: list[Arg]) -> bool:
    """Whether judging `git *args` starts git processes (a query of what it rewrites)."""
    index = _subcommand_index(args)
    return index is None or (index < len(args) and args[index] in _ASKING)


def writes_tree(args: list[Arg]) -> bool:
    """Whether `git *args` may write files in the working tree (without asking git)."""
    index = _subcommand_index(args)
    if index is None:
        return True
    if index >= len(args):
        return False
    return args[index] in _WRITERS or args[index] not in _BUILTINS


def git(args: list[Arg], place: Place, *, after: str | None = None, aliases: int = 0) -> Effects:
    """What `git *args` writes in the tree. `after`: an earlier git command of the same
    command line that changed the repository's state (`changes_git_state`), whose effect the
    answers of git queried now would miss."""
    cwd = place.cwd
    index = 0
    settings: list[Arg] = []
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
        if arg.startswith("--exec-path="):
            return _unknown("`git --exec-path` runs git's commands from another directory")
        if arg == "--config-env" or arg.startswith("--config-env="):
            value = arg.partition("=")[2] or (args[index + 1] if index + 1 < len(args) else None)
            if value is None or is_program_key(value.partition("=")[0].lower()):
                return _unknown("`git --config-env` sets a program from the environment")
        if arg in _GIT_VALUE_OPTIONS:
            value = args[index + 1] if index + 1 < len(args) else None
            if arg == "-C":
                if value is None or cwd is None:
                    return _unknown("`git -C` runs in a directory only known when it runs")
                cwd = os.path.join(cwd, value)
            elif arg == "-c":
                settings.append(value)
            index += 2
        else:
            index += 1
    if index >= len(args):
        return Effects()
    subcommand, rest = args[index] or "", args[index + 1 :]
    here = _GitPlace(cwd, place.home, changed_by=after)
    effects = Effects()
    aliased: dict[str, str] = {}
    for setting in settings:
        if setting is None:
            return _unknown("`git -c` sets something only known when it runs")
        key, _, value = setting.partition("=")
        lowered = key.lower()
        if lowered.startswith("alias."):
            aliased[lowered[len("alias.") :]] = value
        elif value and (lowered in RUNS_NOW or is_program_key(lowered)):
            effects.scripts.append(value)  # the program may run in this very command
    if subcommand not in _BUILTINS:
        alias = _alias(subcommand, rest, here, aliased, after, aliases)
        effects.merge(alias)
        effects.chdir, effects.lost_directory = alias.chdir, alias.lost_directory
        return _from_directory(effects, cwd, place)
    reader = _SUBCOMMANDS.get(subcommand)
    if reader is not None:
        try:
            effects.merge(reader(rest, here))
        except _StaleAnswerError:
            return _unknown(
                f"`git {subcommand}` runs after `{after}` on the same command line: the guard "
                "asks git which files a command changes before anything runs, and the earlier "
                "command changes that answer. Run them as separate commands"
            )
    elif subcommand == "lfs" and rest and rest[0] in _READ_ONLY_LFS:
        pass
    elif subcommand in _UNLISTABLE:
        effects.merge(
            _unknown(
                f"`git {subcommand}` {_UNLISTABLE[subcommand]} into the working tree, "
                "rewriting files the guard cannot list before it runs: lock the files it "
                "will touch, then run it"
            )
        )
    return _from_directory(effects, cwd, place)


def _from_directory(effects: Effects, cwd: str | None, place: Place) -> Effects:
    if cwd != place.cwd and cwd is not None:
        # Paths git reports are relative to `cwd` (-C); make them absolute for the caller.
        effects.files = [os.path.join(cwd, f) for f in effects.files]
        effects.trees = [os.path.join(cwd, t) for t in effects.trees]
        effects.unlisted = [(os.path.join(cwd, d), why) for d, why in effects.unlisted]
    return effects


def _alias(
    name: str,
    rest: list[Arg],
    place: _GitPlace,
    aliased: dict[str, str],
    after: str | None,
    depth: int,
) -> Effects:
    """`git NAME` where NAME is no git command: an alias (from `-c alias.NAME=` or the
    repository's configuration, read without running anything), else an external
    `git-NAME` program (an ordinary command)."""
    if depth > 4:
        return _unknown("`git` aliases nest too deep to follow")
    text = aliased.get(name.lower())
    if text is None:
        if place.cwd is None:
            return _unknown("a `git` alias in a directory only known when it runs")
        found = git_query.git_text(place.cwd, ["config", "--get", f"alias.{name}"])
        text = None if found is None else found.strip()
    if not text:
        return Effects()
    if any(a is None for a in rest):
        return _unknown(f"the `git {name}` alias is given arguments only known when it runs")
    words = [a for a in rest if a is not None]
    if text.startswith("!"):
        # A shell alias runs from the top of the working tree, its arguments appended.
        top = _git(place, ["rev-parse", "--show-toplevel"])
        effects = Effects(scripts=[" ".join([text[1:], *(_quote(w) for w in words)])])
        if top is None:
            effects.lost_directory = True
        else:
            effects.chdir = top.strip()
        return effects
    try:
        expansion: list[Arg] = [*shlex.split(text), *words]
    except ValueError:
        return _unknown(f"the `git {name}` alias cannot be read")
    return git(expansion, place, after=after, aliases=depth + 1)


def _quote(word: str) -> str:
    return shlex.quote(word)


def _config(args: list[Arg], place: Place) -> Effects:
    """`git config KEY VALUE` setting a key that names a program (`core.fsmonitor`, a
    filter, an alias...) makes git run it in every later git command of this checkout, the
    guards' and other agents' included: refused, as is `git config --edit`."""
    options = read_options(
        args,
        short_values="f",
        long_values=frozenset({"--file", "--blob", "--type", "--default", "--comment"}),
    )
    if options.has("-e", "--edit") or options.operands[:1] == ["edit"]:
        return Effects(refused=[_CONFIG_REFUSED.format(what="`git config --edit`")])
    reading = ("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l",
               "--unset", "--unset-all", "--remove-section", "--rename-section",
               "--show-origin", "--show-scope", "--name-only")  # fmt: skip
    operands = options.operands
    if operands[:1] in (["set"],):
        operands = operands[1:]
    elif operands[:1] in _CONFIG_READS or (
        options.has(*reading) and not options.has("--add", "--replace-all")
    ):
        return Effects()
    if len(operands) < 2:
        return Effects()  # reading one key
    key = operands[0]
    if key is None or is_program_key(key.lower()):
        shown = "a key only known when it runs" if key is None else f"`{key}`"
        return Effects(refused=[_CONFIG_REFUSED.format(what=f"setting {shown}")])
    return Effects()


_CONFIG_READS: Final = (["get"], ["list"], ["unset"], ["remove-section"], ["rename-section"])
_CONFIG_REFUSED: Final = (
    "{what} can make git run a program in every later git command of this checkout, other "
    "agents' and lockyard's own included"
)


def _merge_file(args: list[Arg], place: Place) -> Effects:
    """`git merge-file CURRENT BASE OTHER` writes the merge into CURRENT (not with -p)."""
    options = read_options(args, short_values="L", long_values=frozenset({"--marker-size"}))
    if options.has("-p", "--stdout") or not options.operands:
        return Effects()
    current = options.operands[0]
    if current is None:
        return _unknown("`git merge-file` writes a file only known when it runs")
    return Effects(files=[current])


def _worktree(args: list[Arg], place: Place) -> Effects:
    """`git worktree add PATH` checks out a whole tree at PATH; `remove`/`move` delete or
    move one."""
    if not args:
        return Effects()
    action, rest = args[0], args[1:]
    options = read_options(rest, short_values="bB", long_values=frozenset({"--reason", "--orphan"}))
    paths = options.operands
    if action == "add" and paths:
        if paths[0] is None:
            return _unknown("`git worktree add` creates a checkout only known when it runs")
        return Effects(unlisted=[(paths[0], "`git worktree add` checks out a tree there")])
    if action in ("remove", "move") and paths:
        if any(p is None for p in paths):
            return _unknown(f"`git worktree {action}` of a path only known when it runs")
        effects = Effects(trees=[paths[0]] if paths[0] else [])
        if action == "move" and len(paths) > 1 and paths[1]:
            effects.unlisted.append((paths[1], "`git worktree move` moves a checkout there"))
        return effects
    return Effects()


def _clone(args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args,
        short_values="obuc",
        long_values=frozenset(
            {
                "--origin",
                "--branch",
                "--upload-pack",
                "--template",
                "--config",
                "--depth",
                "--reference",
                "--separate-git-dir",
                "--shallow-since",
                "--jobs",
                "--filter",
            }
        ),
    )
    if not options.operands:
        return Effects()
    source = options.operands[0]
    target = options.operands[1] if len(options.operands) > 1 else None
    if target is None:
        if source is None:
            return _unknown("`git clone` creates a directory only known when it runs")
        target = os.path.basename(source.rstrip("/").removesuffix(".git")) or "."
    return Effects(unlisted=[(target, "`git clone` checks out a tree there")])


def _outputs(args: list[Arg], place: Place) -> Effects:
    """`--output=FILE` (diff, log, show), `-o FILE` (archive), `bundle create FILE`,
    `format-patch` (its patch files, in `-o DIR` or here)."""
    effects = Effects()
    for index, arg in enumerate(args):
        if arg is None:
            continue
        if arg.startswith("--output="):
            effects.files.append(arg.partition("=")[2])
        elif arg in ("--output", "-o") and index + 1 < len(args):
            value = args[index + 1]
            if value is None:
                effects.unknown.append("it writes a file only known when it runs")
            else:
                effects.files.append(value)
    return effects


def _archive(args: list[Arg], place: Place) -> Effects:
    return _outputs(args, place)


def _bundle(args: list[Arg], place: Place) -> Effects:
    if args[:1] == ["create"]:
        options = read_options(args[1:])
        if options.operands and options.operands[0] is not None:
            return Effects(files=[options.operands[0]])
        return _unknown("`git bundle create` writes a file only known when it runs")
    return Effects()


def _format_patch(args: list[Arg], place: Place) -> Effects:
    options = read_options(args, short_values="ov", long_values=frozenset({"--output-directory"}))
    if options.has("--stdout"):
        return Effects()
    directories = options.values("-o", "--output-directory")
    where = directories[-1] if directories else "."
    if where is None:
        return _unknown("`git format-patch` writes into a directory only known when it runs")
    return Effects(unlisted=[(where, "`git format-patch` writes one file per commit")])


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
            [
                "stash",
                "show",
                "--no-ext-diff",
                "--no-textconv",
                "--name-only",
                "-z",
                "--include-untracked",
                ref,
            ],
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
    # Working tree against the index: `git status` (which, unlike `git diff`, never writes
    # the index back when it finds stale file times).
    found = _git(
        place, ["status", "--porcelain=v1", "-z", "--untracked-files=no", "--no-renames",
                "--ignore-submodules=all", "--", *specs],
    )  # fmt: skip
    if found is None:
        return _unknown("`git`: git could not list the files it would change here")
    names = [record[3:] for record in found.split("\0") if len(record) > 3 and record[1] != " "]
    effects = _from_root(place, names)
    if revision and not effects.unknown:
        # The index against the revision, then files the revision has and the tree lacks.
        effects.merge(
            _listed(
                place,
                ["diff-index", "--cached", "--name-only", "-z", revision[0], "--", *specs],
                "git",
            )
        )
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
    """Run a read-only git query in the command's directory (the repository's programs
    disabled: `git_query`); its output, or None on failure. Raises _StaleAnswerError when an
    earlier command of the line changes the answer."""
    if isinstance(place, _GitPlace) and place.changed_by is not None:
        raise _StaleAnswerError(place.changed_by)
    if place.cwd is None or not os.path.isdir(place.cwd):
        return None
    return git_query.git_text(place.cwd, query)


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
    "config": _config,
    "merge-file": _merge_file,
    "worktree": _worktree,
    "clone": _clone,
    "archive": _archive,
    "bundle": _bundle,
    "format-patch": _format_patch,
    "diff": _outputs,
    "log": _outputs,
    "show": _outputs,
}
_ASKING: Final = frozenset({"checkout", "restore", "reset", "stash", "apply", "rm", "clean"})
"""Subcommands whose targets the guard asks git for."""
_WRITERS: Final = frozenset(
    {*_ASKING, "switch", "mv", "merge-file", "worktree", "clone", "archive", "bundle",
     "format-patch", *_UNLISTABLE}
)  # fmt: skip
