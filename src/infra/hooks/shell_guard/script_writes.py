"""What a sed script or an awk program writes and runs by itself, read from its text.

sed (GNU): `w FILE` and `W FILE`, the `w FILE` flag of `s`, `e COMMAND`, and the bare `e` (or
`s///e`), which runs text the script builds. awk: `print > "f"`, `print >> "f"`, `printf ... >
"f"`, `print | "cmd"`, `"cmd" | getline` and `system("cmd")`. A file or command named by a
string literal is judged as written (the command in turn, as `sh -c` runs it); one named by an
expression is undetermined, and so is a script the reader cannot follow. Programs read from a
file (`sed -f`, `awk -f`) are not read, like every program run from a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

STANDARD_STREAMS: Final = frozenset(
    {"/dev/stdout", "/dev/stderr", "/dev/fd/1", "/dev/fd/2", "-", "/dev/null"}
)
"""Names sed and awk write to without creating a file."""


@dataclass
class ScriptWrites:
    files: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    """Shell command lines it runs (`sh -c`)."""
    unknown: list[str] = field(default_factory=list)


class _UnreadableError(Exception):
    pass


# -- sed -----------------------------------------------------------------------------------------

_SED_PLAIN: Final = frozenset("=dDgGhHnNpPxzF{}")
_SED_NUMBER: Final = frozenset("qQlL")
_SED_LABEL: Final = frozenset("btT:v")


def sed_writes(script: str) -> ScriptWrites:
    """What the sed `script` (one `-e` text, or the script operand) writes and runs."""
    found = ScriptWrites()
    try:
        _Sed(script, found).read()
    except _UnreadableError as why:
        found.unknown.append(f"its sed script cannot be read by the guard ({why})")
    return found


class _Sed:
    def __init__(self, text: str, found: ScriptWrites) -> None:
        self.text = text
        self.at = 0
        self.found = found

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def rest_of_line(self) -> str:
        end = self.text.find("\n", self.at)
        end = len(self.text) if end < 0 else end
        line = self.text[self.at : end]
        self.at = end
        return line

    def read(self) -> None:
        while True:
            while self.peek() and self.peek() in " \t\n;":
                self.at += 1
            if not self.peek():
                return
            if self.peek() == "#":
                self.rest_of_line()
                continue
            self.address()
            while self.peek() in (" ", "\t", "!"):
                self.at += 1
            self.command()

    def address(self) -> None:
        if not self.one_address():
            return
        if self.peek() == ",":
            self.at += 1
            if self.peek() in ("+", "~"):
                self.at += 1
            if not self.one_address():
                raise _UnreadableError("an address range without its end")

    def one_address(self) -> bool:
        char = self.peek()
        if char.isdigit():
            while self.peek().isdigit() or self.peek() == "~":
                self.at += 1
            return True
        if char == "$":
            self.at += 1
            return True
        if char in ("/", "\\"):
            if char == "\\":
                self.at += 1
            delimiter = self.peek()
            self.at += 1
            self.delimited(delimiter)
            while self.peek() in ("I", "M"):
                self.at += 1
            return True
        return False

    def delimited(self, delimiter: str) -> str:
        """The text up to the next unescaped `delimiter` (consumed)."""
        if not delimiter or delimiter in "\n\\":
            raise _UnreadableError("a regular expression without its delimiter")
        start = self.at
        while self.at < len(self.text):
            char = self.text[self.at]
            if char == "\\":
                self.at += 2
                continue
            self.at += 1
            if char == delimiter:
                return self.text[start : self.at - 1]
        raise _UnreadableError("an unterminated regular expression")

    def command(self) -> None:
        char = self.peek()
        self.at += 1
        if char in _SED_PLAIN:
            return
        if char in "aic":
            self.text_argument()
        elif char in "rR":
            self.rest_of_line()
        elif char in "wW":
            self.write(self.rest_of_line())
        elif char == "e":
            self.execute(self.rest_of_line().strip())
        elif char == "s":
            self.substitute()
        elif char == "y":
            delimiter = self.peek()
            self.at += 1
            self.delimited(delimiter)
            self.delimited(delimiter)
        elif char in _SED_LABEL:
            while self.peek() and self.peek() not in ";\n":
                self.at += 1
        elif char in _SED_NUMBER:
            while self.peek() in (" ", "\t") or self.peek().isdigit():
                self.at += 1
        else:
            raise _UnreadableError(f"`{char}` is not a sed command it knows")

    def text_argument(self) -> None:
        """`a text`, `a\\` + lines: up to the end of the last line not ending in a backslash."""
        while True:
            line = self.rest_of_line()
            if not line.endswith("\\") or not self.peek():
                return
            self.at += 1  # the newline a trailing backslash continues over

    def substitute(self) -> None:
        delimiter = self.peek()
        self.at += 1
        self.delimited(delimiter)
        self.delimited(delimiter)
        while True:
            char = self.peek()
            if char in ("g", "p", "i", "I", "m", "M") or char.isdigit():
                self.at += 1
            elif char == "e":
                self.at += 1
                self.execute("")
            elif char == "w":
                self.at += 1
                self.write(self.rest_of_line())
                return
            else:
                return

    def write(self, name: str) -> None:
        name = name.lstrip(" \t")
        if not name:
            raise _UnreadableError("`w` without a file name")
        if name not in STANDARD_STREAMS:
            self.found.files.append(name)

    def execute(self, command: str) -> None:
        if command:
            self.found.commands.append(command)
        else:
            self.found.unknown.append(
                "its sed script runs the text it edits as a command (`e`): what that runs is "
                "only known when it runs"
            )


# -- awk -----------------------------------------------------------------------------------------

_AWK_TOKEN: Final = re.compile(
    r"""(?P<space>[ \t]+|\\\n)
      |(?P<comment>\#[^\n]*)
      |(?P<string>"(?:[^"\\\n]|\\.)*")
      |(?P<name>[A-Za-z_][A-Za-z_0-9]*)
      |(?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+)
      |(?P<op>>>|\|\||\|&|&&|[<>!=]=|\+\+|--|[-+*/%^]=|[^\s])
      |(?P<newline>\n)""",
    re.VERBOSE,
)
_OPERAND_END: Final = frozenset({"name", "number", "string", ")", "]", "$", "++", "--"})
"""After these a `/` divides; elsewhere it starts a regular expression."""
_STATEMENT_END: Final = frozenset({";", "\n", "}", "{"})


def awk_writes(program: str) -> ScriptWrites:
    """What the awk `program` writes and runs."""
    found = ScriptWrites()
    try:
        tokens = _awk_tokens(program)
    except _UnreadableError as why:
        found.unknown.append(f"its awk program cannot be read by the guard ({why})")
        return found
    depth = 0
    printing: int | None = None  # the parenthesis depth a print statement started at
    for index, (kind, text) in enumerate(tokens):
        following = tokens[index + 1] if index + 1 < len(tokens) else ("", "")
        if kind == "op" and text == "(":
            depth += 1
        elif kind == "op" and text == ")":
            depth -= 1
        elif kind == "name" and text in ("print", "printf"):
            printing = depth
        elif kind in ("op", "newline") and text in _STATEMENT_END and depth == (printing or 0):
            printing = None
        elif kind == "op" and text in (">", ">>") and printing == depth:
            after = tokens[index + 2] if index + 2 < len(tokens) else ("newline", "\n")
            ends = after[1] in _STATEMENT_END or after[1] == ")"
            _awk_target(found, following if ends else ("", ""), "prints to a file")
        elif kind == "op" and text in ("|", "|&"):
            if text == "|" and printing == depth:
                _awk_command(found, following)
            elif text == "|" and following == ("name", "getline") and index > 0:
                _awk_command(found, tokens[index - 1])
            else:
                found.unknown.append("its awk program runs a command (`|&`)")
        elif kind == "name" and text == "system" and following == ("op", "("):
            call = tokens[index + 2 : index + 4]
            if len(call) == 2 and call[0][0] == "string" and call[1] == ("op", ")"):
                _awk_command(found, call[0])
            else:
                _awk_command(found, ("", ""))
    return found


def _awk_tokens(program: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    at = 0
    while at < len(program):
        previous = tokens[-1] if tokens else ("", "")
        if program[at] == "/" and (
            previous[0] not in _OPERAND_END and previous[1] not in _OPERAND_END
        ):
            end = _regex_end(program, at + 1)
            tokens.append(("regex", program[at:end]))
            at = end
            continue
        match = _AWK_TOKEN.match(program, at)
        if match is None:
            raise _UnreadableError("a string without its end")
        at = match.end()
        kind = match.lastgroup or ""
        if kind in ("space", "comment"):
            continue
        tokens.append((kind, match.group()))
    return tokens


def _regex_end(program: str, at: int) -> int:
    in_brackets = False
    while at < len(program):
        char = program[at]
        if char == "\\":
            at += 2
            continue
        if char == "\n":
            break
        if char == "[":
            in_brackets = True
        elif char == "]":
            in_brackets = False
        elif char == "/" and not in_brackets:
            return at + 1
        at += 1
    raise _UnreadableError("a regular expression without its end")


def _literal(token: tuple[str, str]) -> str | None:
    kind, text = token
    if kind != "string":
        return None
    return re.sub(
        r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), text[1:-1]
    )


def _awk_target(found: ScriptWrites, token: tuple[str, str], what: str) -> None:
    name = _literal(token)
    if name is None:
        found.unknown.append(f"its awk program {what} whose name is only known when it runs")
    elif name not in STANDARD_STREAMS:
        found.files.append(name)


def _awk_command(found: ScriptWrites, token: tuple[str, str]) -> None:
    command = _literal(token)
    if command is None:
        found.unknown.append(
            "its awk program runs a command it builds (`system`, `|`): only known when it runs"
        )
    else:
        found.commands.append(command)
