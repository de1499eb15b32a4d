"""Interpreter one-liners (`python -c`, `node -e`, `perl -e`/`-i`, `ruby -e`): what they write.

Python code is read with Python's own parser (`ast`): calls that open a file for writing
(`open(p, "w")`, `Path(p).write_text`, `os.remove`, `shutil.copy`...) name their targets, and a
target computed at run time makes the one-liner unknown. `os.system("...")` and
`subprocess.run([...])` with literal commands are judged as shell commands in turn.

For node, perl and ruby the code is searched for their file-writing calls; when one is
present, every path-like string literal in the code is a target (and with none, the target is
unknown). `perl -i` edits its file operands in place, like `sed -i`.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Final

from .effects import Arg, Effects, read_options
from .utilities import Place, _backups, _operand_files

_WRITE_MODES: Final = frozenset("wax+")
_PY_FIRST_ARG: Final = frozenset(
    {"os.remove", "os.unlink", "os.truncate", "os.chmod", "os.chown", "os.utime", "os.mkfifo",
     "os.lchmod", "os.lchown"}
)  # fmt: skip
_PY_BOTH_ARGS: Final = frozenset({"os.rename", "os.replace", "os.renames", "shutil.move"})
_PY_SECOND_ARG: Final = frozenset(
    {"os.link", "os.symlink", "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copymode",
     "shutil.copystat"}
)  # fmt: skip
_PY_TREES: Final = frozenset({"shutil.rmtree", "os.removedirs"})
_PY_DIRS: Final = frozenset({"os.mkdir", "os.makedirs", "os.rmdir"})
_PATH_WRITES: Final = frozenset(
    {"write_text", "write_bytes", "touch", "unlink", "chmod", "lchmod", "symlink_to",
     "hardlink_to"}
)  # fmt: skip
_PATH_MOVES: Final = frozenset({"rename", "replace"})
_PATH_DIRS: Final = frozenset({"mkdir", "rmdir"})
_SHELL_CALLS: Final = frozenset(
    {"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput"}
)
_PROCESS_CALLS: Final = frozenset(
    {"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
     "subprocess.Popen", "os.execvp", "os.spawnlp"}
)  # fmt: skip
_COMPUTED = (
    "`{name}` writes to a path computed at run time (write the path literally, or lock the "
    "files and use a command the guard can read)"
)


# -- python ------------------------------------------------------------------------------------


def python(args: list[Arg], place: Place) -> Effects:
    """`python -c CODE` is read; `python -m TOOL ...` is judged as `TOOL ...` (so `python -m
    black src` is the formatter); a script is an ordinary command."""
    module_at = next((i for i, arg in enumerate(args) if arg == "-m"), None)
    if module_at is not None and module_at + 1 < len(args) and "-c" not in args[:module_at]:
        return Effects(commands=[args[module_at + 1 :]])
    options = read_options(args, short_values="cmWXQ", stop_at_first_operand=True)
    codes = options.values("-c")
    if not codes:
        return Effects()  # a script or module: an ordinary command
    code = codes[-1]
    if code is None:
        return Effects(unknown=["`python -c` runs code that is only known when it runs"])
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return Effects()  # python refuses it before running anything
    return _PythonReader(tree).effects


class _PythonReader(ast.NodeVisitor):
    def __init__(self, tree: ast.AST) -> None:
        self.effects = Effects()
        self.names: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
                if (
                    isinstance(target, ast.Name)
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    self.names[target.id] = value.value
        self.visit(tree)

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        name = _dotted(node.func)
        args = node.args
        if name in ("open", "io.open", "codecs.open"):
            mode = self._mode(node)
            if mode is None or set(mode) & _WRITE_MODES:
                self._target(args[0] if args else _keyword(node, "file"), name)
        elif name in _PY_FIRST_ARG:
            self._target(args[0] if args else None, name)
        elif name in _PY_BOTH_ARGS:
            for arg in args[:2]:
                self._target(arg, name)
        elif name in _PY_SECOND_ARG:
            self._target(args[1] if len(args) > 1 else None, name)
        elif name in _PY_TREES:
            self._target(args[0] if args else None, name, tree=True)
        elif name in _PY_DIRS:
            path = self._path(args[0]) if args else None
            if path is not None:
                self.effects.directories.append(path)
        elif name == "shutil.copytree" and len(args) > 1:
            source, destination = self._path(args[0]), self._path(args[1])
            if source is None or destination is None:
                self.effects.unknown.append(_COMPUTED.format(name=name))
            else:
                self.effects.copies.append((source, destination))
        elif name in _SHELL_CALLS:
            text = self._path(args[0]) if args else None
            if text is None:
                self.effects.unknown.append(f"`{name}` runs a command computed at run time")
            else:
                self.effects.scripts.append(text)
        elif name in _PROCESS_CALLS:
            self._process(node, name)
        elif isinstance(node.func, ast.Attribute):
            self._path_method(node, node.func)

    def _path_method(self, node: ast.Call, func: ast.Attribute) -> None:
        receiver = func.value
        if not (
            isinstance(receiver, ast.Call)
            and _dotted(receiver.func) in ("Path", "pathlib.Path", "PurePath")
        ):
            return
        path_arg = receiver.args[0] if receiver.args else None
        if func.attr in _PATH_WRITES:
            self._target(path_arg, "Path." + func.attr)
        elif func.attr in _PATH_MOVES:
            self._target(path_arg, "Path." + func.attr)
            self._target(node.args[0] if node.args else None, "Path." + func.attr)
        elif func.attr in _PATH_DIRS:
            path = self._path(path_arg) if path_arg is not None else None
            if path is not None:
                self.effects.directories.append(path)
        elif func.attr == "open":
            mode = self._mode(node, position=0)
            if mode is None or set(mode) & _WRITE_MODES:
                self._target(path_arg, "Path.open")

    def _process(self, node: ast.Call, name: str) -> None:
        command = node.args[0] if node.args else _keyword(node, "args")
        shell = _keyword(node, "shell")
        if isinstance(command, ast.List | ast.Tuple):
            parts = [self._path(element) for element in command.elts]
            self.effects.commands.append(parts)
        elif (
            command is not None
            and isinstance(shell, ast.Constant)
            and shell.value is True
            and self._path(command) is not None
        ):
            self.effects.scripts.append(self._path(command) or "")
        else:
            self.effects.unknown.append(f"`{name}` runs a command computed at run time")

    def _mode(self, node: ast.Call, position: int = 1) -> str | None:
        """The open mode; "r" when not given; None when computed."""
        value = node.args[position] if len(node.args) > position else _keyword(node, "mode")
        if value is None:
            return "r"
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
        return None

    def _path(self, node: ast.expr | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if (
            isinstance(node, ast.Call)
            and _dotted(node.func) in ("Path", "pathlib.Path")
            and len(node.args) == 1
        ):
            return self._path(node.args[0])
        return None

    def _target(self, node: ast.expr | None, name: str, tree: bool = False) -> None:
        path = self._path(node)
        if path is None:
            self.effects.unknown.append(_COMPUTED.format(name=name))
        elif tree:
            self.effects.trees.append(path)
        else:
            self.effects.files.append(path)


def _keyword(node: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in node.keywords if k.arg == name), None)


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


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
)
_PERL_WRITES: Final = ("open", "unlink", "rename", "truncate", "chmod", "sysopen")
_SHELL_OUTS: Final = {
    "node": ("execSync", "spawnSync", "exec(", "spawn(", "execFile"),
    "ruby": ("system", "`", "%x", "exec", "spawn", "Open3"),
    "perl": ("system", "`", "qx", "exec"),
}
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
    return _scripted("node", args, ("-e", "--eval", "-p", "--print"), _NODE_WRITES)


def ruby(args: list[Arg], place: Place) -> Effects:
    return _scripted("ruby", args, ("-e",), _RUBY_WRITES)


def perl(args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args, short_values="eEIMmlx0", optional_short="i", long_values=frozenset()
    )
    codes = options.values("-e", "-E")
    effects = Effects()
    suffixes = options.values("-i")
    if suffixes:
        files = options.operands if codes else options.operands[1:]
        _operand_files("perl -i", files, effects)
        _backups(files, suffixes, effects)
    for code in codes:
        effects.merge(_search("perl", code, _PERL_WRITES))
    return effects


def _scripted(
    name: str, args: list[Arg], code_options: tuple[str, ...], writes: tuple[str, ...]
) -> Effects:
    effects = Effects()
    for index, arg in enumerate(args[:-1]):
        if arg in code_options:
            effects.merge(_search(name, args[index + 1], writes))
        elif arg is not None and not arg.startswith("-"):
            break  # a script file: what follows are its arguments
    return effects


def _search(name: str, code: Arg, writes: tuple[str, ...]) -> Effects:
    if code is None:
        return Effects(unknown=[f"`{name}` runs code that is only known when it runs"])
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
    if re.search(r"\b(unlink|rename|truncate|chmod|sysopen)\b", code):
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
    return base == "python" or re.fullmatch(r"python\d+(\.\d+)?", base) is not None


RULES: Final = {"node": node, "nodejs": node, "ruby": ruby, "perl": perl}
