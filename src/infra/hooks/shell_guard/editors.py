"""`vim`, `vi`, `nvim`, `ex`: editors that can run without a terminal (`vim -es -c ... -c wq F`).

Every file operand may be written. Their commands (`-c CMD`, `+CMD`, `--cmd CMD`) are read:
a command that writes another file (`w other`, `saveas f`) adds it; one that runs shell
commands or scripts (`!`, `r !cmd`, `source`, `py3`, `call system()`, `redir`), or a script
file (`-s`, `-S`, `-u`), makes the editor undetermined.
"""

from __future__ import annotations

import re
from typing import Final

from .effects import Arg, Effects, read_options
from .utilities import Place, Rule

_VALUES: Final = "cSuUTiwWrtsq"
_LONG: Final = frozenset({"--cmd", "--servername", "--startuptime", "--remote", "--listen"})
_FILE_COMMANDS: Final = re.compile(
    r"\s*(?:\d+|%|'[a-z<>]|,)*\s*(w|write|wq|x|xit|exi|exit|up|update|sav|saveas|e|edit|sp|"
    r"split|vs|vsplit|new|vnew|tabe|tabedit|tabnew|badd|argadd|arga|f|file)!?\s+(>>\s*)?(\S+)\s*$"
)
_RANGE = r"(?:[\d%.$]|'[a-z<>]|[,;+-]|/[^/]*/|\?[^?]*\?)*"
_PLAIN: Final = re.compile(
    rf"\s*{_RANGE}\s*(?:w|write|wq|x|xit|q|quit|qa|qall|wa|wall|wqa|wqall|xa|xall|up|update|"
    r"s|substitute|&&?|~|g|global|v|vglobal|d|delete|m|move|t|co|copy|j|join|norm|normal|se|set|"
    r"setl|setlocal|retab|le|left|ri|right|ce|center|sor|sort|noh|nohlsearch|undo|u|redo|red|y|"
    r"yank|pu|put|>|<|a|append|i|insert|c|change|argdo|bufdo|windo|tabdo|cdo|ldo|cfdo|lfdo|"
    r"syntax|filetype)?(?![A-Za-z])"
)
_RUNS: Final = re.compile(
    r"!|\b(so|source|runtime|py|python|py3|python3|pyx|pythonx|lua|luafile|perl|ruby|tcl|"
    r"mzscheme|call|exe|execute|redir|mksession|mks|mkview|mkvimrc|mkexrc|wv|wviminfo|"
    r"wsh|wshada|terminal|term|make|grep|vimgrep|cscope|sh|shell|!)\b|system\s*\(|"
    r"/\s*w(rite)?!?\s+\S"
)


def vim(args: list[Arg], place: Place) -> Effects:
    return _editor(args, place, ex=False)


def ex(args: list[Arg], place: Place) -> Effects:
    return _editor(args, place, ex=True)


def _editor(args: list[Arg], place: Place, *, ex: bool) -> Effects:
    ex_mode = ex or any(
        a is not None and a.startswith("-") and not a.startswith("--") and set(a[1:]) & {"e", "E"}
        for a in args
    )
    # In Ex mode (`-e`, `-es`) `-s` is the silent flag, not a script to read.
    values = _VALUES.replace("s", "") if ex_mode else _VALUES
    options = read_options(args, short_values=values, long_values=_LONG)
    effects = Effects()
    commands = [*options.values("-c", "--cmd")]
    files: list[Arg] = []
    for operand in options.operands:
        if operand is not None and operand.startswith("+"):
            commands.append(operand[1:])
        else:
            files.append(operand)
    for name in files:
        if name is None:
            effects.unknown.append("the editor is given a file only known when it runs")
        elif name != "-":
            effects.files.append(name)
    scripts = options.values("-S", "-u", "-U") + ([] if ex_mode else options.values("-s"))
    if any(script not in ("NONE", "NORC", "DEFAULTS") for script in scripts):
        effects.unknown.append(
            "the editor runs a script file (`-s`, `-S`, `-u`) the guard does not read"
        )
    effects.files.extend(w for w in options.values("-w", "-W") if w)
    for command in commands:
        _command(command, effects)
    if ex_mode and place.stdin.kind == "text":  # ex -s file <<EOF: commands on the input
        for line in place.stdin.text.splitlines():
            _command(line, effects)
    elif ex_mode and place.stdin.kind == "unknown":
        effects.unknown.append(
            "the editor reads commands from its input, which the guard cannot read"
        )
    return effects


def _command(command: Arg, effects: Effects) -> None:
    if command is None:
        effects.unknown.append("the editor runs a command only known when it runs")
        return
    for part in command.split("|"):
        if not part.strip():
            continue
        text = part.rstrip().lstrip(" \t:")
        found = _FILE_COMMANDS.match(text)
        if found is not None and not _RUNS.search(found.group(3)):
            effects.files.append(found.group(3))
            continue
        bare = re.sub(r"(?<=[wqax])!\s*$", "", text)  # wq!, q!, x!: no shell
        plain = _PLAIN.match(text)
        if _RUNS.search(bare) or plain is None or not plain.group(0).strip():
            effects.unknown.append(
                f"the editor command `{part.strip()}` may run other programs or write other "
                "files: edit with sed, or name the files it writes"
            )
            return


_ED_WRITE: Final = re.compile(r"\s*[\d,.$;'a-z+-]*\s*(w|W|wq)\b")
_ED_FILES: Final = re.compile(r"\s*[\d,.$;'a-z+-]*\s*(?:w|W|wq|e|E|f)\s+(?!!)(\S+)\s*$")


def ed(args: list[Arg], place: Place) -> Effects:
    """`ed FILE <<EOF ... w EOF`: the file, and files its commands on the input write; a
    shell escape (`!cmd`) is undetermined."""
    options = read_options(args, short_values="p", long_values=frozenset({"--prompt"}))
    effects = Effects()
    # With its commands known, ed writes its file only if one of them is a write.
    lines = place.stdin.text.splitlines() if place.stdin.kind == "text" else []
    writes = place.stdin.kind != "text" or any(_ED_WRITE.match(line) for line in lines)
    for name in options.operands:
        if name is None:
            effects.unknown.append("`ed` is given a file only known when it runs")
        elif name.startswith("!"):
            effects.scripts.append(name[1:])  # ed !cmd reads the command's output
        elif not name.startswith("+") and writes:
            effects.files.append(name)
    if place.stdin.kind == "unknown":
        effects.unknown.append("`ed` reads commands from its input, which the guard cannot read")
    for line in lines:
        found = _ED_FILES.match(line)
        if found is not None:
            effects.files.append(found.group(1))
        elif "!" in line:
            effects.unknown.append(f"the `ed` command `{line.strip()}` runs a shell command")
            break
    return effects


RULES: Final[dict[str, Rule]] = {
    **dict.fromkeys(
        ("vim", "vi", "nvim", "gvim", "evim", "rvim", "view", "vimdiff", "vim.basic",
         "vim.tiny", "nvi", "elvis"),
        vim,
    ),
    "ex": ex,
    "ed": ed,
    "red": ed,
}  # fmt: skip
