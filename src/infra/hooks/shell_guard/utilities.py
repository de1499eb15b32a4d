"""What the common file utilities write, read from their arguments.

One rule per command name: it gets the arguments (after expansion; None where unknown) and
the directory the command runs in, and returns `Effects`. Commands without a rule are
ordinary commands: not known to write into the tree (the commit guard stays the backstop).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from .effects import NO_INPUT, Arg, Effects, Feed, Options, read_options
from .git_settings import git_environment, git_variables
from .script_writes import ScriptWrites, awk_writes, sed_writes

STDIN_NAMES: Final = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})
"""Script operands that make an interpreter read its program from its input."""


@dataclass(frozen=True)
class Place:
    """Where a command runs; `cwd` None when an earlier `cd` went somewhere unknown."""

    cwd: str | None
    home: str | None = None
    stdin: Feed = NO_INPUT
    """What the command reads on its input."""
    feeds: Mapping[str, Feed] = field(default_factory=dict)
    """The content of its process substitutions, by the name it sees (`/dev/fd/63`)."""

    def is_dir(self, path: str) -> bool:
        full = (
            path
            if os.path.isabs(path)
            else None
            if self.cwd is None
            else os.path.join(self.cwd, path)
        )
        return full is not None and os.path.isdir(full)


Rule = Callable[[list[Arg], Place], Effects]


def program_input(operands: list[Arg], place: Place) -> Feed | None:
    """Where an interpreter given `operands` reads its program: its input (no operand, `-`,
    `/dev/stdin`), a process substitution (`bash <(...)`), or None for a script file (an
    ordinary command: a program that writes by itself)."""
    if not operands or operands[0] in STDIN_NAMES:
        return place.stdin
    first = operands[0]
    if first is not None and first in place.feeds:
        return place.feeds[first]
    return None


def unreadable_program(name: str) -> str:
    return (
        f"`{name}` runs a program it reads from its input or a process substitution, the "
        "output of a command the guard cannot predict (write the code in the command, in a "
        "quoted here-document, or in a file)"
    )


def _unknown(reason: str) -> Effects:
    return Effects(unknown=[reason])


def add_operand_files(
    name: str, operands: list[Arg], effects: Effects, *, trees: bool = False
) -> None:
    """Record the files (or, with `trees`, the whole trees) that command `name` writes."""
    for operand in operands:
        if operand is None:
            effects.unknown.append(f"`{name}` is given a file name that is only known when it runs")
        elif trees:
            effects.trees.append(operand)
        else:
            effects.files.append(operand)


def _all_operands(options: Options) -> list[Arg]:
    return options.operands


def _writes_named_files(
    name: str,
    short_values: str = "",
    long_values: frozenset[str] = frozenset(),
    *,
    files: Callable[[Options], list[Arg]] = _all_operands,
) -> Rule:
    """The rule of a command whose only writes are files its arguments name: `files` picks
    them from the parsed options (default: every operand); `name` is how a write that is only
    known at run time is reported."""

    def rule(args: list[Arg], place: Place) -> Effects:
        options = read_options(args, short_values=short_values, long_values=long_values)
        effects = Effects()
        add_operand_files(name, files(options), effects)
        return effects

    return rule


# -- copying, moving, linking -------------------------------------------------------------------

_CP_VALUES: Final = "tS"
_CP_LONG: Final = frozenset({"--target-directory", "--suffix", "--backup", "--sparse", "--reflink"})


def _copy_like(
    name: str, args: list[Arg], place: Place, *, moves: bool, short_values: str
) -> Effects:
    options = read_options(args, short_values=short_values, long_values=_CP_LONG)
    effects = Effects()
    recursive = moves or options.has("-r", "-R", "-a", "--recursive", "--archive")
    targets = options.values("-t", "--target-directory")
    operands = options.operands
    if targets:
        destination, sources = targets[-1], operands
        into_directory = True
    elif len(operands) >= 2:
        destination, sources = operands[-1], operands[:-1]
        into_directory = len(sources) > 1 or (
            destination is not None
            and not options.has("-T", "--no-target-directory")
            and place.is_dir(destination)
        )
    else:
        return effects  # the command itself will fail: nothing to copy
    if destination is None:
        return _unknown(f"`{name}` writes to a destination that is only known when it runs")
    for source in sources:
        if source is None:
            effects.unknown.append(f"`{name}` is given a source that is only known when it runs")
            if not into_directory:
                effects.files.append(destination)
            continue
        if moves:
            (effects.trees if place.is_dir(source) else effects.files).append(source)
        landing = (
            os.path.join(destination, os.path.basename(source.rstrip("/")))
            if into_directory
            else destination
        )
        if recursive and place.is_dir(source):
            effects.copies.append((source, landing))
        else:
            effects.files.append(landing)
    return effects


def cp(args: list[Arg], place: Place) -> Effects:
    return _copy_like("cp", args, place, moves=False, short_values=_CP_VALUES)


def mv(args: list[Arg], place: Place) -> Effects:
    return _copy_like("mv", args, place, moves=True, short_values=_CP_VALUES)


def install(args: list[Arg], place: Place) -> Effects:
    options = read_options(args, short_values="tSmogZ", long_values=frozenset(
        {"--target-directory", "--suffix", "--mode", "--owner", "--group",
         "--backup"}))  # fmt: skip
    if options.has("-d", "--directory"):
        effects = Effects()
        for operand in options.operands:
            if operand is None:
                effects.unknown.append("`install -d` creates a directory only known when it runs")
            else:
                effects.directories.append(operand)
        return effects
    return _copy_like("install", args, place, moves=False, short_values="tSmogZ")


def ln(args: list[Arg], place: Place) -> Effects:
    """The link written, and the file it leads to: a later write through the link (in the same
    command line) writes that file."""
    options = read_options(
        args, short_values="tS", long_values=frozenset({"--target-directory", "--suffix"})
    )
    targets = options.values("-t", "--target-directory")
    operands = options.operands
    symbolic = options.has("-s", "--symbolic")
    effects = Effects()
    if targets:
        directory, sources = targets[-1], operands
    elif len(operands) == 1:
        directory, sources = ".", operands
    elif len(operands) >= 2 and (
        len(operands) > 2
        or (
            operands[-1] is not None
            and place.is_dir(operands[-1])
            and not options.has("-T", "-n", "--no-dereference")
        )
    ):
        directory, sources = operands[-1], operands[:-1]
    elif len(operands) == 2:
        source, link = operands
        add_operand_files("ln", [link], effects)
        if source is not None and link is not None:
            effects.links.append((link, _link_target(source, link, symbolic), symbolic))
        return effects
    else:
        return effects
    for source in sources:
        if source is None or directory is None:
            effects.unknown.append("`ln` creates a link whose name is only known when it runs")
        else:
            link = os.path.join(directory, os.path.basename(source.rstrip("/")))
            effects.files.append(link)
            effects.links.append((link, _link_target(source, link, symbolic), symbolic))
    return effects


def _link_target(source: str, link: str, symbolic: bool) -> str:
    """The file a link leads to, relative to the command's directory (a relative symlink
    target is read from the link's own directory)."""
    if symbolic and not os.path.isabs(source):
        return os.path.join(os.path.dirname(link), source)
    return source


# -- removing, creating, changing ---------------------------------------------------------------


def rm(args: list[Arg], place: Place) -> Effects:
    options = read_options(args)
    effects = Effects()
    recursive = options.has("-r", "-R", "--recursive")
    add_operand_files("rm", options.operands, effects, trees=recursive)
    return effects


def rmdir(args: list[Arg], place: Place) -> Effects:
    effects = Effects()
    for operand in read_options(args).operands:
        if operand is not None:
            effects.directories.append(operand)
    return effects


def mkdir(args: list[Arg], place: Place) -> Effects:
    options = read_options(args, short_values="mZ", long_values=frozenset({"--mode", "--context"}))
    effects = Effects()
    for operand in options.operands:
        if operand is None:
            effects.unknown.append("`mkdir` creates a directory only known when it runs")
        else:
            effects.directories.append(operand)
    return effects


touch = _writes_named_files("touch", "dtr", frozenset({"--date", "--reference", "--time"}))
truncate = _writes_named_files("truncate", "sr", frozenset({"--size", "--reference"}))
tee = _writes_named_files("tee")


def dd(args: list[Arg], place: Place) -> Effects:
    effects = Effects()
    for arg in args:
        if arg is None:
            effects.unknown.append("`dd` is given an operand that is only known when it runs")
        elif arg.startswith("of="):
            effects.files.append(arg[3:])
    return effects


def _mode_changer(name: str, *, first_is_setting: bool = True) -> Rule:
    def rule(args: list[Arg], place: Place) -> Effects:
        options = read_options(args, long_values=frozenset({"--reference", "--from"}))
        operands = options.operands
        if first_is_setting and not options.has("--reference"):
            operands = operands[1:]
        effects = Effects()
        add_operand_files(name, operands, effects, trees=options.has("-R", "--recursive"))
        return effects

    return rule


shred = _writes_named_files("shred", "ns", frozenset({"--iterations", "--size", "--random-source"}))
sort = _writes_named_files("sort -o", "koStT", frozenset(
    {"--key", "--output", "--field-separator", "--buffer-size", "--temporary-directory",
     "--parallel", "--batch-size", "--compress-program", "--files0-from", "--random-source"}),
    files=lambda options: options.values("-o", "--output"),
)  # fmt: skip
uniq = _writes_named_files(
    "uniq",
    "fsw",
    frozenset({"--skip-fields", "--skip-chars", "--check-chars", "--group", "--all-repeated"}),
    files=lambda options: options.operands[1:2],  # uniq INPUT OUTPUT: only OUTPUT is written
)


def curl(args: list[Arg], place: Place) -> Effects:
    effects = Effects()
    for index, arg in enumerate(args):
        following = args[index + 1] if index + 1 < len(args) else None
        if arg is None:
            continue
        if arg == "--output":
            add_operand_files("curl -o", [following], effects)
        elif arg.startswith("--output="):
            effects.files.append(arg.partition("=")[2])
        elif arg in ("--remote-name", "--remote-name-all"):
            effects.unknown.append("`curl -O` names its output file after the URL: use -o FILE")
        elif arg.startswith("-") and not arg.startswith("--"):
            letters = arg[1:]
            if "o" in letters:  # -o FILE, -sSo FILE, -oFILE
                value = letters[letters.index("o") + 1 :]
                add_operand_files("curl -o", [value or following], effects)
            elif "O" in letters:
                effects.unknown.append("`curl -O` names its output file after the URL: use -o FILE")
    return effects


def wget(args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args,
        short_values="OoaPe",
        long_values=frozenset({"--output-document", "--directory-prefix", "--output-file"}),
    )
    effects = Effects()
    documents = options.values("-O", "--output-document")
    if documents:
        add_operand_files("wget -O", [d for d in documents if d != "-"], effects)
    elif options.operands:
        effects.unknown.append("`wget` names its output file after the URL: pass -O FILE")
    return effects


def patch(args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args,
        short_values="pdiBoDrFVYzgsxe",
        long_values=frozenset({"--input", "--output", "--directory", "--strip"}),
    )
    effects = Effects()
    if options.operands:
        add_operand_files("patch", options.operands[:1], effects)
    else:
        effects.unknown.append(
            "`patch` writes the files named inside the patch: apply it with `git apply` "
            "(which the guard can read) or name the file to patch"
        )
    add_operand_files("patch -o", options.values("-o", "--output"), effects)
    return effects


def sponge(args: list[Arg], place: Place) -> Effects:
    """`... | sponge FILE`: soaks up the input, then writes FILE (`-a` appends)."""
    effects = Effects()
    add_operand_files("sponge", read_options(args).operands[:1], effects)
    return effects


def split(args: list[Arg], place: Place) -> Effects:
    """`split [INPUT [PREFIX]]` / `csplit -f PREFIX`: files named PREFIXaa, PREFIXab... (or
    xx00...), as many as the input needs: their names cannot be listed ahead."""
    options = read_options(
        args,
        short_values="abCdelnt",
        long_values=frozenset(
            {
                "--suffix-length",
                "--additional-suffix",
                "--bytes",
                "--line-bytes",
                "--lines",
                "--number",
                "--separator",
                "--filter",
            }
        ),
    )
    if options.has("--filter"):
        return _unknown("`split --filter` runs a command the guard does not follow")
    prefix = options.operands[1] if len(options.operands) > 1 else "x"
    if prefix is None:
        return _unknown("`split` writes files whose prefix is only known when it runs")
    return Effects(unlisted=[(prefix, f"`split` writes files named {prefix}aa, {prefix}ab...")])


def csplit(args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args, short_values="bfn", long_values=frozenset({"--suffix-format", "--prefix", "--digits"})
    )
    prefixes = options.values("-f", "--prefix")
    prefix = prefixes[-1] if prefixes else "xx"
    if prefix is None:
        return _unknown("`csplit` writes files whose prefix is only known when it runs")
    return Effects(unlisted=[(prefix, f"`csplit` writes files named {prefix}00, {prefix}01...")])


fallocate = _writes_named_files("fallocate", "lo", frozenset({"--length", "--offset"}))
mkfifo = _writes_named_files("mkfifo", "mZ", frozenset({"--mode", "--context"}))
mknod = _writes_named_files(
    "mknod", "mZ", frozenset({"--mode", "--context"}), files=lambda o: o.operands[:1]
)
iconv = _writes_named_files(
    "iconv -o", "oft", frozenset({"--output", "--from-code", "--to-code"}),
    files=lambda options: options.values("-o", "--output"),
)  # fmt: skip
shuf = _writes_named_files(
    "shuf -o", "oinz", frozenset({"--output", "--input-range", "--head-count", "--random-source"}),
    files=lambda options: options.values("-o", "--output"),
)  # fmt: skip
dos2unix = _writes_named_files(
    "dos2unix", "cf", frozenset({"--convmode", "--add-bom"}),
    files=lambda options: (
        options.operands[1::2] if options.has("-n", "--newfile") else options.operands
    ),
)  # fmt: skip


_SQLITE_VALUES: Final = frozenset(
    {"-cmd", "-init", "-separator", "-newline", "-nullvalue", "-escape", "-lookaside",
     "-maxsize", "-mmap", "-pagecache", "-vfs", "-heap"}
)  # fmt: skip
_SQLITE_ESCAPES: Final = (
    ".shell", ".system", ".output", ".once", ".save", ".backup", ".excel", ".log", ".trace",
    ".clone", ".open", ".read", ".import", "load_extension", "writefile", "edit(",
)  # fmt: skip


def sqlite3(args: list[Arg], place: Place) -> Effects:
    """`sqlite3 DB [SQL]` may write DB (not with `-readonly`, nor an in-memory database);
    dot-commands that write other files or run programs (`.shell`, `.output`) are
    undetermined."""
    operands: list[Arg] = []
    texts: list[Arg] = []
    readonly = False
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg in _SQLITE_VALUES:
            texts.append(args[index] if index < len(args) else None)
            index += 1
        elif arg is not None and arg.startswith("-"):
            readonly = readonly or arg in ("-readonly", "--readonly")
        else:
            operands.append(arg)
    texts.extend(operands[1:])
    if place.stdin.kind in ("text", "unknown"):
        texts.append(place.stdin.text if place.stdin.kind == "text" else None)
    effects = Effects()
    if any(t is None or any(e in t for e in _SQLITE_ESCAPES) for t in texts):
        effects.unknown.append(
            "`sqlite3` is given commands that may write other files or run programs"
        )
    if operands and not readonly and operands[0] != ":memory:":
        add_operand_files("sqlite3", operands[:1], effects)
    return effects


def mktemp(args: list[Arg], place: Place) -> Effects:
    """`mktemp src/tmp.XXXXXX` (or `-p DIR`) creates a file with a random name there; plain
    `mktemp` creates it in the temporary directory, outside the repository."""
    options = read_options(args, short_values="p", long_values=frozenset({"--tmpdir", "--suffix"}))
    if options.has("-u", "--dry-run", "-d", "--directory"):
        return Effects()
    where = options.values("-p", "--tmpdir")
    template = options.operands[0] if options.operands else None
    if where and where[-1]:
        return Effects(unlisted=[(where[-1], "`mktemp` creates a file with a random name there")])
    if template is not None and "/" in template:
        directory = os.path.dirname(template)
        return Effects(unlisted=[(directory, "`mktemp` creates a file with a random name there")])
    if template is not None and not options.has("-t"):
        return Effects(unlisted=[(".", "`mktemp` creates a file with a random name there")])
    return Effects()


def sd(args: list[Arg], place: Place) -> Effects:
    """`sd FIND REPLACE FILES...` edits the files in place (not with `-p`)."""
    options = read_options(
        args, short_values="fn", long_values=frozenset({"--flags", "--max-replacements"})
    )
    if options.has("-p", "--preview"):
        return Effects()
    effects = Effects()
    add_operand_files("sd", options.operands[2:], effects)
    return effects


def yq(args: list[Arg], place: Place) -> Effects:
    """`yq -i EXPRESSION FILE...` edits the files in place."""
    options = read_options(
        args,
        short_values="pojIsc",
        long_values=frozenset({"--input-format", "--output-format", "--indent", "--expression",
                               "--split-exp", "--from-file", "--front-matter"}),
    )  # fmt: skip
    if not options.has("-i", "--inplace"):
        return Effects()
    effects = Effects()
    expression_given = options.has("--expression", "--from-file")
    add_operand_files(
        "yq -i", options.operands if expression_given else options.operands[1:], effects
    )
    return effects


def rename(args: list[Arg], place: Place) -> Effects:
    """`rename EXPR FILES...` gives the files new names the guard does not compute."""
    options = read_options(args)
    if options.has("-n", "--no-act", "-h", "--help", "-V", "--version"):
        return Effects()
    effects = Effects()
    add_operand_files("rename", options.operands[1:], effects)
    effects.unknown.append(
        "`rename` gives files new names the guard does not compute: use `mv OLD NEW`"
    )
    return effects


_RSYNC_VALUES: Final = "efTBM"
_RSYNC_LONG: Final = frozenset(
    {"--rsh", "--exclude", "--include", "--filter", "--files-from", "--exclude-from",
     "--include-from", "--backup-dir", "--suffix", "--chmod", "--chown", "--usermap",
     "--groupmap", "--compare-dest", "--copy-dest", "--link-dest", "--partial-dir",
     "--temp-dir", "--log-file", "--password-file", "--rsync-path", "--block-size",
     "--max-size", "--min-size", "--timeout", "--contimeout", "--port", "--bwlimit", "--info",
     "--debug", "--remote-option", "--out-format", "--log-file-format", "--iconv",
     "--checksum-choice", "--compress-choice", "--max-delete", "--modify-window", "--sockopts",
     "--outbuf", "--protocol", "--stop-after", "--stop-at", "--skip-compress", "--address",
     "--write-batch", "--only-write-batch", "--read-batch", "--mkpath-mode"}
)  # fmt: skip


def rsync(args: list[Arg], place: Place) -> Effects:
    """`rsync SRC... DEST`, locally: like `cp -r` (a source ending in `/` copies its contents);
    `--delete` may remove any file of DEST; `--remove-source-files` removes the sources. A
    remote side (`host:path`) is not this repository."""
    options = read_options(args, short_values=_RSYNC_VALUES, long_values=_RSYNC_LONG)
    effects = Effects()
    if options.has("-e", "--rsh", "--rsync-path"):
        effects.unknown.append("`rsync -e` runs a program the guard does not follow")
    for log in options.values("--log-file", "--write-batch", "--only-write-batch"):
        add_operand_files("rsync --log-file", [log], effects)
    operands = options.operands
    if len(operands) < 2:
        return effects
    destination, sources = operands[-1], operands[:-1]
    if destination is None or any(s is None for s in sources):
        effects.unknown.append("`rsync` copies paths only known when it runs")
        return effects
    local = [s for s in sources if s is not None and not _remote(s)]
    if options.has("--remove-source-files"):
        effects.trees.extend(local)
    if _remote(destination):
        return effects
    if any(
        o.startswith("--delete") or o in ("--del", "--remove-sent-files") for o in options.flags
    ):
        effects.trees.append(destination)
    into = len(sources) > 1 or destination.endswith("/") or place.is_dir(destination)
    for source in local:
        contents = source.endswith("/")
        landing = destination if contents or not into else os.path.join(
            destination, os.path.basename(source.rstrip("/"))
        )  # fmt: skip
        if place.is_dir(source):
            effects.copies.append((source, landing))
        else:
            effects.files.append(landing)
    if any(_remote(s) for s in sources if s is not None):
        effects.unlisted.append((destination, "`rsync` copies remote files there"))
    return effects


def _remote(path: str) -> bool:
    head = path.split("/", 1)[0]
    return path.startswith("rsync://") or (":" in head and not head.startswith("."))


# -- in-place editors ---------------------------------------------------------------------------


def sed(args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args,
        short_values="efl",
        optional_short="i",
        long_values=frozenset({"--expression", "--file", "--line-length"}),
    )
    given = options.has("-e", "-f", "--expression", "--file")
    effects = Effects()
    if not options.has("--sandbox"):  # (which makes sed refuse `w`, `r` and `e`)
        scripts = options.values("-e", "--expression") if given else options.operands[:1]
        _script_effects("sed", sed_writes, scripts, effects)
    suffixes = options.values("-i", "--in-place")
    if not suffixes:
        return effects
    files = options.operands if given else options.operands[1:]
    add_operand_files("sed -i", files, effects)
    add_backups(files, suffixes, effects)
    return effects


def _script_effects(
    name: str, read: Callable[[str], ScriptWrites], scripts: list[Arg], effects: Effects
) -> None:
    """What the `scripts` of a sed or awk command (read by `read`) write and run."""
    for script in scripts:
        if script is None:
            effects.unknown.append(f"its {name} script is only known when it runs")
            continue
        found = read(script)
        effects.files.extend(found.files)
        effects.scripts.extend(found.commands)
        effects.unknown.extend(found.unknown)


def add_backups(files: list[Arg], suffixes: list[Arg], effects: Effects) -> None:
    """`sed -i.bak` / `perl -i.orig` also write a backup beside each file."""
    suffix = suffixes[-1]
    if not suffix:
        return
    for name in files:
        if name is None:
            continue
        directory, base = os.path.split(name)
        backup = suffix.replace("*", base) if "*" in suffix else base + suffix
        effects.files.append(backup if "/" in backup else os.path.join(directory, backup))


def gawk(args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args,
        short_values="fvFiEle",
        long_values=frozenset(
            {"--file", "--assign", "--field-separator", "--include", "--exec", "--load",
             "--source"}
        ),
    )  # fmt: skip
    given = options.has("-f", "--file", "-E", "--exec", "-e", "--source")
    effects = Effects()
    if not options.has("-S", "--sandbox"):  # (gawk's sandbox refuses redirections, system)
        programs = options.values("-e", "--source") if given else options.operands[:1]
        _script_effects("awk", awk_writes, programs, effects)
    if "inplace" not in options.values("-i", "--include"):
        return effects
    files = options.operands if given else options.operands[1:]
    add_operand_files("gawk -i inplace", [f for f in files if f is None or "=" not in f], effects)
    return effects


# -- commands that run other commands ----------------------------------------------------------


def _run_rest(rest: list[Arg]) -> Effects:
    return Effects(commands=[rest]) if rest else Effects()


def env(args: list[Arg], place: Place) -> Effects:
    index = 0
    chdir: str | None = None
    while index < len(args):
        arg = args[index]
        if arg is None:
            return _unknown("`env` is given an argument that is only known when it runs")
        if arg in ("-u", "--unset", "-C", "--chdir", "-S", "--split-string"):
            value = args[index + 1] if index + 1 < len(args) else None
            if arg in ("-C", "--chdir"):
                if value is None:
                    return _unknown("`env -C` changes to a directory only known when it runs")
                chdir = value
            if arg in ("-S", "--split-string"):
                return (
                    Effects(scripts=[value])
                    if value is not None
                    else _unknown("`env -S` runs a command only known when it runs")
                )
            index += 2
        elif arg.startswith("--chdir="):
            chdir = arg.partition("=")[2]
            index += 1
        elif arg.startswith("-") or ("=" in arg and arg.partition("=")[0].isidentifier()):
            index += 1
        else:
            break
    effects = _run_rest(args[index:])
    effects.chdir = chdir
    rest = args[index:]
    if rest and rest[0] is not None and os.path.basename(rest[0]) == "git":
        given = dict(
            a.partition("=")[::2] for a in args[:index] if a is not None and "=" in a
        )  # `env GIT_EXTERNAL_DIFF=cmd git diff`
        for name in git_variables(list(given)):
            effects.merge(git_environment(name, given[name]))
    return effects


def _skip_options(
    values: str, long_values: frozenset[str] = frozenset(), operands_before: int = 0
) -> Rule:
    """A wrapper (`sudo`, `nice`, `timeout 5`): the command after its own options runs."""

    def rule(args: list[Arg], place: Place) -> Effects:
        options = read_options(
            args, short_values=values, long_values=long_values, stop_at_first_operand=True
        )
        return _run_rest(options.operands[operands_before:])

    return rule


def command(args: list[Arg], place: Place) -> Effects:
    options = read_options(args, stop_at_first_operand=True)
    if options.has("-v", "-V"):
        return Effects()  # only looks the name up
    return _run_rest(options.operands)


def xargs(args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args,
        short_values="ILnPdEsa",
        optional_short="ile",
        long_values=frozenset(
            {
                "--arg-file",
                "--delimiter",
                "--max-args",
                "--max-procs",
                "--max-lines",
                "--replace",
                "--eof",
                "--max-chars",
                "--process-slot-var",
            }
        ),
        stop_at_first_operand=True,
    )
    rest = options.operands or ["echo"]
    replace = options.values("-I", "-i", "--replace")
    items = _xargs_items(options, place)
    if replace:
        token = replace[-1] or "{}"
        if items is None:  # substituted by xargs from its input: unknown here
            return _run_rest([None if arg is not None and token in arg else arg for arg in rest])
        lines = [item.strip() for item in items]
        return Effects(
            commands=[
                [arg.replace(token, line) if arg is not None else None for arg in rest]
                for line in lines[:_MAX_XARGS_ITEMS]
                if line
            ]
        )
    if items is None:
        return _run_rest([*rest, None])  # xargs appends what it reads to the command
    if len(items) > _MAX_XARGS_ITEMS:
        return _run_rest([*rest, None])
    return _run_rest([*rest, *items]) if items or not options.has("-r") else Effects()


_MAX_XARGS_ITEMS: Final = 256


def _xargs_items(options: Options, place: Place) -> list[str] | None:
    """The arguments xargs reads from its input when the guard knows that text (`echo a b |
    xargs rm`); None otherwise. With `-I` each line is one item."""
    if options.has("-a", "--arg-file") or place.stdin.kind != "text":
        return None
    text = place.stdin.text
    if options.has("-I", "-i", "--replace", "-L", "--max-lines"):
        return text.splitlines()
    if options.has("-0", "--null"):
        return [item for item in text.split("\0") if item]
    delimiters = options.values("-d", "--delimiter")
    if delimiters:
        delimiter = (delimiters[-1] or "\n").replace("\\n", "\n")
        return [item for item in text.split(delimiter) if item]
    try:
        return shlex.split(
            text
        )  # blanks separate items; quotes and backslashes as xargs reads them
    except ValueError:
        return None


def find(args: list[Arg], place: Place) -> Effects:
    effects = Effects()
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            end = index
            while end < len(args) and args[end] not in (";", "+"):
                end += 1
            nested = [
                None if part is not None and "{}" in part else part for part in args[index:end]
            ]
            if nested:
                effects.commands.append(nested)
            index = end + 1
        elif arg == "-delete":
            effects.unknown.append(
                "`find -delete` removes files the guard cannot list before it runs: list them "
                "first and `rm` them by name"
            )
        elif arg in ("-fprint", "-fprint0", "-fls", "-fprintf") and index < len(args):
            add_operand_files("find " + arg, [args[index]], effects)
            index += 2 if arg == "-fprintf" else 1
    return effects


_SHELL_VALUE_OPTIONS: Final = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def shell(args: list[Arg], place: Place) -> Effects:
    """`bash -c 'text'`: the text is parsed in turn; so is a program read from the input
    (`bash <<EOF`, `... | sh`, `bash -s`) or a process substitution (`bash <(...)`).
    `bash script.sh` is an ordinary command."""
    index = 0
    runs_string = False
    reads_input = False
    while index < len(args):
        arg = args[index]
        if arg is None or not arg.startswith(("-", "+")) or arg in ("-", "--"):
            if arg == "--":
                index += 1
            break
        index += 2 if arg in _SHELL_VALUE_OPTIONS else 1
        if not arg.startswith("--") and "c" in arg[1:]:
            runs_string = True
        if not arg.startswith("--") and "s" in arg[1:]:
            reads_input = True
    if not runs_string:
        feed = place.stdin if reads_input else program_input(args[index:], place)
        return shell_program("sh", feed)
    text = args[index] if index < len(args) else None
    if text is None:
        return _unknown(
            "`sh -c` runs a command string that is only known when it runs "
            "(write the command itself)"
        )
    return Effects(scripts=[text])


def shell_program(name: str, feed: Feed | None) -> Effects:
    """A shell program read from `feed` (None: a script file, an ordinary command)."""
    if feed is None or feed.kind in ("none", "file"):
        return Effects()
    if feed.kind == "unknown":
        return _unknown(unreadable_program(name))
    return Effects(scripts=[feed.text])


def eval_(args: list[Arg], place: Place) -> Effects:
    if any(arg is None for arg in args):
        return _unknown(
            "`eval` runs text that is only known when it runs (write the command itself)"
        )
    return Effects(sourced=[" ".join(arg for arg in args if arg is not None)])


def source(args: list[Arg], place: Place) -> Effects:
    """`source FILE` / `. FILE`: a program read from a process substitution or the input runs
    in the current shell; a file is a script (not followed, like `bash script.sh`)."""
    if not args:
        return Effects()  # bash refuses `source` without a file
    feed = program_input(args[:1], place)
    if feed is None or feed.kind in ("none", "file"):
        return Effects()
    if feed.kind == "unknown":
        return _unknown(unreadable_program("source"))
    return Effects(sourced=[feed.text])


def flock(args: list[Arg], place: Place) -> Effects:
    """`flock [options] FILE command...` or `flock [options] FILE -c 'text'`: flock reads its
    options before the file only, and `-c` only right after it; a `-c` further on belongs to
    the command (`flock F taskset -c 0 rm x` runs `taskset -c 0 rm x`)."""
    options = read_options(
        args,
        short_values="wE",
        long_values=frozenset({"--timeout", "--wait", "--conflict-exit-code"}),
        stop_at_first_operand=True,
    )
    after_file = options.operands[1:]
    if after_file[:1] == ["-c"] or after_file[:1] == ["--command"]:
        text = after_file[1] if len(after_file) > 1 else None
        if text is None:
            return _unknown("`flock -c` runs a command only known when it runs")
        return Effects(scripts=[text])
    return _run_rest(after_file)


_UV_RUN_VALUES: Final = frozenset(
    {"--with", "--with-editable", "--with-requirements", "--python", "-p", "--directory",
     "--project", "--extra", "--group", "--only-group", "--env-file", "--index", "--package",
     "--from", "--default-index", "--index-url", "--extra-index-url", "-w"}
)  # fmt: skip


def _runner(*subcommands: str, values: frozenset[str] = frozenset()) -> Rule:
    """Project runners (`uv run`, `uv tool run`, `poetry run`, `npx`, `uvx`): the tool they
    run, judged by its own rule (`uv run ruff format src` is `ruff format src`).
    `subcommands` are the words that run a tool ("run", "tool run"); none: it always does."""

    def rule(args: list[Arg], place: Place) -> Effects:
        rest = args
        if subcommands:
            words = next(
                (w.split() for w in subcommands if rest[: len(w.split())] == w.split()), None
            )
            if words is None:
                return Effects()
            rest = rest[len(words) :]
        index = 0
        while index < len(rest):
            arg = rest[index]
            if arg is None or not arg.startswith("-"):
                break
            if arg == "--":
                index += 1
                break
            index += 2 if arg in values and "=" not in arg else 1
        return _run_rest(rest[index:])

    return rule


RULES: Final[dict[str, Rule]] = {
    "uv": _runner("run", "tool run", values=_UV_RUN_VALUES),
    "uvx": _runner(values=_UV_RUN_VALUES),
    "poetry": _runner("run"),
    "pipenv": _runner("run"),
    "pdm": _runner("run"),
    "hatch": _runner("run"),
    "npx": _runner(values=frozenset({"--package", "-p"})),
    "bunx": _runner(),
    "pnpm": _runner("exec", "dlx"),
    "cp": cp,
    "mv": mv,
    "install": install,
    "ln": ln,
    "rm": rm,
    "unlink": rm,
    "rmdir": rmdir,
    "mkdir": mkdir,
    "touch": touch,
    "truncate": truncate,
    "tee": tee,
    "dd": dd,
    "chmod": _mode_changer("chmod"),
    "chown": _mode_changer("chown"),
    "chgrp": _mode_changer("chgrp"),
    "shred": shred,
    "sort": sort,
    "uniq": uniq,
    "curl": curl,
    "wget": wget,
    "patch": patch,
    "sed": sed,
    "gsed": sed,
    "gawk": gawk,
    "awk": gawk,
    "env": env,
    "nice": _skip_options("n", frozenset({"--adjustment"})),
    "ionice": _skip_options("cnp", frozenset({"--class", "--classdata", "--pid"})),
    "timeout": _skip_options("sk", frozenset({"--signal", "--kill-after"}), operands_before=1),
    "stdbuf": _skip_options("ioe", frozenset({"--input", "--output", "--error"})),
    "chronic": _skip_options(""),
    "exec": _skip_options("a"),
    "builtin": _skip_options(""),
    "command": command,
    "xargs": xargs,
    "find": find,
    "bash": shell,
    "sh": shell,
    "dash": shell,
    "zsh": shell,
    "ksh": shell,
    "eval": eval_,
    "source": source,
    ".": source,
    "flock": flock,
    "sponge": sponge,
    "split": split,
    "csplit": csplit,
    "fallocate": fallocate,
    "mkfifo": mkfifo,
    "mknod": mknod,
    "iconv": iconv,
    "shuf": shuf,
    "dos2unix": dos2unix,
    "unix2dos": dos2unix,
    "mac2unix": dos2unix,
    "sqlite3": sqlite3,
    "mktemp": mktemp,
    "sd": sd,
    "yq": yq,
    "rename": rename,
    "rsync": rsync,
}
