"""What one command does to files, as the guard reads it (the rules' common result)."""

from __future__ import annotations

from dataclasses import dataclass, field

Arg = str | None
"""One argument after expansion; None when its value cannot be known before the command runs."""


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
    links: list[tuple[str, str]] = field(default_factory=list)
    """(link, the file it leads to) created: later writes through the link write that file."""
    directories: list[str] = field(default_factory=list)
    """Directories created or removed (`mkdir`, `rmdir`): no file's content changes."""
    unknown: list[str] = field(default_factory=list)
    """What writes somewhere the guard cannot name, each said as the reason."""
    commands: list[list[Arg]] = field(default_factory=list)
    """Commands it runs (`xargs rm`, `find -exec`, `env X=1 sed -i`), judged in turn."""
    scripts: list[str] = field(default_factory=list)
    """Shell text it runs (`bash -c '...'`, `eval`), parsed in turn."""
    chdir: str | None = None
    """The directory the nested `commands` run in, when the command sets one (`env -C`)."""

    def merge(self, other: Effects) -> None:
        self.files.extend(other.files)
        self.trees.extend(other.trees)
        self.copies.extend(other.copies)
        self.links.extend(other.links)
        self.directories.extend(other.directories)
        self.unknown.extend(other.unknown)
        self.commands.extend(other.commands)
        self.scripts.extend(other.scripts)


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
