"""The write targets of a command line: every file it would write, and what cannot be known.

Walks the parsed statements in order, keeping what bash keeps: the directory (`cd`, `pushd`,
and `-C` / `env -C` for one command), the variables set earlier in the line, the open file
descriptors (`exec 3<f`), functions, subshells that forget all of it, and what each command
reads on its input (a here-document, the output of `echo`/`printf`/`cat` piped in), so an
interpreter reading its program there is judged like `python -c`. Redirections, the rules of
`utilities`, `oneliners`, `formatters` and `git`, and the commands those run (`xargs`,
`find -exec`, `sudo`, `bash -c`...) all add targets. Paths are resolved as the command's own
process would resolve them (`paths.resolve`).

The work is bounded: a command line whose walk takes more than `MAX_STEPS` steps (statements,
loop rounds, nested programs) is not judged further; the rest is undetermined.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from . import (
    archives,
    editors,
    formatters,
    git,
    git_settings,
    lockyard_cli,
    oneliners,
    utilities,
    wrappers,
)
from .effects import NO_INPUT, UNKNOWN_INPUT, Arg, Effects, Feed, read_options
from .paths import STREAM, View, lexical, resolve
from .syntax import (
    Block,
    CommandTooLargeError,
    ForLoop,
    Function,
    Opaque,
    Pipeline,
    Redirect,
    Script,
    Simple,
    Statement,
    Subst,
    Unparsed,
    Word,
    assigned_in,
    parse_shell,
)
from .viewers import shows_operands
from .words import MAX_FIELDS, expand, expand_text, literal

TargetKind = Literal["file", "directory", "tree", "unlisted"]

_WRITE_REDIRECTS: Final = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
_MAX_DEPTH: Final = 8
_MAX_LOOP_VALUES: Final = 256
MAX_STEPS: Final = 5_000
"""Statements, loop rounds and nested programs walked for one command line, at most."""
MAX_SECONDS: Final = 5.0
"""Wall-clock time the walk may take (a backstop for what steps do not count: globs over huge
trees, slow file systems); checked every few steps."""
_MAX_GIT_COMMANDS: Final = 16
"""Git commands that ask git, per command line (each starts git processes)."""
_CD: Final = frozenset({"cd", "pushd"})
_STANDARD_FDS: Final[Mapping[int, str | None]] = {0: STREAM, 1: STREAM, 2: STREAM}
_SETS_VARIABLES: Final = frozenset({"read", "mapfile", "readarray", "getopts", "let", "unset"})
_TOO_LARGE: Final = (
    "the command is too large to judge in time ({what}): split it into smaller commands, or "
    "write long content with the file-editing tools"
)


@dataclass(frozen=True)
class Target:
    path: str
    """Absolute, resolved as the command's process resolves it (the lock store then takes
    its key)."""
    kind: TargetKind
    """`file` written; `directory` created or removed; `tree`: a directory every file of which
    is written (its files are listed as `file` targets too); `unlisted`: a directory or name
    prefix where files are created that cannot be listed (`reason` says why)."""
    command: str
    """The command that writes it, as written."""
    reason: str = ""


@dataclass
class GitTurnUse:
    """What a command line does about git's turns, in the order it runs."""

    taken: bool = False
    """It runs `lockyard git-turn` before any git command that needs the turn."""
    needed_by: str | None = None
    """The first git command that takes a repository lock with no turn taken before it."""
    needed_in: str | None = None
    """The directory that git command runs in (None: unknown)."""
    lock_waiter: str | None = None
    """A `lockyard lock` it runs, which waits for file locks."""


@dataclass
class WriteTargets:
    targets: list[Target] = field(default_factory=list)
    undetermined: list[str] = field(default_factory=list)
    """Why some writes cannot be named, one sentence each (with the command)."""
    refused: list[str] = field(default_factory=list)
    """Why the command is refused whatever is locked (the operator's business)."""
    viewed: list[str] = field(default_factory=list)
    """Existing files it shows to whoever runs it (`viewers.py`): the reads the stale-read
    check notes once the command is allowed."""
    git_turn: GitTurnUse = field(default_factory=lambda: GitTurnUse())
    """How the line stands with git's turns (`git_turn.py`)."""

    @property
    def files(self) -> list[str]:
        return list(dict.fromkeys(t.path for t in self.targets if t.kind == "file"))


@dataclass
class _Scope:
    cwd: str | None
    variables: dict[str, str | None]
    fds: dict[int, str | None] = field(default_factory=lambda: dict(_STANDARD_FDS))
    stdin: Feed = NO_INPUT
    functions: dict[str, Function] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    """Namerefs (`declare -n ref=name`)."""
    globstar: bool = False
    """`shopt -s globstar`: `**` matches across directories."""

    def child(self) -> _Scope:
        return _Scope(
            self.cwd,
            dict(self.variables),
            dict(self.fds),
            self.stdin,
            dict(self.functions),
            dict(self.refs),
            self.globstar,
        )

    def name(self, name: str) -> str:
        """The variable a name stands for (through namerefs)."""
        for _ in range(8):
            if name not in self.refs:
                return name
            name = self.refs[name]
        return name

    def lookup(self) -> Mapping[str, str | None]:
        """The variables' values as words see them (namerefs followed, `$PWD`)."""
        return _Values(self)

    def set(self, name: str, value: str | None) -> None:
        self.variables[self.name(name)] = value


class _Values(Mapping[str, "str | None"]):
    """A scope's variables as words read them, without copying them for every word."""

    __slots__ = ("scope",)

    def __init__(self, scope: _Scope) -> None:
        self.scope = scope

    def __getitem__(self, name: str) -> str | None:
        if name == "PWD":
            return self.scope.cwd
        return self.scope.variables[self.scope.name(name) if self.scope.refs else name]

    def __iter__(self) -> Iterator[str]:
        return iter({*self.scope.variables, *self.scope.refs, "PWD"})

    def __len__(self) -> int:
        return len({*self.scope.variables, *self.scope.refs, "PWD"})


class _TooLargeError(Exception):
    pass


def write_targets(
    command: str, cwd: str, home: str | None = None, *, root: str | None = None
) -> WriteTargets:
    """What `command`, run in directory `cwd`, would write (see the module docstring).

    `home` is `$HOME` for `~` and `$HOME`; other variables from the environment the command
    will run in are unknown to the guard. `root` is the repository's resolved root (paths
    under it resolve faster).
    """
    found = WriteTargets()
    variables: dict[str, str | None] = {} if home is None else {"HOME": home}
    walker = _Walker(found, root)
    scope = _Scope(os.path.normpath(cwd), variables)
    try:
        walker.script(parse_shell(command), scope, 0)
        walker.run_traps(scope)
    except _TooLargeError as limit:
        walker.unknown(_TOO_LARGE.format(what=str(limit)), "")
    except RecursionError:
        walker.unknown(_TOO_LARGE.format(what="it nests too deep"), "")
    except CommandTooLargeError as limit:
        walker.unknown(_TOO_LARGE.format(what=str(limit)), "")
    return found


class _Walker:
    def __init__(self, found: WriteTargets, root: str | None) -> None:
        self.found = found
        self.root = root
        self.links: dict[str, str] = {}
        """Links the command line creates (absolute link -> what it leads to: a symbolic
        link's target as written, made absolute; a hard link's resolved file)."""
        self.git_changed_by: str | None = None
        """The first git command of the line that changes what git answers (index, refs)."""
        self.steps = 0
        self.max_steps = MAX_STEPS
        self.deadline = time.monotonic() + MAX_SECONDS
        self.next_clock_check = 64
        self.git_commands = 0
        self.traps: list[tuple[str, int]] = []
        self.probing = False
        """A walk on the side (`probe`): no git queries, no guesses about unknown commands."""

    def step(self, count: int = 1) -> None:
        self.steps += count
        if self.steps > self.max_steps:
            raise _TooLargeError(f"more than {self.max_steps} steps")
        if self.steps >= self.next_clock_check:
            self.next_clock_check = self.steps + 64
            if time.monotonic() > self.deadline:
                raise _TooLargeError(f"more than {MAX_SECONDS:g} seconds")

    def view(self, scope: _Scope, fds: Mapping[int, str | None] | None = None) -> View:
        return View(scope.cwd, scope.fds if fds is None else fds, self.links, self.root)

    # -- statements ------------------------------------------------------------------------

    def script(self, script: Script, scope: _Scope, depth: int) -> None:
        for statement in script:
            self.statement(statement, scope, depth)

    def statement(self, statement: Statement, scope: _Scope, depth: int) -> None:
        self.step()
        if isinstance(statement, Simple):
            self.simple(statement, scope, depth)
        elif isinstance(statement, Block):
            self.block(statement, scope, depth)
        elif isinstance(statement, Pipeline):
            self.pipeline(statement, scope, depth)
        elif isinstance(statement, Function):
            scope.functions[statement.name] = statement
            # Judged where it is defined too: it may run where the guard does not see the
            # call (a trap, `bash -c f` after `export -f f`).
            self.call(statement, scope.child(), depth, statement.name)
        elif isinstance(statement, ForLoop):
            self.loop(statement, scope, depth)
        else:
            assert isinstance(statement, Unparsed)
            why = f" ({statement.why})" if statement.why else ""
            self.unknown(f"the guard cannot parse `{_short(statement.text)}`{why}", "")

    def block(self, block: Block, scope: _Scope, depth: int) -> None:
        inner = scope.child() if block.subshell else scope
        self.with_redirects(
            block.redirects, inner, depth, "", lambda: self.script(block.body, inner, depth)
        )

    def with_redirects(
        self,
        redirects: list[Redirect],
        scope: _Scope,
        depth: int,
        text: str,
        body: Callable[[], None],
    ) -> None:
        """Run `body` with `redirects` applied to `scope` for its duration (a block's or a
        function's: its input and descriptors, opened before it runs)."""
        if not redirects:
            body()
            return
        for redirect in redirects:
            self.script(redirect.nested, scope.child(), depth)
            if redirect.target is not None:
                self.substitutions(redirect.target, scope, depth)
        saved = scope.stdin, scope.fds
        scope.stdin, fds = self.redirects(redirects, scope, dict(scope.fds), scope.stdin, text)
        scope.fds = fds
        try:
            body()
        finally:
            scope.stdin, scope.fds = saved

    def pipeline(self, pipeline: Pipeline, scope: _Scope, depth: int) -> None:
        feed = scope.stdin
        last = len(pipeline.parts) - 1
        for index, part in enumerate(pipeline.parts):
            inner = scope.child()
            inner.stdin = feed
            if index < last:  # (the last part's output feeds nothing the guard reads)
                feed = self.output(part, inner)
            self.script(part, inner, depth)

    def loop(self, loop: ForLoop, scope: _Scope, depth: int) -> None:
        values: list[str] | None = []
        for word in loop.values or []:
            self.substitutions(word, scope, depth)
            fields = self.expand(word, scope) if scope.cwd else None
            if fields is None or values is None:
                values = None
            else:
                values.extend(fields)

        def body() -> None:
            if loop.values is None or values is None or len(values) > _MAX_LOOP_VALUES:
                scope.set(loop.variable, None)
                self.script(loop.body, scope, depth)
            else:
                for value in values or [""]:
                    scope.set(loop.variable, value)
                    self.script(loop.body, scope, depth)

        self.with_redirects(loop.redirects, scope, depth, "", body)

    def call(self, function: Function, scope: _Scope, depth: int, text: str) -> None:
        if depth >= _MAX_DEPTH:
            self.unknown("it nests commands too deep to follow", text)
            return
        inner = scope.child() if function.subshell else scope
        self.with_redirects(
            function.redirects,
            inner,
            depth,
            text,
            lambda: self.script(function.body, inner, depth + 1),
        )

    def run_traps(self, scope: _Scope) -> None:
        """A trap's text runs later (at exit, on a signal): judged again where the line ends."""
        for text, depth in self.traps:
            self.script(parse_shell(text), scope.child(), depth + 1)

    # -- one simple command ------------------------------------------------------------------

    def simple(self, command: Simple, scope: _Scope, depth: int) -> None:
        for _, value in command.assignments:
            self.substitutions(value, scope, depth)
        for word in command.words:
            self.substitutions(word, scope, depth)
        for redirect in command.redirects:
            self.script(redirect.nested, scope.child(), depth)
            if redirect.target is not None:
                self.substitutions(redirect.target, scope, depth)
        self.forget_assigned(command, scope)
        feeds: dict[str, Feed] = {}
        fds = dict(scope.fds)
        argv: list[Arg] = []
        for word in command.words:
            if _is_process_substitution(word):
                number = 63 - len(feeds)  # the descriptors bash gives them
                subst = word[0]
                assert isinstance(subst, Subst)
                reads = subst.text.startswith("<(")
                name = f"/dev/fd/{number}"
                feeds[name] = self.output(subst.script, scope.child()) if reads else NO_INPUT
                fds[number] = STREAM
                argv.append(name)
            else:
                argv.extend(self.expanded(word, scope))
        stdin, fds = self.redirects(command.redirects, scope, fds, scope.stdin, command.text)
        if not command.words:
            self.assign(command, scope)
            return
        if command.declaration is not None:
            self.declare(command, argv, scope)
            return
        if argv == ["exec"]:
            scope.fds = fds  # `exec 3<f`: the shell's own descriptors from now on
            return
        if argv[0] is not None and os.path.basename(argv[0]) == "git":
            self.git_environment(command, scope, depth)
        self.run(argv, scope, depth, command.text, stdin=stdin, feeds=feeds, fds=fds)

    def git_environment(self, command: Simple, scope: _Scope, depth: int) -> None:
        """`GIT_EXTERNAL_DIFF=cmd git diff` (or such a variable set earlier in the line): git
        runs the program, or looks elsewhere."""
        given = dict(command.assignments)
        for name in git_settings.git_variables([*given, *scope.variables]):
            if name in given:
                fields = self.expand(given[name], scope)
                value = fields[0] if fields is not None and len(fields) == 1 else None
            else:
                value = scope.variables.get(name)
            self.apply(git_settings.git_environment(name, value), scope, depth, command.text)

    def assign(self, command: Simple, scope: _Scope) -> None:
        for name, value in command.assignments:
            fields = self.expand(value, scope) if scope.cwd else None
            known = fields[0] if fields is not None and len(fields) == 1 else None
            if known is None:
                known = _temporary(value)
            if name in command.appends:
                old = scope.lookup().get(name)
                known = None if old is None or known is None else old + known
            scope.set(name, known)

    def declare(self, command: Simple, argv: list[Arg], scope: _Scope) -> None:
        """`declare`/`local`/`export`/`readonly`/`typeset`: plain `name=value` operands set
        the variable; namerefs (`-n`) are followed; other kinds (arrays, integers) are
        unknown."""
        options = [a for a in argv if a is None or a.startswith(("-", "+"))]
        letters = "".join(a[1:] for a in options if a is not None)
        if any(a is None for a in options):
            letters += "?"
        names = [a for a in argv if a is not None and not a.startswith(("-", "+"))]
        if "n" in letters:
            for name, value in command.assignments:
                target = literal(value)
                if target is not None and target.isidentifier():
                    scope.refs[name] = target
                else:
                    scope.set(name, None)
            return
        plain = not set(letters) - set("xrg")
        for name, value in command.assignments:
            if plain:
                self.assign(
                    Simple([(name, value)], [], [], command.text, appends=command.appends), scope
                )
            else:
                scope.set(name, None)
        if command.declaration in ("local", "declare", "typeset"):
            for name in names:
                scope.set(name, None)  # a new, empty variable in the function's scope

    def forget_assigned(self, command: Simple, scope: _Scope) -> None:
        """`${x:=y}` or `$((x=1))` in a word assign x as it expands."""
        for word in [*command.words, *(value for _, value in command.assignments)]:
            for segment in word:
                if isinstance(segment, Opaque):
                    for name in assigned_in(segment.text):
                        scope.set(name, None)

    def run(
        self,
        argv: list[Arg],
        scope: _Scope,
        depth: int,
        text: str,
        *,
        stdin: Feed | None = None,
        feeds: Mapping[str, Feed] | None = None,
        fds: Mapping[int, str | None] | None = None,
    ) -> None:
        """Judge one command (by name) run in `scope`."""
        self.step()
        if not argv:
            return
        name = argv[0]
        if name is None:
            self.unknown("it runs a command whose name is only known when it runs", text)
            return
        base = os.path.basename(name)
        args = argv[1:]
        function = scope.functions.get(name)
        if function is not None:
            self.call(function, scope, depth, text)
            return
        if base in _CD:
            self.change_directory(args, scope)
            return
        if base == "popd":
            scope.cwd = None
            return
        if self.builtin(base, args, scope, depth, text):
            return
        if scope.cwd is not None and shows_operands(base, args):
            operands = [arg for arg in args if arg and not arg.startswith("-")]
            self.view_files(operands, scope.cwd)
        place = utilities.Place(
            scope.cwd,
            scope.variables.get("HOME"),
            stdin if stdin is not None else scope.stdin,
            feeds or {},
        )
        effects = self.effects_of(base, args, place, text)
        if effects is None:
            effects = self.unknown_command(base, args, place)
        self.apply(effects, scope, depth, text, fds, place)

    def builtin(self, base: str, args: list[Arg], scope: _Scope, depth: int, text: str) -> bool:
        """Shell builtins that change the walk's state; True when `base` was one."""
        if base in _SETS_VARIABLES or (base == "printf" and "-v" in args):
            self.forget_set_variables(base, args, scope)
            return base != "printf"
        if base == "trap":
            action = args[1] if args[:1] == ["--"] else (args[0] if args else "")
            if action is None:
                self.unknown("`trap` runs text only known when it runs", text)
            elif action and action not in ("-", "-p", "-l", "-P") and len(args) > 1:
                self.traps.append((action, depth))
                self.script(parse_shell(action), scope.child(), depth + 1)
            return True
        if base == "shopt":
            if "globstar" in args:
                scope.globstar = "-s" in args
            return True
        if base == "alias":
            for arg in args:
                value = None if arg is None else arg.partition("=")[2]
                if arg is None:
                    self.unknown("`alias` defines a command only known when it runs", text)
                elif value:
                    self.script(parse_shell(value), scope.child(), depth + 1)
            return True
        return False

    def forget_set_variables(self, base: str, args: list[Arg], scope: _Scope) -> None:
        """`read x`, `mapfile a`, `getopts s x`, `let x=1`, `printf -v x`, `unset x`: the
        variables they set have values the guard cannot know."""
        if base == "let":
            names = assigned_in(" ".join(a for a in args if a is not None))
        elif base == "printf":
            names = {args[i + 1] or "" for i, a in enumerate(args[:-1]) if a == "-v"}
        elif base == "getopts":
            names = {args[1] or ""} if len(args) > 1 else set()
        else:
            options = read_options(args, short_values="adnNptuiCcOs")
            names = {a for a in options.operands if a is not None} | {
                a for a in options.values("-a") if a is not None
            }
            if base in ("mapfile", "readarray") and not names:
                names = {"MAPFILE"}
            if base == "read" and not names:
                names = {"REPLY"}
        if any(a is None for a in args):
            scope.variables = dict.fromkeys(scope.variables)  # which ones: unknown
            return
        for name in names:
            scope.set(name, None)

    def effects_of(
        self, base: str, args: list[Arg], place: utilities.Place, text: str
    ) -> Effects | None:
        if base == "git":
            if self.probing:
                return _unknown("runs git") if git.writes_tree(args) else Effects()
            if git.asks_git(args):
                self.git_commands += 1
                if self.git_commands > _MAX_GIT_COMMANDS:
                    return _unknown(_TOO_LARGE.format(what="too many git commands"))
            effects = git.git(args, place, after=self.git_changed_by)
            if git.changes_git_state(args):
                if self.git_changed_by is None:
                    self.git_changed_by = _short(text)
                turn = self.found.git_turn
                if not turn.taken and turn.needed_by is None:
                    turn.needed_by, turn.needed_in = _short(text), place.cwd
            return effects
        if base == "lockyard" and args and not self.probing:
            self.note_lockyard(args[0], text)
        if oneliners.is_python(base):
            return oneliners.python(args, place)
        rule = _rule(base)
        return None if rule is None else rule(args, place)

    def note_lockyard(self, subcommand: Arg, text: str) -> None:
        """Note a `lockyard git-turn` (the line takes its turn) or `lockyard lock` (it waits
        for file locks)."""
        turn = self.found.git_turn
        if subcommand == "git-turn" and turn.needed_by is None:
            turn.taken = True
        elif subcommand == "lock" and turn.lock_waiter is None:
            turn.lock_waiter = _short(text)

    def unknown_command(self, base: str, args: list[Arg], place: utilities.Place) -> Effects:
        """A program the guard has no rule for. Common ones (`wrappers.ORDINARY`) run no
        command they are given; for any other, an argument that names a command that writes
        (`foo -x rm notes.txt`), or text that parses as one (`foo 'echo x > f'`), may be run
        by it: undetermined."""
        if base in wrappers.ORDINARY or not args or self.probing:
            return Effects()
        for index, arg in enumerate(args):
            if arg is None:
                continue
            if _is_command(os.path.basename(arg)):
                argv = args[index:]
            elif ("\n" in arg or " " in arg) and (
                arg.split()[0] in _TEXT_COMMANDS or _is_command(os.path.basename(arg.split()[0]))
            ):
                argv = ["bash", "-c", arg]
            else:
                continue
            if self.probe(argv, place):
                shown = _short(" ".join("?" if a is None else a for a in args[index:]), 50)
                return _unknown(
                    f"`{base}` is not a program the guard knows, and it may run `{shown}`, "
                    "which writes: run that command directly"
                )
        return Effects()

    def probe(self, argv: list[Arg], place: utilities.Place, *, anywhere: bool = False) -> bool:
        """Whether `argv`, run where `place` says, writes anything in the repository (with
        `anywhere`: anything at all), or cannot be read: judged on the side, in a few steps,
        without asking git."""
        scratch = _Walker(WriteTargets(), self.root)
        scratch.links = dict(self.links)
        scratch.probing = True
        scratch.max_steps = 200
        variables: dict[str, str | None] = {} if place.home is None else {"HOME": place.home}
        scope = _Scope(place.cwd, variables, stdin=place.stdin)
        try:
            scratch.run(argv, scope, _MAX_DEPTH - 3, "")
        except _TooLargeError:
            return True
        found = scratch.found
        inside = [
            t for t in found.targets
            if t.kind != "directory"
            and (anywhere or self.root is None or _under(t.path, self.root))
        ]  # fmt: skip
        return bool(inside or found.undetermined or found.refused)

    def apply(
        self,
        effects: Effects,
        scope: _Scope,
        depth: int,
        text: str,
        fds: Mapping[int, str | None] | None = None,
        place: utilities.Place | None = None,
    ) -> None:
        descriptors = scope.fds if fds is None else fds
        cwd = scope.cwd
        if effects.chdir is not None:
            cwd = resolve(effects.chdir, View(cwd, descriptors, self.links, self.root))
        if effects.lost_directory:
            cwd = None
        view = View(cwd, descriptors, self.links, self.root)
        for reason in effects.refused:
            said = f"`{_short(text)}`: {reason}" if text else reason
            if said not in self.found.refused:
                self.found.refused.append(said)
        for reason in effects.unknown:
            self.unknown(reason, text)
        for name in effects.assigns:
            scope.set(name, None)
        for path in effects.files:
            self.add(path, "file", view, text)
        for link, leads_to, symbolic in effects.links:
            link_path = resolve(link, view, follow_last=False)
            # A symbolic link is followed where it is used (`/proc/self/cwd`, `..` after
            # other links); a hard link is the file itself.
            file_path = (
                (leads_to if leads_to.startswith("/") else f"{cwd}/{leads_to}" if cwd else None)
                if symbolic
                else resolve(leads_to, view)
            )
            if link_path is not None and file_path is not None:
                self.links[link_path] = file_path
        for path in effects.directories:
            self.add(path, "directory", view, text)
        for path in effects.trees:
            self.tree(path, view, text)
        for source, destination in effects.copies:
            source_dir, landing = resolve(source, view), resolve(destination, view)
            if source_dir is None or landing is None:
                self.unknown("it copies into a directory only known when it runs", text)
                continue
            for file in _files_under(source_dir):
                self.add(
                    os.path.join(landing, os.path.relpath(file, source_dir)), "file", view, text
                )
        for argv, why in effects.isolated:
            if self.probe(argv, place or utilities.Place(cwd), anywhere=True):
                self.unknown(f"{why}, where the guard cannot map the files it writes", text)
        for where, reason in effects.unlisted:
            resolved = resolve(where, view)
            if resolved is None:
                self.unknown(reason, text)
            else:
                self.found.targets.append(Target(resolved, "unlisted", text, reason))
        if not (effects.commands or effects.scripts or effects.sourced):
            return
        if depth >= _MAX_DEPTH:
            self.unknown("it nests commands too deep to follow", text)
            return
        inner = scope.child()
        inner.cwd = cwd
        inner.fds = dict(descriptors)
        stdin = place.stdin if place is not None else scope.stdin
        inner.stdin = stdin
        for argv in effects.commands:
            self.run(
                argv, inner, depth + 1, text, stdin=stdin, feeds=place.feeds if place else None
            )
        for script in effects.scripts:
            self.script(parse_shell(script), inner.child(), depth + 1)
        for script in effects.sourced:
            self.script(parse_shell(script), scope, depth + 1)

    def tree(self, path: str, view: View, text: str) -> None:
        """A directory every file of which is written (`rm -r dir`)."""
        top = resolve(path, view, follow_last=False)
        if top is None:
            self.add(path, "file", view, text)  # reports why it is unknown
            return
        self.found.targets.append(Target(top, "tree", text))
        listed, empty = _tree_entries(top)
        self.step(len(listed) // 64)
        for file in listed:
            self.add(file, "file", view, text)
        for directory in empty:  # no file under it to refuse for another agent's lock on it
            self.add(directory, "directory", view, text)

    def change_directory(self, args: list[Arg], scope: _Scope) -> None:
        physical = "-P" in args
        operands = [a for a in args if a is None or not a.startswith("-") or a == "-"]
        if not operands:
            scope.cwd = scope.variables.get("HOME")
            return
        target = operands[0]
        if target is None or target == "-" or scope.cwd is None:
            scope.cwd = None
        elif physical:
            scope.cwd = resolve(target, self.view(scope))
        else:
            scope.cwd = lexical(target, scope.cwd)  # bash's logical directory, as `cd` does

    # -- redirections and input --------------------------------------------------------------

    def redirects(
        self,
        redirects: list[Redirect],
        scope: _Scope,
        fds: dict[int, str | None],
        stdin: Feed,
        text: str,
    ) -> tuple[Feed, dict[int, str | None]]:
        """Apply `redirects` in order: the files they write, and the command's input and
        descriptors afterwards."""
        for redirect in redirects:
            op, fd = redirect.op, redirect.fd
            if op in ("<<", "<<<"):
                if fd in (None, 0):
                    stdin = self.here_text(redirect, scope)
                fds[0 if fd is None else fd] = STREAM
                continue
            if redirect.target is None:
                continue
            if op in (">&", "<&") or (op == "&>" and fd is not None):
                target = self.field(redirect.target, scope)
                number = (1 if op == ">&" else 0) if fd is None else fd
                if target is not None and target.isdigit():
                    fds[number] = fds.get(int(target))  # a duplicate: no file opened
                    continue
                if target == "-":
                    fds.pop(number, None)
                    continue
                if op == "<&":
                    continue
                op = "&>"
            if _is_process_substitution(redirect.target):
                number = (0 if op == "<" else 1) if fd is None else fd
                fds[number] = STREAM
                subst = redirect.target[0]
                if number == 0 and isinstance(subst, Subst) and subst.text.startswith("<("):
                    stdin = self.output(subst.script, scope.child())  # `bash < <(cmd)`
                continue  # the commands inside were walked
            view = View(scope.cwd, fds, self.links, self.root)
            opened: str | None = None
            for path in self.fields(redirect.target, scope):
                if path is None:
                    if op in _WRITE_REDIRECTS:
                        self.unknown(
                            f"it redirects `{op}` into a file only known when it runs", text
                        )
                    continue
                opened = resolve(path, view)
                if op in _WRITE_REDIRECTS:
                    self.add(path, "file", view, text)
            if op in ("&>", "&>>"):
                fds[1] = fds[2] = opened
            elif op in ("<", "<>"):
                number = 0 if fd is None else fd
                fds[number] = opened
                if opened is not None:
                    self.view_files([opened], None)
                if number == 0:
                    stdin = Feed("file")
            elif op in _WRITE_REDIRECTS:
                fds[1 if fd is None else fd] = opened
        return stdin, fds

    def here_text(self, redirect: Redirect, scope: _Scope) -> Feed:
        text = expand_text(redirect.text, scope.lookup()) if redirect.text is not None else None
        if text is None:
            return UNKNOWN_INPUT
        if redirect.op == "<<<":
            text += "\n"
        if redirect.strip_tabs:
            text = "\n".join(line.lstrip("\t") for line in text.split("\n"))
        return Feed("text", text)

    def output(self, script: Script, scope: _Scope) -> Feed:
        """What `script` writes on its output, when the guard can tell (`echo`, `printf`,
        `cat` of a here-document); only asked of what feeds an interpreter."""
        feeds = [self.statement_output(statement, scope) for statement in script]
        if not feeds:
            return Feed("text", "")
        if any(f.kind == "unknown" for f in feeds):
            return UNKNOWN_INPUT
        if any(f.kind == "file" for f in feeds):
            return Feed("file")
        return Feed("text", "".join(f.text for f in feeds))

    def statement_output(self, statement: Statement, scope: _Scope) -> Feed:
        if isinstance(statement, Block) and not statement.redirects:
            return self.output(statement.body, scope)
        if not isinstance(statement, Simple) or not statement.words:
            return UNKNOWN_INPUT if not isinstance(statement, Simple) else Feed("text", "")
        stdin = scope.stdin
        for redirect in statement.redirects:
            if redirect.op in _WRITE_REDIRECTS and redirect.fd in (None, 1):
                return Feed("text", "")  # its output goes to a file, not down the pipe
            if redirect.op in ("<<", "<<<") and redirect.fd in (None, 0):
                stdin = self.here_text(redirect, scope)
            elif redirect.op == "<" and redirect.fd in (None, 0):
                stdin = Feed("file")
        argv = [arg for word in statement.words for arg in self.fields(word, scope)]
        if any(arg is None for arg in argv):
            return UNKNOWN_INPUT
        words = [arg for arg in argv if arg is not None]
        return _printed(words, stdin)

    # -- words ---------------------------------------------------------------------------

    def expand(self, word: Word, scope: _Scope) -> list[str] | None:
        return expand(word, scope.cwd or "/", scope.lookup(), recursive=scope.globstar)

    def fields(self, word: Word, scope: _Scope) -> list[Arg]:
        """The arguments one word becomes; [None] when they cannot be known."""
        if _is_process_substitution(word):
            return ["/dev/fd/63"]  # what bash passes for a process substitution
        return self.expanded(word, scope)

    def expanded(self, word: Word, scope: _Scope) -> list[Arg]:
        """`fields` of a word that is not a process substitution."""
        fields = self.expand(word, scope)
        if fields is not None:
            self.step(len(fields) // 64)
        return [None] if fields is None else list(fields)

    def field(self, word: Word, scope: _Scope) -> Arg:
        """One word as one argument; None when unknown or when it would be several."""
        fields = self.fields(word, scope)
        return fields[0] if len(fields) == 1 else None

    def substitutions(self, word: Word, scope: _Scope, depth: int) -> None:
        for segment in word:
            if isinstance(segment, Subst):
                self.script(segment.script, scope.child(), depth)

    def add(self, path: str, kind: Literal["file", "directory"], view: View, text: str) -> None:
        resolved = resolve(path, view)
        if resolved is None:
            if view.cwd is None and not path.startswith("/"):
                self.unknown(
                    f"it writes `{path}` relative to a directory only known when it runs "
                    "(after `cd -`, `popd`, `cd $VAR`, or run elsewhere: a remote shell, a "
                    "session, a login)",
                    text,
                )
            else:
                self.unknown(
                    f"it writes `{path}`, which names a file only known when it runs (another "
                    "process's directory, or a descriptor the command line did not open)",
                    text,
                )
            return
        if resolved != STREAM:
            self.found.targets.append(Target(resolved, kind, text))

    def view_files(self, paths: list[str], cwd: str | None) -> None:
        for path in paths:
            path = path if cwd is None else os.path.join(cwd, path)
            if path not in self.found.viewed and os.path.isfile(path):
                self.found.viewed.append(path)

    def unknown(self, reason: str, text: str) -> None:
        said = f"`{_short(text)}`: {reason}" if text else reason
        if said not in self.found.undetermined:
            self.found.undetermined.append(said)


_RULES: Final[dict[str, utilities.Rule]] = {
    name: rule
    for rules in (
        lockyard_cli.RULES, formatters.RULES, oneliners.RULES, archives.RULES, editors.RULES,
        wrappers.RULES, utilities.RULES,
    )
    for name, rule in rules.items()
}  # fmt: skip
"""Every command's rule, in one lookup: where two modules name a command, the earlier of
utilities, wrappers, editors, archives, one-liners, formatters, lockyard's own wins."""


def _rule(base: str) -> utilities.Rule | None:
    return _RULES.get(base)


_TEXT_COMMANDS: Final = frozenset({"echo", "printf", "cat", "cd", ":", "true", "eval"})
"""First words that mark an argument as a command line (`foo 'echo x > f'`)."""


def _is_command(name: str) -> bool:
    """Whether `name` is a command the guard has a rule for (one that may write)."""
    return (
        _rule(name) is not None
        or name in ("git", "eval", "source", ".")
        or oneliners.is_python(name)
    )


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _unknown(reason: str) -> Effects:
    return Effects(unknown=[reason])


def _is_process_substitution(word: Word) -> bool:
    return len(word) == 1 and isinstance(word[0], Subst) and word[0].text.startswith(("<(", ">("))


def _printed(words: list[str], stdin: Feed) -> Feed:
    """The output of `echo`, `printf` or `cat`/`tee` (passing their input on)."""
    name, args = os.path.basename(words[0]), words[1:]
    if name == "echo":
        return _echo(args)
    if name == "printf":
        return _printf(args)
    if name in ("cat", "tee"):
        files = [a for a in args if not a.startswith("-") or a == "-"]
        if name == "tee" or not files or files == ["-"]:
            return stdin
        return Feed("file")
    if name in (":", "true", "false"):
        return Feed("text", "")
    return UNKNOWN_INPUT


def _echo(args: list[str]) -> Feed:
    newline = True
    while args and args[0] in ("-n", "-e", "-E", "-ne", "-en", "-nE", "-En"):
        if "e" in args[0]:
            return UNKNOWN_INPUT  # escapes: bash, zsh and dash read them differently
        newline = newline and "n" not in args[0]
        args = args[1:]
    text = " ".join(args)
    if "\\" in text:
        return UNKNOWN_INPUT  # zsh and dash's echo read escapes, bash's does not
    return Feed("text", text + ("\n" if newline else ""))


_PRINTF_ESCAPES: Final = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"', "r": "\r"}


def _printf(args: list[str]) -> Feed:
    """`printf FORMAT [ARG...]` with `%s`, `%b` (no escapes in it), `%%` and the common
    escapes; anything else is unknown."""
    if not args or args[0].startswith("-"):
        return UNKNOWN_INPUT
    fmt, values = args[0], args[1:]
    out: list[str] = []
    while True:
        index, used = 0, 0
        while index < len(fmt):
            char = fmt[index]
            if char == "\\" and index + 1 < len(fmt):
                escape = _PRINTF_ESCAPES.get(fmt[index + 1])
                if escape is None:
                    return UNKNOWN_INPUT
                out.append(escape)
                index += 2
            elif char == "%" and index + 1 < len(fmt):
                spec = fmt[index + 1]
                if spec == "%":
                    out.append("%")
                elif spec in "sb":
                    value = values[used] if used < len(values) else ""
                    if spec == "b" and "\\" in value:
                        return UNKNOWN_INPUT
                    out.append(value)
                    used += 1
                else:
                    return UNKNOWN_INPUT
                index += 2
            else:
                out.append(char)
                index += 1
        values = values[used:]
        if not values or not used:
            break
    return Feed("text", "".join(out))


def _temporary(value: Word) -> str | None:
    """`$(mktemp)` / `$(mktemp -d)` with no directory given: a new name in the temporary
    directory, which is outside any repository (the guard assumes `$TMPDIR` is). The name is
    unknown, so a stand-in under /tmp takes its place; anything else stays unknown (None)."""
    if len(value) != 1 or not isinstance(value[0], Subst):
        return None
    script = value[0].script
    if len(script) != 1 or not isinstance(script[0], Simple):
        return None
    words = [literal(word) for word in script[0].words]
    if not words or words[0] != "mktemp" or script[0].redirects:
        return None
    for word in words[1:]:
        if word is None or word.startswith(("-p", "--tmpdir")) or "/" in word:
            return None  # a directory or path of its own choosing
    return "/tmp/lockyard-mktemp-stand-in"


def _files_under(directory: str | None) -> list[str]:
    """Every file (and symlink) under `directory`; the path itself if it is not a directory."""
    return _tree_entries(directory)[0]


def _tree_entries(directory: str | None) -> tuple[list[str], list[str]]:
    """(every file and symlink under `directory`, or the path itself if it is not a
    directory; the empty directories under it)."""
    if directory is None:
        return [], []
    if not os.path.isdir(directory) or os.path.islink(directory):
        return ([directory] if os.path.lexists(directory) else []), []
    found: list[str] = []
    empty: list[str] = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if d != ".git"]
        if not dirs and not files and root != directory:
            empty.append(root)
        found.extend(os.path.join(root, name) for name in files)
        found.extend(
            os.path.join(root, name) for name in dirs if os.path.islink(os.path.join(root, name))
        )
        if len(found) + len(empty) > MAX_FIELDS:
            break
    return found, empty


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
