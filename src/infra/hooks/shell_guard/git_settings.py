"""Git settings and variables that make git run a program, and what the guard makes of them.

A configuration key such as `core.fsmonitor`, `filter.<driver>.clean` or `alias.<name>`
names a program git runs; so do variables such as `GIT_EXTERNAL_DIFF` or `GIT_SSH_COMMAND`.
`git config` setting such a key is refused (every later git command of the checkout would run
it); `git -c KEY=TEXT` and `VAR=TEXT git ...` run TEXT now, so it is judged as a command.
Variables that point git elsewhere (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_CONFIG_*`) make the
command undetermined.
"""

from __future__ import annotations

from typing import Final

from .effects import Arg, Effects

_PROGRAM_KEYS: Final = (
    "core.fsmonitor", "core.hookspath", "core.sshcommand", "core.editor", "core.pager",
    "core.askpass", "core.gitproxy", "core.attributesfile", "core.worktree",
    "diff.external", "credential.helper", "gpg.program", "sequence.editor",
    "interactive.difffilter", "include.path", "uploadpack.packobjectshook", "web.browser",
    "merge.tool", "diff.tool", "core.fsmonitorhookversion",
)  # fmt: skip
_PROGRAM_PATTERNS: Final = (
    ("filter.", (".clean", ".smudge", ".process")),
    ("diff.", (".textconv", ".command")),
    ("merge.", (".driver",)),
    ("alias.", ("",)),
    ("credential.", (".helper",)),
    ("gpg.", (".program",)),
    ("pager.", ("",)),
    ("includeif.", (".path",)),
    ("remote.", (".uploadpack", ".receivepack", ".proxy")),
    ("browser.", (".cmd", ".path")),
    ("man.", (".cmd", ".path")),
    ("difftool.", (".cmd", ".path")),
    ("mergetool.", (".cmd", ".path")),
    ("submodule.", (".update",)),
    ("hook.", (".command",)),
    ("trailer.", (".command", ".cmd")),
)
RUNS_NOW: Final = frozenset(
    {"core.fsmonitor", "core.sshcommand", "core.editor", "core.pager", "core.askpass",
     "diff.external", "sequence.editor", "core.gitproxy", "gpg.program"}
)  # fmt: skip
"""Program settings a `git -c KEY=TEXT` command may run right away: TEXT is judged."""
_GIT_ENV_PROGRAMS: Final = frozenset(
    {"GIT_EXTERNAL_DIFF", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER", "GIT_SSH",
     "GIT_SSH_COMMAND", "GIT_ASKPASS", "GIT_PROXY_COMMAND", "EDITOR", "VISUAL", "PAGER"}
)  # fmt: skip
_GIT_ENV_PLACES: Final = frozenset(
    {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_EXEC_PATH", "GIT_CONFIG",
     "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
     "GIT_TEMPLATE_DIR", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_ATTR_SOURCE"}
)  # fmt: skip


def is_program_key(key: str) -> bool:
    """Whether the (lower-case) configuration key names a program git runs."""
    if key in _PROGRAM_KEYS:
        return True
    return any(
        key.startswith(prefix) and any(key.endswith(end) for end in ends)
        for prefix, ends in _PROGRAM_PATTERNS
    )


def git_environment(name: str, value: Arg) -> Effects:
    """A variable given to git (`GIT_EXTERNAL_DIFF=cmd git diff`): a program it may run now,
    or a place it reads that the guard does not follow."""
    if name in _GIT_ENV_PROGRAMS:
        if value is None:
            return Effects(unknown=[f"`{name}` names a program only known when it runs"])
        return Effects(scripts=[value]) if value else Effects()
    if name in _GIT_ENV_PLACES or name.startswith("GIT_CONFIG_"):
        return Effects(
            unknown=[
                f"`{name}` points git at files the guard does not follow: run git inside the "
                "repository without it"
            ]
        )
    return Effects()


def git_variables(names: list[str]) -> list[str]:
    """The names among `names` that change what a git command does or runs."""
    return [
        n
        for n in names
        if n in _GIT_ENV_PROGRAMS or n in _GIT_ENV_PLACES or n.startswith("GIT_CONFIG_")
    ]
