"""What one command does to files, as the guard reads it (the rules' common result)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

Arg = str | None
"""One argument after expansion; None when its value cannot be known before the command runs."""


@dataclass(frozen=True)
class Feed:
    """What a command reads on its standard input (or from a process substitution)."""

    kind: Literal["none", "text", "file", "unknown"]
    """`none`: nothing the command line gives it; `text`: known text (a here-document, a
    here-string, `echo`/`printf`/`cat` output piped in); `file`: a file's content (`< f`,
    `cat f |`); `unknown`: the output of a command the guard cannot predict."""
    text: str = ""


NO_INPUT: Final = Feed("none")
UNKNOWN_INPUT: Final = Feed("unknown")


@dataclass
class Effects:
    """Paths are relative to the command's directory, or absolute."""

    files: list[str] = field(default_factory=list)
    """Files written, created, truncated, removed or re-moded."""
    trees: list[str] = field(default_factory=list)
    """Directories every file of which is written (`rm -r dir`, `chmod -R`)."""
    copies: list[tuple[str, str]] = field(default_factory=list)
    """(source directory, destination directory): every file of the source lands in the
    destination (`cp -r src dst`)."""
    links: list[tuple[str, str, bool]] = field(default_factory=list)
    """(link, what it leads to, symbolic) created: later writes through the link write that
    file. A symbolic link's target is kept as written (relative to the command's directory):
    it is resolved where it is used, as the kernel does."""
    directories: list[str] = field(default_factory=list)
    """Directories created or removed (`mkdir`, `rmdir`): no file's content changes."""
    unknown: list[str] = field(default_factory=list)
    """What writes somewhere the guard cannot name, each said as the reason."""
    commands: list[list[Arg]] = field(default_factory=list)
    """Commands it runs (`xargs rm`, `find -exec`, `env X=1 sed -i`), judged in turn."""
    scripts: list[str] = field(default_factory=list)
    """Shell text it runs (`bash -c '...'`, `eval`), parsed in turn."""
    sourced: list[str] = field(default_factory=list)
    """Shell text it runs in the current shell (`eval '...'`, `source <(...)`)."""
    unlisted: list[tuple[str, str]] = field(default_factory=list)
    """(directory or name prefix, why): files it creates there whose names cannot be listed
    before it runs (`split f src/part-`, `git worktree add dir`): unknown when inside the
    repository, nobody's business outside it."""
    refused: list[str] = field(default_factory=list)
    """Why it is refused whatever the agent has locked (it frees other agents' locks, or
    makes git run a program): the operator's business."""
    isolated: list[tuple[list[Arg], str]] = field(default_factory=list)
    """(command, why): a command run where paths mean something else (a container, another
    root): undetermined (`why`) if it writes anything at all."""
    assigns: list[str] = field(default_factory=list)
    """Shell variables it sets to values the guard cannot know (`read x`, `printf -v x`)."""
    chdir: str | None = None
    """The directory the nested `commands` run in, when the command sets one (`env -C`)."""
    lost_directory: bool = False
    """The nested commands run in a directory only known when they run (`su -`)."""

    def merge(self, other: Effects) -> None:
        self.files.extend(other.files)
        self.trees.extend(other.trees)
        self.copies.extend(other.copies)
        self.links.extend(other.links)
        self.directories.extend(other.directories)
        self.unknown.extend(other.unknown)
        self.commands.extend(other.commands)
        self.scripts.extend(other.scripts)
        self.sourced.extend(other.sourced)
        self.unlisted.extend(other.unlisted)
        self.refused.extend(other.refused)
        self.isolated.extend(other.isolated)
        self.assigns.extend(other.assigns)


@dataclass
class Options:
    """Options and operands of one command line, read the way getopt reads them."""

    flags: dict[str, list[Arg]] = field(default_factory=dict)
    operands: list[Arg] = field(default_factory=list)

    def has(self, *names: str) -> bool:
        return any(name in self.flags for name in names)

    def values(self, *names: str) -> list[Arg]:
        return [value for name in names for value in self.flags.get(name, [])]


def read_options(
    args: list[Arg],
    *,
    short_values: str = "",
    long_values: frozenset[str] = frozenset(),
    optional_short: str = "",
    stop_at_first_operand: bool = False,
) -> Options:
    """Split `args` into flags and operands.

    `short_values`: letters whose value is the rest of the cluster or the next word
    (`-tDIR`, `-t DIR`); `optional_short`: letters whose value can only be attached (`-i.bak`);
    `long_values`: `--name` options that take a value (`--name=v` or `--name v`).
    """
    options = Options()
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg is None or arg == "-" or not arg.startswith("-"):
            options.operands.append(arg)
            if stop_at_first_operand:
                options.operands.extend(args[index:])
                break
            continue
        if arg == "--":
            options.operands.extend(args[index:])
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if eq:
                options.flags.setdefault(name, []).append(value)
            elif name in long_values and index < len(args):
                options.flags.setdefault(name, []).append(args[index])
                index += 1
            else:
                options.flags.setdefault(name, []).append("")
            continue
        for position in range(1, len(arg)):
            letter = arg[position]
            rest = arg[position + 1 :]
            if letter in short_values:
                if rest:
                    options.flags.setdefault("-" + letter, []).append(rest)
                elif index < len(args):
                    options.flags.setdefault("-" + letter, []).append(args[index])
                    index += 1
                else:
                    options.flags.setdefault("-" + letter, []).append(None)
                break
            if letter in optional_short:
                options.flags.setdefault("-" + letter, []).append(rest)
                break
            options.flags.setdefault("-" + letter, []).append("")
    return options
