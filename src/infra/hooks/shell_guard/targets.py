"""The write targets of a command line: every file it would write, and what cannot be known.

Walks the parsed statements in order, keeping what bash keeps: the directory (`cd`, `pushd`,
and `-C` / `env -C` for one command), the variables set earlier in the line, subshells that
forget both. Redirections, the rules of `utilities`, `oneliners` and `git`, and the commands
those run (`xargs`, `find -exec`, `sudo`, `bash -c`...) all add targets.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from . import formatters, git, oneliners, utilities
from .effects import Arg, Effects
from .syntax import (
    Block,
    ForLoop,
    Redirect,
    Script,
    Simple,
    Statement,
    Subst,
    Unparsed,
    Word,
    parse_shell,
)
from .words import MAX_FIELDS, expand, literal

TargetKind = Literal["file", "directory"]

_WRITE_REDIRECTS: Final = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
_MAX_DEPTH: Final = 8
_MAX_LOOP_VALUES: Final = 256
_CD: Final = frozenset({"cd", "pushd"})


@dataclass(frozen=True)
class Target:
    path: str
    """Absolute and normalised (symlinks are resolved later, by the lock store)."""
    kind: TargetKind
    command: str
    """The command that writes it, as written."""


@dataclass
class WriteTargets:
    targets: list[Target] = field(default_factory=list)
    undetermined: list[str] = field(default_factory=list)
    """Why some writes cannot be named, one sentence each (with the command)."""

    @property
    def files(self) -> list[str]:
        return list(dict.fromkeys(t.path for t in self.targets if t.kind == "file"))


@dataclass
class _Scope:
    cwd: str | None
    variables: dict[str, str | None]

    def child(self) -> _Scope:
        return _Scope(self.cwd, dict(self.variables))

    def lookup(self) -> Mapping[str, str | None]:
        known = dict(self.variables)
        known["PWD"] = self.cwd
        return known


def write_targets(command: str, cwd: str, home: str | None = None) -> WriteTargets:
    """What `command`, run in directory `cwd`, would write (see the module docstring).

    `home` is `$HOME` for `~` and `$HOME`; other variables from the environment the command
    will run in are unknown to the guard.
    """
    found = WriteTargets()
    variables: dict[str, str | None] = {} if home is None else {"HOME": home}
    _Walker(found).script(parse_shell(command), _Scope(os.path.normpath(cwd), variables), 0)
    return found


class _Walker:
    def __init__(self, found: WriteTargets) -> None:
        self.found = found
        self.links: dict[str, str] = {}
        """Links the command line creates (absolute link -> absolute file it leads to)."""
        self.git_changed_by: str | None = None
        """The first git command of the line that changes what git answers (index, refs)."""

    def script(self, script: Script, scope: _Scope, depth: int) -> None:
        for statement in script:
            self.statement(statement, scope, depth)

    def statement(self, statement: Statement, scope: _Scope, depth: int) -> None:
        if isinstance(statement, Simple):
            self.simple(statement, scope, depth)
        elif isinstance(statement, Block):
            inner = scope.child() if statement.subshell else scope
            self.script(statement.body, inner, depth)
            self.redirects(statement.redirects, scope, depth, "")
        elif isinstance(statement, ForLoop):
            self.loop(statement, scope, depth)
        else:
            assert isinstance(statement, Unparsed)
            self.unknown(f"the guard cannot parse `{_short(statement.text)}`", "")

    def loop(self, loop: ForLoop, scope: _Scope, depth: int) -> None:
        values: list[str] | None = []
        for word in loop.values or []:
            self.substitutions(word, scope, depth)
            fields = expand(word, scope.cwd or "/", scope.lookup()) if scope.cwd else None
            if fields is None or values is None:
                values = None
            else:
                values.extend(fields)
        if loop.values is None or values is None or len(values) > _MAX_LOOP_VALUES:
            scope.variables[loop.variable] = None
            self.script(loop.body, scope, depth)
        else:
            for value in values or [""]:
                scope.variables[loop.variable] = value
                self.script(loop.body, scope, depth)
        self.redirects(loop.redirects, scope, depth, "")

    def simple(self, command: Simple, scope: _Scope, depth: int) -> None:
        for _, value in command.assignments:
            self.substitutions(value, scope, depth)
        for word in command.words:
            self.substitutions(word, scope, depth)
        for redirect in command.redirects:
            self.script(redirect.nested, scope.child(), depth)
            if redirect.target is not None:
                self.substitutions(redirect.target, scope, depth)
        argv = [arg for word in command.words for arg in self.fields(word, scope)]
        self.redirects(command.redirects, scope, depth, command.text)
        if not command.words:
            for name, value in command.assignments:
                fields = expand(value, scope.cwd, scope.lookup()) if scope.cwd else None
                scope.variables[name] = (
                    fields[0] if fields is not None and len(fields) == 1 else _temporary(value)
                )
            return
        self.run(argv, scope, depth, command.text)

    def run(self, argv: list[Arg], scope: _Scope, depth: int, text: str) -> None:
        """Judge one command (by name) run in `scope`."""
        if not argv:
            return
        name = argv[0]
        if name is None:
            self.unknown("it runs a command whose name is only known when it runs", text)
            return
        base = os.path.basename(name)
        args = argv[1:]
        if base in _CD:
            self.change_directory(args, scope)
            return
        if base == "popd":
            scope.cwd = None
            return
        place = utilities.Place(scope.cwd, scope.variables.get("HOME"))
        effects = self.effects_of(base, args, place, text)
        if effects is None:
            return
        self.apply(effects, scope, depth, text)

    def effects_of(
        self, base: str, args: list[Arg], place: utilities.Place, text: str
    ) -> Effects | None:
        if base == "git":
            effects = git.git(args, place, after=self.git_changed_by)
            if self.git_changed_by is None and git.changes_git_state(args):
                self.git_changed_by = _short(text)
            return effects
        if oneliners.is_python(base):
            return oneliners.python(args, place)
        rule = utilities.RULES.get(base) or oneliners.RULES.get(base) or formatters.RULES.get(base)
        return None if rule is None else rule(args, place)

    def apply(self, effects: Effects, scope: _Scope, depth: int, text: str) -> None:
        cwd = scope.cwd
        if effects.chdir is not None:
            cwd = None if cwd is None else os.path.normpath(os.path.join(cwd, effects.chdir))
        for reason in effects.unknown:
            self.unknown(reason, text)
        for path in effects.files:
            self.add(path, "file", cwd, text)
        for link, leads_to in effects.links:
            link_path, file_path = _absolute(link, cwd), _absolute(leads_to, cwd)
            if link_path is not None and file_path is not None:
                self.links[link_path] = file_path
        for path in effects.directories:
            self.add(path, "directory", cwd, text)
        for path in effects.trees:
            for file in _files_under(_absolute(path, cwd)):
                self.add(file, "file", cwd, text)
            if cwd is None and not os.path.isabs(path):
                self.add(path, "file", cwd, text)
        for source, destination in effects.copies:
            source_dir, landing = _absolute(source, cwd), _absolute(destination, cwd)
            if source_dir is None or landing is None:
                self.unknown("it copies into a directory only known when it runs", text)
                continue
            for file in _files_under(source_dir):
                self.add(
                    os.path.join(landing, os.path.relpath(file, source_dir)), "file", cwd, text
                )
        if depth >= _MAX_DEPTH and (effects.commands or effects.scripts):
            self.unknown("it nests commands too deep to follow", text)
            return
        inner = _Scope(cwd, dict(scope.variables))
        for argv in effects.commands:
            self.run(argv, inner, depth + 1, text)
        for script in effects.scripts:
            self.script(parse_shell(script), inner.child(), depth + 1)

    def change_directory(self, args: list[Arg], scope: _Scope) -> None:
        operands = [a for a in args if a is None or not a.startswith("-") or a == "-"]
        if not operands:
            scope.cwd = scope.variables.get("HOME")
            return
        target = operands[0]
        if target is None or target == "-" or scope.cwd is None:
            scope.cwd = None
        else:
            scope.cwd = os.path.normpath(os.path.join(scope.cwd, target))

    def redirects(self, redirects: list[Redirect], scope: _Scope, depth: int, text: str) -> None:
        for redirect in redirects:
            if redirect.target is None:
                continue
            op = redirect.op
            if op == ">&" or (op == "&>" and redirect.fd is not None):
                target = self.field(redirect.target, scope)
                if target is not None and (target.isdigit() or target == "-"):
                    continue  # fd duplication (2>&1) or closing
                op = "&>"
            if op not in _WRITE_REDIRECTS:
                continue
            if any(isinstance(s, Subst) for s in redirect.target) and all(
                isinstance(s, Subst) and s.text.startswith(">(") for s in redirect.target
            ):
                continue  # > >(cmd): the commands were walked
            for path in self.fields(redirect.target, scope):
                if path is None:
                    self.unknown(f"it redirects `{op}` into a file only known when it runs", text)
                else:
                    self.add(path, "file", scope.cwd, text)

    def fields(self, word: Word, scope: _Scope) -> list[Arg]:
        """The arguments one word becomes; [None] when they cannot be known."""
        if len(word) == 1 and isinstance(word[0], Subst) and word[0].text.startswith(("<(", ">(")):
            return ["/dev/fd/63"]  # what bash passes for a process substitution
        fields = expand(word, scope.cwd or "/", scope.lookup())
        return [None] if fields is None else list(fields)

    def field(self, word: Word, scope: _Scope) -> Arg:
        """One word as one argument; None when unknown or when it would be several."""
        fields = self.fields(word, scope)
        return fields[0] if len(fields) == 1 else None

    def substitutions(self, word: Word, scope: _Scope, depth: int) -> None:
        for segment in word:
            if isinstance(segment, Subst):
                self.script(segment.script, scope.child(), depth)

    def add(self, path: str, kind: TargetKind, cwd: str | None, text: str) -> None:
        absolute = _absolute(path, cwd)
        if absolute is None:
            self.unknown(
                f"it writes `{path}` relative to a directory only known when it runs "
                "(after `cd -`, `popd` or `cd $VAR`)",
                text,
            )
            return
        self.found.targets.append(Target(absolute, kind, text))
        seen = {absolute}
        while absolute in self.links and self.links[absolute] not in seen:
            absolute = self.links[absolute]  # a link made earlier in this line: its file too
            seen.add(absolute)
            self.found.targets.append(Target(absolute, kind, text))

    def unknown(self, reason: str, text: str) -> None:
        said = f"`{_short(text)}`: {reason}" if text else reason
        if said not in self.found.undetermined:
            self.found.undetermined.append(said)


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


def _absolute(path: str, cwd: str | None) -> str | None:
    if os.path.isabs(path):
        return os.path.normpath(path)
    if cwd is None:
        return None
    return os.path.normpath(os.path.join(cwd, path))


def _files_under(directory: str | None) -> list[str]:
    """Every file (and symlink) under `directory`; the path itself if it is not a directory."""
    if directory is None:
        return []
    if not os.path.isdir(directory) or os.path.islink(directory):
        return [directory] if os.path.lexists(directory) else []
    found: list[str] = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if d != ".git"]
        found.extend(os.path.join(root, name) for name in files)
        found.extend(
            os.path.join(root, name) for name in dirs if os.path.islink(os.path.join(root, name))
        )
        if len(found) > MAX_FIELDS:
            break
    return found


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
