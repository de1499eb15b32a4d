"""Python code as the guard reads it (`python -c`, a program on the input or in a here-doc).

Read with Python's own parser (`ast`). Imports are followed under any name (`import shutil
as sh`, `from os import remove as rm`), and so are plain aliases of a function (`w = open`):
calls that write name their targets (`open(p, "w")`, `Path(p).write_text`, `os.remove`,
`shutil.copy`, `os.open(p, os.O_WRONLY)`, `tarfile.open(p, "w")`, `fileinput` in place,
`sqlite3.connect`...), a target computed at run time is unknown, and `sys.argv[N]` is the
command's own argument. `os.system("...")` and `subprocess.run([...])` with literal commands
are judged as shell commands in turn, and `exec("...")` of literal code is read the same way.

What the reader cannot follow makes the whole program undetermined rather than harmless:
dynamic calls (`exec`/`eval` of computed text, `getattr`, `__import__`, `importlib`,
`globals()`, dunder attributes), a file-writing function passed around as a value
(`map(os.remove, ...)`), a star import of a module that writes, a Path-like method on a
receiver it cannot name, and relative paths after `os.chdir`.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Final

from .effects import Arg, Effects

_WRITE_MODES: Final = frozenset("wax+")
_OPENERS: Final = {
    # name: (index of the mode argument, its default)
    "open": (1, "r"),
    "builtins.open": (1, "r"),
    "io.open": (1, "r"),
    "codecs.open": (1, "r"),
    "io.FileIO": (1, "r"),
    "gzip.open": (1, "rb"),
    "gzip.GzipFile": (1, "rb"),
    "bz2.open": (1, "rb"),
    "bz2.BZ2File": (1, "r"),
    "lzma.open": (1, "rb"),
    "lzma.LZMAFile": (1, "r"),
    "tarfile.open": (1, "r"),
    "tarfile.TarFile": (1, "r"),
    "zipfile.ZipFile": (1, "r"),
    "shelve.open": (1, "c"),
    "dbm.open": (1, "r"),
}
_FIRST_ARG: Final = frozenset(
    {"os.remove", "os.unlink", "os.truncate", "os.chmod", "os.chown", "os.utime", "os.mkfifo",
     "os.lchmod", "os.lchown", "os.mknod", "os.setxattr", "os.removexattr", "shutil.chown",
     "sqlite3.connect"}
)  # fmt: skip
_BOTH_ARGS: Final = frozenset({"os.rename", "os.replace", "os.renames", "shutil.move"})
_SECOND_ARG: Final = frozenset(
    {"os.link", "os.symlink", "shutil.copy", "shutil.copy2", "shutil.copyfile",
     "shutil.copymode", "shutil.copystat"}
)  # fmt: skip
_TREES: Final = frozenset({"shutil.rmtree", "os.removedirs"})
_DIRECTORIES: Final = frozenset({"os.mkdir", "os.makedirs", "os.rmdir"})
_PATH_TYPES: Final = frozenset(
    {"pathlib.Path", "pathlib.PosixPath", "pathlib.PurePath", "pathlib.PurePosixPath",
     "pathlib.WindowsPath"}
)  # fmt: skip
_PATH_WRITES: Final = frozenset(
    {"write_text", "write_bytes", "touch", "unlink", "chmod", "lchmod", "symlink_to",
     "hardlink_to"}
)  # fmt: skip
_PATH_MOVES: Final = frozenset({"rename", "replace"})
_PATH_DIRS: Final = frozenset({"mkdir", "rmdir"})
_SHELL_CALLS: Final = frozenset(
    {"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput",
     "asyncio.create_subprocess_shell", "commands.getoutput"}
)  # fmt: skip
_PROCESS_CALLS: Final = frozenset(
    {"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
     "subprocess.Popen", "asyncio.create_subprocess_exec", "pty.spawn"}
)  # fmt: skip
_PROCESS_PREFIXES: Final = ("os.exec", "os.spawn", "os.posix_spawn")
_DYNAMIC: Final = frozenset(
    {"exec", "eval", "compile", "__import__", "getattr", "setattr", "delattr", "globals",
     "locals", "vars", "breakpoint", "builtins.exec", "builtins.eval", "builtins.compile",
     "builtins.__import__", "builtins.getattr", "os.fchdir", "code.interact",
     "operator.attrgetter", "operator.methodcaller", "sys.settrace", "sys.setprofile"}
)  # fmt: skip
_DYNAMIC_MODULES: Final = frozenset(
    {"importlib", "runpy", "ctypes", "cffi", "code", "codeop", "pickle", "marshal", "dill",
     "cloudpickle", "sys.modules", "__builtins__"}
)  # fmt: skip
_DUNDERS: Final = frozenset(
    {"__subclasses__", "__globals__", "__builtins__", "__getattribute__", "__import__",
     "__code__", "__closure__", "__func__", "__self__", "__class__", "__bases__", "__base__",
     "__mro__", "__reduce__", "__reduce_ex__", "__setattr__", "__delattr__", "__loader__",
     "__spec__", "__dict__", "__init_subclass__", "__call__"}
)  # fmt: skip
"""Attributes that reach objects the reader cannot follow (`().__class__.__base__...`)."""
_READ_ONLY_FLAGS: Final = frozenset(
    {"os", "O_RDONLY", "O_CLOEXEC", "O_NOFOLLOW", "O_NONBLOCK", "O_DIRECTORY", "O_PATH",
     "O_NOATIME", "O_NOCTTY"}
)  # fmt: skip
_DATABASE_WRITE_FLAGS: Final = frozenset("wcn")
_SENSITIVE_MODULES: Final = frozenset(
    {"os", "shutil", "subprocess", "pathlib", "io", "builtins", "tarfile", "zipfile", "gzip",
     "bz2", "lzma", "fileinput", "shelve", "dbm", "sqlite3", "codecs", "pty", "asyncio",
     "tempfile", "os.path"}
)  # fmt: skip
_OPEN_WRITE_FLAGS: Final = frozenset({"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"})
_COMPUTED = (
    "`{name}` writes to a path computed at run time (write the path literally, or lock the "
    "files and use a command the guard can read)"
)
_CANNOT_FOLLOW = (
    "this Python code {what}, which the guard cannot follow: write it with literal paths "
    "and plain calls (open(...), os.remove(...), shutil.copy(...))"
)
_MAX_EXEC_DEPTH: Final = 4
MAX_CHARS: Final = 128 * 1024
"""Longer Python code is not read (compiling it alone would take a large part of the hook's
time): undetermined."""
MAX_NODES: Final = 50_000
"""Syntax nodes of one Python program the reader follows; a larger one is undetermined."""


def read_python(code: str, argv: Sequence[Arg], depth: int = 0) -> Effects:
    """What Python `code`, run with `sys.argv == argv`, writes (see the module docstring)."""
    if len(code) > MAX_CHARS:
        return Effects(
            unknown=[_CANNOT_FOLLOW.format(what=f"is longer than {MAX_CHARS:,} characters")]
        )
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return Effects()  # python refuses it before running anything
    except (ValueError, RecursionError, MemoryError):
        return Effects(unknown=[_CANNOT_FOLLOW.format(what="cannot be parsed")])
    for count, _node in enumerate(ast.walk(tree)):
        if count > MAX_NODES:
            return Effects(
                unknown=[_CANNOT_FOLLOW.format(what=f"has more than {MAX_NODES:,} parts")]
            )
    return _Reader(tree, list(argv), depth).effects


class _Reader(ast.NodeVisitor):
    def __init__(self, tree: ast.AST, argv: list[Arg], depth: int) -> None:
        self.effects = Effects()
        self.argv = argv
        self.depth = depth
        self.aliases: dict[str, str] = {}
        """Local name -> the dotted name it stands for (imports, `w = open`)."""
        self.strings: dict[str, str | None] = {}
        """Local name -> the literal path text it is bound to (None: bound more than once
        to different values, or to a computed one)."""
        self.paths: set[str] = set()
        """Local names bound to `Path(...)` values (their text is in `strings`)."""
        self.called: set[int] = set()
        """Ids of expressions that are the function of a call or the value of an alias."""
        self.chdir = False
        self.collect(tree)
        self.visit(tree)
        if self.chdir:
            self.after_chdir()

    # -- the first pass: names ---------------------------------------------------------------

    def collect(self, tree: ast.AST) -> None:
        simple: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".")[0]
                    self.aliases[local] = alias.name if alias.asname else local
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    if alias.name == "*":
                        if node.module.split(".")[0] in _SENSITIVE_MODULES:
                            self.cannot(f"imports everything from `{node.module}`")
                        continue
                    self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Call):
                self.called.add(id(node.func))
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                simple.update(id(t) for t in targets if isinstance(t, ast.Name))
        rebound: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and node.value is not None:
                        self.bind(target.id, node.value)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                if id(node) not in simple:
                    rebound.add(node.id)  # a loop variable, `+=`, `with ... as`: computed
            elif isinstance(node, ast.arg):
                rebound.add(node.arg)
        for name in rebound:
            self.strings[name] = None
            self.paths.discard(name)

    def bind(self, name: str, value: ast.expr) -> None:
        dotted = self.dotted(value)
        if dotted and self.sensitive(dotted):
            self.aliases[name] = dotted  # w = open; rm = os.remove
            self.called.add(id(value))
            return
        text = self.constant_path(value)
        is_path = self.is_path_value(value)
        if name in self.strings and self.strings[name] != text:
            self.strings[name] = None
        else:
            self.strings[name] = text
        if is_path:
            self.paths.add(name)

    # -- names and values ---------------------------------------------------------------------

    def dotted(self, node: ast.expr) -> str:
        """The canonical dotted name of a name or attribute chain (through imports and
        aliases), or ""."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else ""
        return ""

    def sensitive(self, dotted: str) -> bool:
        head = dotted.split(".")[0]
        return (
            dotted in _OPENERS
            or dotted in _FIRST_ARG
            or dotted in _BOTH_ARGS
            or dotted in _SECOND_ARG
            or dotted in _TREES
            or dotted in _SHELL_CALLS
            or dotted in _PROCESS_CALLS
            or dotted in _DYNAMIC
            or dotted.startswith(_PROCESS_PREFIXES)
            or dotted in _PATH_TYPES
            or dotted in ("os.open", "fileinput.input", "fileinput.FileInput", "os.chdir")
            or (head in _SENSITIVE_MODULES and dotted == head)
        )

    def constant_path(self, node: ast.expr | None) -> str | None:
        """The literal text of a path expression, or None when computed."""
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            parts = [v.value for v in node.values if isinstance(v, ast.Constant)]
            return "".join(str(p) for p in parts) if len(parts) == len(node.values) else None
        if isinstance(node, ast.Name):
            return self.strings.get(node.id)
        if isinstance(node, ast.Subscript) and self.dotted(node.value) == "sys.argv":
            index = node.slice
            if isinstance(index, ast.Constant) and isinstance(index.value, int):
                position = index.value
                if 0 <= position < len(self.argv):
                    return self.argv[position]
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div | ast.Add):
            left, right = self.constant_path(node.left), self.constant_path(node.right)
            if left is None or right is None:
                return None
            if isinstance(node.op, ast.Add):
                return left + right
            return f"{left.rstrip('/')}/{right}" if left else right
        if isinstance(node, ast.Call):
            name = self.dotted(node.func)
            if name in _PATH_TYPES and len(node.args) == 1 and not node.keywords:
                return self.constant_path(node.args[0])
            if name in ("os.path.join", "posixpath.join") and node.args:
                pieces = [self.constant_path(a) for a in node.args]
                joined = ""
                for piece in pieces:
                    if piece is None:
                        return None
                    joined = piece if piece.startswith("/") or not joined else f"{joined}/{piece}"
                return joined
            if name in ("os.path.abspath", "os.path.normpath", "os.fspath", "str"):
                return self.constant_path(node.args[0]) if len(node.args) == 1 else None
        return None

    def is_path_value(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Call):
            return self.dotted(node.func) in _PATH_TYPES
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return self.is_path_value(node.left)
        if isinstance(node, ast.Name):
            return node.id in self.paths
        return False

    # -- the second pass: calls and references ------------------------------------------------

    def visit_Name(self, node: ast.Name) -> None:
        self.reference(node, self.aliases.get(node.id, node.id))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _DUNDERS:
            self.cannot(f"reaches `{node.attr}`")
        dotted = self.dotted(node)
        if dotted:
            self.reference(node, dotted)
            if dotted.split(".")[0] in _SENSITIVE_MODULES | {"sys"}:
                return  # a module path: its parts are not references of their own
        self.generic_visit(node)

    def reference(self, node: ast.expr, dotted: str) -> None:
        """A file-writing or dynamic function (or module) used other than by calling it
        (passed to `map`, stored in a list) cannot be followed."""
        if id(node) in self.called or not isinstance(getattr(node, "ctx", None), ast.Load):
            return
        if _within(dotted, _DYNAMIC_MODULES):
            self.cannot(f"uses `{dotted}`")
        elif self.sensitive(dotted):
            self.cannot(f"passes `{dotted}` around as a value")

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        name = self.dotted(node.func)
        args = node.args
        unpacked = any(isinstance(a, ast.Starred) for a in args) or any(
            k.arg is None for k in node.keywords
        )
        if unpacked and name and self.sensitive(name):
            self.cannot(f"calls `{name}` with arguments unpacked at run time")
            return
        if name in _OPENERS:
            position, default = _OPENERS[name]
            mode = self.mode(node, position, default)
            writing = _DATABASE_WRITE_FLAGS if name in ("shelve.open", "dbm.open") else _WRITE_MODES
            if mode is None or set(mode) & writing:
                self.target(self.argument(node, 0, "file"), name)
        elif name == "sqlite3.connect":
            database = self.constant_path(self.argument(node, 0, "database"))
            if database != ":memory:" and not (database or "").startswith("file:"):
                self.target_text(database, name)
        elif name == "os.open":
            flags = self.argument(node, 1, "flags")
            if flags is None or self.writes_flags(flags):
                self.target(self.argument(node, 0, "path"), name)
        elif name in ("fileinput.input", "fileinput.FileInput"):
            self.fileinput(node, name)
        elif name in _FIRST_ARG:
            self.target(self.argument(node, 0, "path"), name)
        elif name in _BOTH_ARGS:
            for arg in args[:2]:
                self.target(arg, name)
        elif name in _SECOND_ARG:
            self.target(args[1] if len(args) > 1 else self.argument(node, 1, "dst"), name)
        elif name in _TREES:
            self.target(args[0] if args else None, name, tree=True)
        elif name in _DIRECTORIES:
            path = self.constant_path(args[0]) if args else None
            if path is not None:
                self.effects.directories.append(path)
        elif name == "shutil.copytree" and len(args) > 1:
            source, destination = self.constant_path(args[0]), self.constant_path(args[1])
            if source is None or destination is None:
                self.effects.unknown.append(_COMPUTED.format(name=name))
            else:
                self.effects.copies.append((source, destination))
        elif name == "shutil.make_archive":
            base = self.constant_path(args[0]) if args else None
            if base is None:
                self.effects.unknown.append(_COMPUTED.format(name=name))
            else:
                self.effects.unlisted.append(
                    (base.rpartition("/")[0] or ".", f"`{name}` writes {base}.*")
                )
        elif name == "os.chdir":
            self.chdir = True
        elif name in _SHELL_CALLS:
            text = self.constant_path(args[0]) if args else None
            if text is None:
                self.effects.unknown.append(f"`{name}` runs a command computed at run time")
            else:
                self.effects.scripts.append(text)
        elif name in _PROCESS_CALLS or name.startswith(_PROCESS_PREFIXES):
            self.process(node, name)
        elif name in ("exec", "eval", "builtins.exec", "builtins.eval"):
            self.exec(node, name)
        elif name in _DYNAMIC or _within(name, _DYNAMIC_MODULES | {"lockyard"}):
            self.cannot(f"calls `{name}`")
        elif isinstance(node.func, ast.Attribute):
            self.method(node, node.func)

    def method(self, node: ast.Call, func: ast.Attribute) -> None:
        """`Path(p).write_text(...)`, `p.unlink()` for `p = Path(...)`; the same method on a
        receiver the reader cannot name is undetermined."""
        attr = func.attr
        if attr not in _PATH_WRITES | _PATH_MOVES | _PATH_DIRS | {"open"}:
            return
        receiver = func.value
        known = self.is_path_value(receiver)
        if not known:
            if attr in _PATH_MOVES and len(node.args) != 1:
                return  # str.replace(old, new)
            if attr == "open" or attr in _PATH_DIRS or attr == "chmod":
                return  # many objects have these; only a known Path's count
            if isinstance(receiver, ast.Constant):
                return
            self.effects.unknown.append(
                f"`.{attr}()` writes through an object the guard cannot name (use a literal "
                "Path('...') or open('...'))"
            )
            return
        path = self.constant_path(receiver)
        label = "Path." + attr
        if attr in _PATH_WRITES:
            self.target_text(path, label)
        elif attr in _PATH_MOVES:
            self.target_text(path, label)
            self.target(node.args[0] if node.args else None, label)
        elif attr in _PATH_DIRS:
            if path is not None:
                self.effects.directories.append(path)
        else:
            mode = self.mode(node, 0, "r")
            if mode is None or set(mode) & _WRITE_MODES:
                self.target_text(path, "Path.open")

    def fileinput(self, node: ast.Call, name: str) -> None:
        inplace = self.argument(node, 1, "inplace")
        if inplace is None or (isinstance(inplace, ast.Constant) and not inplace.value):
            return
        files = self.argument(node, 0, "files")
        if files is None or (isinstance(files, ast.Constant) and files.value is None):
            for arg in self.argv[1:]:
                if arg is None:
                    self.effects.unknown.append(_COMPUTED.format(name=name))
                elif arg != "-":
                    self.effects.files.append(arg)
            return
        elements = files.elts if isinstance(files, ast.List | ast.Tuple) else [files]
        for element in elements:
            self.target(element, name)

    def process(self, node: ast.Call, name: str) -> None:
        if name.startswith(_PROCESS_PREFIXES):
            self.exec_family(node, name)
            return
        command = self.argument(node, 0, "args")
        shell = self.argument(node, -1, "shell")
        if isinstance(command, ast.List | ast.Tuple):
            self.effects.commands.append([self.constant_path(e) for e in command.elts])
        elif (
            command is not None
            and isinstance(shell, ast.Constant)
            and shell.value is True
            and self.constant_path(command) is not None
        ):
            self.effects.scripts.append(self.constant_path(command) or "")
        else:
            self.effects.unknown.append(f"`{name}` runs a command computed at run time")

    def exec_family(self, node: ast.Call, name: str) -> None:
        """`os.execvp(file, [argv])`, `os.execl(path, arg0, arg1...)`, `os.spawnlp(mode,
        file, arg0...)`, `os.posix_spawn(path, [argv], env)`: the argument vector."""
        arguments = list(node.args)
        if name.startswith("os.spawn"):
            arguments = arguments[1:]  # the mode
        arguments = arguments[1:]  # the program: argv[0] names it again
        if name.startswith("os.posix_spawn"):
            arguments = arguments[:1]
        listed = arguments[0] if arguments else None
        base = name.rpartition(".")[2]
        kind = base.removeprefix("posix_spawn").removeprefix("exec").removeprefix("spawn")
        if kind.startswith("v") or base.startswith("posix_spawn"):
            if isinstance(listed, ast.List | ast.Tuple):
                self.effects.commands.append([self.constant_path(e) for e in listed.elts])
                return
        elif arguments:
            if "e" in kind:
                arguments = arguments[:-1]  # the environment
            self.effects.commands.append([self.constant_path(a) for a in arguments])
            return
        self.effects.unknown.append(f"`{name}` runs a command computed at run time")

    def exec(self, node: ast.Call, name: str) -> None:
        code = self.constant_path(node.args[0]) if node.args else None
        if code is None or self.depth >= _MAX_EXEC_DEPTH:
            self.cannot(f"runs `{name}` on code computed at run time")
            return
        self.effects.merge(read_python(code, self.argv, self.depth + 1))

    def after_chdir(self) -> None:
        """After `os.chdir`, relative paths are taken from a directory the reader does not
        track: those writes (and commands run) are unknown."""
        effects = self.effects
        relative = [p for p in [*effects.files, *effects.trees] if not p.startswith("/")]
        if relative or effects.commands or effects.scripts or effects.copies:
            effects.files = [p for p in effects.files if p.startswith("/")]
            effects.trees = [p for p in effects.trees if p.startswith("/")]
            effects.copies, effects.commands, effects.scripts = [], [], []
            self.cannot("changes directory (`os.chdir`) before writing relative paths")

    # -- helpers ---------------------------------------------------------------------------

    def argument(self, node: ast.Call, position: int, keyword: str) -> ast.expr | None:
        for item in node.keywords:
            if item.arg == keyword:
                return item.value
        if 0 <= position < len(node.args):
            return node.args[position]
        return None

    def mode(self, node: ast.Call, position: int, default: str) -> str | None:
        """The open mode; `default` when not given; None when computed."""
        value = self.argument(node, position, "mode")
        if value is None:
            return default
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
        return None

    def writes_flags(self, flags: ast.expr) -> bool:
        names = {n.attr for n in ast.walk(flags) if isinstance(n, ast.Attribute)}
        names |= {n.id for n in ast.walk(flags) if isinstance(n, ast.Name)}
        if names & _OPEN_WRITE_FLAGS:
            return True
        return not names or not names <= _READ_ONLY_FLAGS

    def target(self, node: ast.expr | None, name: str, tree: bool = False) -> None:
        self.target_text(self.constant_path(node), name, tree)

    def target_text(self, path: str | None, name: str, tree: bool = False) -> None:
        if path is None:
            self.effects.unknown.append(_COMPUTED.format(name=name))
        elif tree:
            self.effects.trees.append(path)
        else:
            self.effects.files.append(path)

    def cannot(self, what: str) -> None:
        reason = _CANNOT_FOLLOW.format(what=what)
        if reason not in self.effects.unknown:
            self.effects.unknown.append(reason)


def _within(dotted: str, modules: frozenset[str]) -> bool:
    """Whether `dotted` is one of `modules` or inside one."""
    return any(dotted == m or dotted.startswith(m + ".") for m in modules)
