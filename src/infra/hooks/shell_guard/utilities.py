"""What the common file utilities write, read from their arguments.

One rule per command name: it gets the arguments (after expansion; None where unknown) and
the directory the command runs in, and returns `Effects`. Commands without a rule are
ordinary commands: not known to write into the tree (the commit guard stays the backstop).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .effects import Arg, Effects, Options, read_options


@dataclass(frozen=True)
class Place:
    """Where a command runs; `cwd` None when an earlier `cd` went somewhere unknown."""

    cwd: str | None
    home: str | None = None

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


def _unknown(reason: str) -> Effects:
    return Effects(unknown=[reason])


def _operand_files(
    name: str, operands: list[Arg], effects: Effects, *, trees: bool = False
) -> None:
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
        _operand_files(name, files(options), effects)
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
        _operand_files("ln", [link], effects)
        if source is not None and link is not None:
            effects.links.append((link, _link_target(source, link, symbolic)))
        return effects
    else:
        return effects
    for source in sources:
        if source is None or directory is None:
            effects.unknown.append("`ln` creates a link whose name is only known when it runs")
        else:
            link = os.path.join(directory, os.path.basename(source.rstrip("/")))
            effects.files.append(link)
            effects.links.append((link, _link_target(source, link, symbolic)))
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
    _operand_files("rm", options.operands, effects, trees=recursive)
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
        _operand_files(name, operands, effects, trees=options.has("-R", "--recursive"))
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
            _operand_files("curl -o", [following], effects)
        elif arg.startswith("--output="):
            effects.files.append(arg.partition("=")[2])
        elif arg in ("--remote-name", "--remote-name-all"):
            effects.unknown.append("`curl -O` names its output file after the URL: use -o FILE")
        elif arg.startswith("-") and not arg.startswith("--"):
            letters = arg[1:]
            if "o" in letters:  # -o FILE, -sSo FILE, -oFILE
                value = letters[letters.index("o") + 1 :]
                _operand_files("curl -o", [value or following], effects)
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
        _operand_files("wget -O", [d for d in documents if d != "-"], effects)
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
        _operand_files("patch", options.operands[:1], effects)
    else:
        effects.unknown.append(
            "`patch` writes the files named inside the patch: apply it with `git apply` "
            "(which the guard can read) or name the file to patch"
        )
    _operand_files("patch -o", options.values("-o", "--output"), effects)
    return effects


# -- in-place editors ---------------------------------------------------------------------------


def sed(args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args,
        short_values="efl",
        optional_short="i",
        long_values=frozenset({"--expression", "--file", "--line-length"}),
    )
    suffixes = options.values("-i", "--in-place")
    if not suffixes:
        return Effects()
    files = (
        options.operands
        if options.has("-e", "-f", "--expression", "--file")
        else options.operands[1:]
    )
    effects = Effects()
    _operand_files("sed -i", files, effects)
    _backups(files, suffixes, effects)
    return effects


def _backups(files: list[Arg], suffixes: list[Arg], effects: Effects) -> None:
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
        short_values="fvFiEl",
        long_values=frozenset(
            {"--file", "--assign", "--field-separator", "--include", "--exec", "--load"}
        ),
    )
    if "inplace" not in options.values("-i", "--include"):
        return Effects()
    files = (
        options.operands if options.has("-f", "--file", "-E", "--exec") else options.operands[1:]
    )
    effects = Effects()
    _operand_files("gawk -i inplace", [f for f in files if f is None or "=" not in f], effects)
    return effects


ed = _writes_named_files(
    "ed",
    "p",
    frozenset({"--prompt"}),
    files=lambda options: [o for o in options.operands if o is None or not o.startswith("+")],
)


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
    if replace:
        token = replace[-1] or "{}"
        # The replacement is substituted by xargs from its input: unknown here.
        return _run_rest([None if arg is not None and token in arg else arg for arg in rest])
    return _run_rest([*rest, None])  # xargs appends what it reads to the command


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
            _operand_files("find " + arg, [args[index]], effects)
            index += 2 if arg == "-fprintf" else 1
    return effects


_SHELL_VALUE_OPTIONS: Final = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def shell(args: list[Arg], place: Place) -> Effects:
    """`bash -c 'text'`: the text is parsed in turn. `bash script.sh` is an ordinary command."""
    index = 0
    runs_string = False
    while index < len(args):
        arg = args[index]
        if arg is None or not arg.startswith(("-", "+")) or arg in ("-", "--"):
            break
        index += 2 if arg in _SHELL_VALUE_OPTIONS else 1
        if not arg.startswith("--") and "c" in arg[1:]:
            runs_string = True
    if not runs_string:
        return Effects()
    text = args[index] if index < len(args) else None
    if text is None:
        return _unknown(
            "`sh -c` runs a command string that is only known when it runs "
            "(write the command itself)"
        )
    return Effects(scripts=[text])


def eval_(args: list[Arg], place: Place) -> Effects:
    if any(arg is None for arg in args):
        return _unknown(
            "`eval` runs text that is only known when it runs (write the command itself)"
        )
    return Effects(scripts=[" ".join(arg for arg in args if arg is not None)])


def flock(args: list[Arg], place: Place) -> Effects:
    """`flock FILE -c 'text'` or `flock FILE command...` (options may follow the file)."""
    for index, arg in enumerate(args):
        if arg in ("-c", "--command"):
            text = args[index + 1] if index + 1 < len(args) else None
            if text is None:
                return _unknown("`flock -c` runs a command only known when it runs")
            return Effects(scripts=[text])
    options = read_options(
        args,
        short_values="wE",
        long_values=frozenset({"--timeout", "--conflict-exit-code"}),
        stop_at_first_operand=True,
    )
    return _run_rest(options.operands[1:])


def ex(args: list[Arg], place: Place) -> Effects:
    """`ex`/`vim -e` style editors: every file operand may be written."""
    options = read_options(args, short_values="cSuUTiwWrt", long_values=frozenset({"--cmd"}))
    effects = Effects()
    _operand_files(
        "ex", [o for o in options.operands if o is None or not o.startswith("+")], effects
    )
    return effects


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
    "ed": ed,
    "ex": ex,
    "env": env,
    "sudo": _skip_options(
        "ugpCDhrtUT",
        frozenset({"--user", "--group", "--prompt", "--close-from", "--chdir", "--host"}),
    ),
    "doas": _skip_options("uC"),
    "nice": _skip_options("n", frozenset({"--adjustment"})),
    "ionice": _skip_options("cnp", frozenset({"--class", "--classdata", "--pid"})),
    "nohup": _skip_options(""),
    "time": _skip_options("fo", frozenset({"--format", "--output"})),
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
    "flock": flock,
}
