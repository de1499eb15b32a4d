"""Interpreter programs (`python -c`, `node -e`, `perl -e`/`-i`, `ruby -e`, and the same
interpreters reading their program from the input or a process substitution): what they
write.

Python code is read by `python_code` (Python's own parser). For node, perl and ruby the code
is searched for their file-writing calls; when one is present, every path-like string literal
in the code is a target (and with none, the target is unknown); code that evaluates text, loads
modules by computed names or shells out is unknown. `perl -i` edits its file operands in place,
like `sed -i`. Codex's `apply_patch` sent through the shell writes the files its patch names.
"""

from __future__ import annotations

import os
import re
from typing import Final

from ..patch_paths import patch_targets
from .effects import Arg, Effects, Feed, read_options
from .python_code import read_python
from .utilities import Place, add_backups, add_operand_files, program_input, unreadable_program


def python(args: list[Arg], place: Place) -> Effects:
    """`python -c CODE` is read; so is a program on the input (`python3 - <<EOF`, `... |
    python3`) or in a process substitution; `python -m TOOL ...` is judged as `TOOL ...` (so
    `python -m black src` is the formatter); a script is an ordinary command."""
    mode, value, rest = _python_options(args)
    if mode == "-m":
        return Effects(commands=[[value, *rest]])
    if mode == "-c":
        if value is None:
            return Effects(unknown=["`python -c` runs code that is only known when it runs"])
        return read_python(value, ["-c", *rest])
    program = _program(program_input(rest, place), "python")
    if isinstance(program, Effects):
        return program
    return read_python(program, rest or [""])


def _python_options(args: list[Arg]) -> tuple[str, Arg, list[Arg]]:
    """Python's own options end at `-c CODE`, `-m MODULE` or the first operand (the script,
    `-`): everything after belongs to the program. Returns `-c`, `-m` or `` with the code or
    module and the program's arguments (for a script: the script first)."""
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg is None or arg == "-" or not arg.startswith("-"):
            return "", None, args[index - 1 :]
        if arg == "--":
            break
        if arg.startswith("--"):
            if arg == "--check-hash-based-pycs":
                index += 1
            continue
        for position in range(1, len(arg)):
            letter, attached = arg[position], arg[position + 1 :]
            if letter in "cm":
                if attached:
                    return "-" + letter, attached, args[index:]
                if index < len(args):
                    return "-" + letter, args[index], args[index + 1 :]
                return "", None, []  # python refuses a -c or -m without its argument
            if letter in "WX":
                index += 0 if attached else 1
                break
    return "", None, args[index:]


_COMPUTED = (
    "`{name}` writes to a path computed at run time (write the path literally, or lock the "
    "files and use a command the guard can read)"
)


def _program(feed: Feed | None, name: str) -> str | Effects:
    """The program text an interpreter reads from `feed`, or the effects when it is no text
    (nothing, a script file: an ordinary command; unknown: undetermined)."""
    if feed is None or feed.kind in ("none", "file"):
        return Effects()
    if feed.kind == "unknown":
        return Effects(unknown=[unreadable_program(name)])
    return feed.text


def apply_patch(args: list[Arg], place: Place) -> Effects:
    """Codex's `apply_patch` (the patch as its argument or on its input): the files it adds,
    updates, deletes or moves to, as the patch tool's own call is judged."""
    if args:
        if args[0] is None:
            return Effects(unknown=["`apply_patch` applies a patch only known when it runs"])
        text = args[0]
    else:
        found = _program(place.stdin, "apply_patch")
        if isinstance(found, Effects):
            return found
        text = found
    targets = patch_targets(text)
    if not targets and "*** " in text:
        return Effects(unknown=["`apply_patch`: the patch names no file the guard can read"])
    return Effects(files=targets)


# -- node, perl, ruby --------------------------------------------------------------------------

_NODE_WRITES: Final = (
    "writeFile",
    "appendFile",
    "createWriteStream",
    "unlink",
    "rename",
    "copyFile",
    "truncate",
    "rmSync",
    "fs.rm(",
    "cpSync",
    "chmod",
    "symlink",
    "openSync",
    "fs.open",
    "rmdir",
    "link",
    "cp(",
    "mkdtemp",
    "writeSync",
    "writev",
    "chown",
    "utimes",
    "fchmod",
    "ftruncate",
    "outputFile",
    "outputJson",
    "writeJson",
    "ensureFile",
    "emptyDir",
    "remove(",
    "removeSync",
    "move(",
    "moveSync",
    "copy(",
    "copySync",
)
_RUBY_WRITES: Final = (
    "File.write",
    "IO.write",
    "File.open",
    "FileUtils",
    "File.delete",
    "File.unlink",
    "File.rename",
    "File.truncate",
    "File.chmod",
    "File.new",
    "File.binwrite",
    "IO.binwrite",
    "File.symlink",
    "File.link",
    "File.chown",
    "File.utime",
    "Pathname",
    "Dir.mkdir",
    "Dir.rmdir",
)
_PERL_WRITES: Final = ("open", "unlink", "rename", "truncate", "chmod", "sysopen")
_SHELL_OUTS: Final = {
    "node": ("execSync", "spawnSync", "exec(", "spawn(", "execFile", "child_process", "fork("),
    "ruby": ("system", "`", "%x", "exec", "spawn", "Open3", "IO.popen", "fork"),
    "perl": ("system", "`", "qx", "exec", "open3", "open2", "fork"),
}
_DYNAMIC: Final = {
    "node": re.compile(
        r"\beval\s*\(|\bFunction\s*\(|\bimport\s*\(|\brequire\s*\(\s*[^'\"`\s]|\bvm\.|"
        r"process\.(binding|dlopen)|\bReflect\.|\bglobalThis\s*\[|\bglobal\s*\[|"
        r"require\([^)]*\)\s*\[|\bconstructor\b|\bworker_threads\b"
    ),
    "ruby": re.compile(
        r"\beval\b|\binstance_eval\b|\bclass_eval\b|\bmodule_eval\b|\bsend\s*\(|"
        r"\bpublic_send\b|\bmethod\s*\(|\bconst_get\b|\bKernel\.|\bbinding\b|\bload\b|"
        r"\brequire\s*\(?\s*[^'\"\s]"
    ),
    "perl": re.compile(
        r"\beval\b|\bdo\s+['\"$]|\brequire\s+\$|&\$|&\{|->\$|\*\{|\bsyscall\b|->can\b|"
        r"\bno\s+strict\b"
    ),
}
_PERL_WRITE_CALLS: Final = re.compile(
    r"\b(unlink|rename|truncate|chmod|chown|sysopen|utime|link|symlink|copy|move|cp|mv|"
    r"rmtree|remove_tree|mkpath|make_path|write_file|append_file|edit_file|edit_file_lines|"
    r"spew\w*|append\w*|touch)\b"
)
_STRING: Final = re.compile(r"""'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|`((?:[^`\\]|\\.)*)`""")
_PERL_MODE: Final = re.compile(r"\s*(\+?[<>]{1,2}|-\||\|-)(:\S*)?\s*")
_FILE_NAME: Final = re.compile(r"[\w.-]*\.[A-Za-z0-9_-]+")
_NOT_PATHS: Final = frozenset(
    {
        "w",
        "a",
        "r",
        "wb",
        "ab",
        "rb",
        "w+",
        "a+",
        "r+",
        "utf8",
        "utf-8",
        "UTF-8",
        "ascii",
        "binary",
        "latin1",
    }
)


def node(args: list[Arg], place: Place) -> Effects:
    effects = _scripted("node", args, place, ("-e", "--eval", "-p", "--print"), _NODE_WRITES)
    return _whole_directories(effects, place)


def ruby(args: list[Arg], place: Place) -> Effects:
    effects = _scripted("ruby", args, place, ("-e",), _RUBY_WRITES)
    options = read_options(args, short_values="eIrCEFKT", optional_short="i")
    suffixes = options.values("-i")
    if suffixes:  # ruby -i -pe: in place, like perl -i
        files = options.operands if options.has("-e") else options.operands[1:]
        add_operand_files("ruby -i", files, effects)
        add_backups(files, suffixes, effects)
    return _whole_directories(effects, place)


def perl(args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args, short_values="eEIMmlx0", optional_short="i", long_values=frozenset()
    )
    codes = options.values("-e", "-E")
    effects = Effects()
    suffixes = options.values("-i")
    if suffixes:
        files = options.operands if codes else options.operands[1:]
        add_operand_files("perl -i", files, effects)
        add_backups(files, suffixes, effects)
    for code in codes:
        effects.merge(_search("perl", code, _PERL_WRITES))
    if not codes:
        found = _program(program_input(options.operands, place), "perl")
        effects.merge(found if isinstance(found, Effects) else _search("perl", found, _PERL_WRITES))
    return _whole_directories(effects, place)


def _whole_directories(effects: Effects, place: Place) -> Effects:
    """A directory named in a program that writes (`remove_tree("src/pkg")`, `fs.rmSync(dir,
    {recursive: true})`) may have every file under it written."""
    directories = [path for path in effects.files if place.is_dir(path)]
    if directories:
        effects.files = [path for path in effects.files if path not in directories]
        effects.trees.extend(directories)
    return effects


def _scripted(
    name: str, args: list[Arg], place: Place, code_options: tuple[str, ...], writes: tuple[str, ...]
) -> Effects:
    effects = Effects()
    operands: list[Arg] = []
    ran_code = False
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in code_options and index + 1 < len(args):
            effects.merge(_search(name, args[index + 1], writes))
            ran_code = True
            index += 2
            continue
        if arg is None or not arg.startswith("-") or arg == "-":
            operands = args[index:]
            break
        index += 1
    if not ran_code:
        found = _program(program_input(operands, place), name)
        effects.merge(found if isinstance(found, Effects) else _search(name, found, writes))
    return effects


def _search(name: str, code: Arg, writes: tuple[str, ...]) -> Effects:
    if code is None:
        return Effects(unknown=[f"`{name}` runs code that is only known when it runs"])
    if _DYNAMIC[name].search(code) or (name == "node" and _computed_fs_member(code)):
        return Effects(
            unknown=[
                f"this `{name}` program evaluates code or loads modules by computed names, "
                "which the guard cannot follow: write plain calls with literal paths"
            ]
        )
    if any(call in code for call in _SHELL_OUTS[name]):
        return Effects(
            unknown=[
                f"this `{name}` one-liner runs shell commands the guard cannot read: "
                "run them as shell commands instead"
            ]
        )
    if name == "perl":
        return _perl_search(code)
    if not any(re.search(rf"\b{re.escape(call)}", code) for call in writes):
        return Effects()
    paths = [text for text in _literals(code) if _looks_like_path(text)]
    if not paths:
        return Effects(unknown=[_COMPUTED.format(name=f"{name} -e")])
    return Effects(files=paths)


_NODE_FS: Final = re.compile(
    r"""require\(\s*['"](node:)?(fs|fs/promises|fs-extra|graceful-fs)['"]|from\s+['"](node:)?fs"""
    r"""|\bfs\.|\bprocess\.mainModule"""
)
_COMPUTED_MEMBER: Final = re.compile(r"[\w)\]]\s*\[(?!\s*\d+\s*\])")


def _computed_fs_member(code: str) -> bool:
    """`fs[name]`: a file-system call whose name is computed (`f['unl' + 'inkSync']`)."""
    return _NODE_FS.search(code) is not None and _COMPUTED_MEMBER.search(code) is not None


def _perl_search(code: str) -> Effects:
    """perl's `open` writes only with a `>`/`+<` mode (`open(F, ">f")`, `open($f, ">", "f")`);
    `unlink`, `rename`, `truncate`, `chmod`, `sysopen` write their path arguments."""
    files: list[str] = []
    writes = False
    following: str | None = None  # "write" / "read": what the literal after a bare mode is
    others: list[str] = []
    for text in _literals(code):
        mode = _PERL_MODE.fullmatch(text)
        if mode is not None:
            following = "write" if ">" in text or text.strip().startswith("+") else "read"
            writes = writes or following == "write"
            continue
        if following is not None:
            if following == "write" and _looks_like_path(text):
                files.append(text)
            following = None
            continue
        stripped = text.strip()
        if stripped.startswith((">", "+<", "+>")):
            writes = True
            target = stripped.lstrip("+<>").strip()
            if _looks_like_path(target):
                files.append(target)
        elif _looks_like_path(text):
            others.append(text)
    if _PERL_WRITE_CALLS.search(code):
        writes = True
        files.extend(others)
    if writes and not files:
        return Effects(unknown=[_COMPUTED.format(name="perl -e")])
    return Effects(files=files)


def _literals(code: str) -> list[str]:
    return [
        next(group for group in match.groups() if group is not None)
        for match in _STRING.finditer(code)
    ]


def _looks_like_path(text: str) -> bool:
    """A string literal that names a file: a slash, or a name with an extension, and no
    spaces or interpolation (content such as "x" or module names such as "fs" are not)."""
    if not text or text in _NOT_PATHS or any(c.isspace() for c in text) or "$" in text:
        return False
    return "/" in text or _FILE_NAME.fullmatch(text) is not None


def is_python(name: str) -> bool:
    base = os.path.basename(name)
    return base.startswith("python") and _PYTHON.fullmatch(base) is not None


_PYTHON: Final = re.compile(r"python(\d+(\.\d+)?)?")


RULES: Final = {
    "node": node,
    "nodejs": node,
    "ruby": ruby,
    "perl": perl,
    "apply_patch": apply_patch,
    "applypatch": apply_patch,
}
