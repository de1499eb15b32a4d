"""The shell parser: a command line becomes a small tree of our own (statements and words).

tree-sitter with its Bash grammar does the parsing (it read the most of the nasty cases right
and is ten times faster than bashlex: `benchmarks/compare_shell_parsers.py`). This module turns
its concrete tree into the few shapes the guard cares about, so nothing else depends on
tree-sitter's node names:

- `Simple`: one simple command (`a=1 sed -i s/x/y/ f > out`), its words and redirections;
- `Block`: statements run together (groups, `if`, `while`, `case`), in the current shell or,
  with `subshell=True`, in a child (`( ... )`);
- `Pipeline`: parts that each run in a child, each reading what the one before it prints;
- `Function`: a function definition (its body runs where the function is called);
- `ForLoop`: a `for` over words, so the loop variable can be expanded;
- `Unparsed`: text the grammar could not read (the guard cannot tell what it does).

Every command substitution runs, wherever the grammar puts it (inside `$(( ))`, `${x:=...}`,
an array subscript, a test): those the shapes above do not hold are found by a last walk over
the tree and judged before the statement they sit in. Words keep their quoting (`Lit.quoted`),
so globs and braces expand only where bash would; here-documents and here-strings keep their
text, so a command reading code from them can be judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

import tree_sitter_bash
from tree_sitter import Language, Node, Parser


@dataclass(frozen=True)
class Lit:
    """Literal text; `quoted` text is never split, globbed or brace-expanded."""

    text: str
    quoted: bool = False


@dataclass(frozen=True)
class Param:
    """`$name` / `${name}`: expandable when the guard knows the variable."""

    name: str
    quoted: bool = False


@dataclass(frozen=True)
class Opaque:
    """An expansion the guard does not evaluate (`${x:-y}`, `$((1+2))`, `$@`)."""

    text: str


@dataclass(frozen=True)
class Subst:
    """`$(...)`, backquotes or `<(...)`: its output is unknown, its commands run."""

    script: Script
    text: str


Segment = Lit | Param | Opaque | Subst
Word = tuple[Segment, ...]


@dataclass
class Redirect:
    op: str
    """`>`, `>>`, `>|`, `&>`, `&>>`, `<>`, `<`, `>&`, `<&`, `<<`, `<<<` ..."""
    fd: int | None
    target: Word | None
    nested: Script = field(default_factory=list)
    """Commands that run as part of it (substitutions in an unquoted here-doc body)."""
    text: Word | None = None
    """What a here-document or here-string feeds the command (a here-string's newline is
    added when it is expanded); None for other redirections."""
    strip_tabs: bool = False
    """`<<-`: leading tabs are removed from each line of the here-document."""


@dataclass
class Simple:
    assignments: list[tuple[str, Word]]
    words: list[Word]
    redirects: list[Redirect]
    text: str
    declaration: str | None = None
    """`declare`, `local`, `export`, `readonly`, `typeset`: `words` are its options and bare
    names, `assignments` its `name=value` operands."""
    appends: frozenset[str] = frozenset()
    """Names assigned with `+=` (the value is added to the old one)."""


@dataclass
class Block:
    body: Script
    subshell: bool = False
    redirects: list[Redirect] = field(default_factory=list)


@dataclass
class Pipeline:
    parts: list[Script]
    """Each part runs in a child shell and reads what the part before it writes."""


@dataclass
class Function:
    name: str
    body: Script
    subshell: bool
    """A body in `( ... )` runs in a child shell."""
    redirects: list[Redirect] = field(default_factory=list)
    """Applied each time the function runs, not when it is defined."""


@dataclass
class ForLoop:
    variable: str
    values: list[Word] | None
    """None: `for x; do` (the positional parameters, unknown here)."""
    body: Script
    redirects: list[Redirect] = field(default_factory=list)


@dataclass
class Unparsed:
    text: str
    why: str = ""
    """What the guard could not read in it, when more is known than "a syntax error"."""


Statement = Simple | Block | Pipeline | Function | ForLoop | Unparsed
Script = list[Statement]

_PARSER: Final = Parser(Language(tree_sitter_bash.language()))

_SEQUENCES: Final = frozenset(
    {"program", "list", "compound_statement", "do_group", "if_statement", "elif_clause",
     "else_clause", "while_statement", "case_statement", "case_item", "negated_command"}
)  # fmt: skip
_SILENT: Final = frozenset(
    {"comment", "test_command", "unset_command", "arithmetic_expansion"}
)  # fmt: skip
_WORD_NODES: Final = frozenset(
    {"word", "number", "string", "raw_string", "ansi_c_string", "translated_string",
     "concatenation", "simple_expansion", "expansion", "command_substitution",
     "process_substitution", "arithmetic_expansion", "brace_expression"}
)  # fmt: skip
_SUBSTITUTIONS: Final = frozenset({"command_substitution", "process_substitution"})
_REDIRECTS: Final = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_ANSI_ESCAPES: Final = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "e": "\x1b",
}
_RUNS_SOMETHING: Final = re.compile(rb"\$\(|`|<\(|>\(")
_ASSIGNED: Final = re.compile(
    r"\$\{([A-Za-z_]\w*):?=|([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)"
    r"|(?:\+\+|--)\s*([A-Za-z_]\w*)|([A-Za-z_]\w*)\s*(?:\+\+|--)"
)


MAX_NODES: Final = 20_000
"""Statements and words read from one command line, at most (`CommandTooLargeError` past it)."""


class CommandTooLargeError(Exception):
    """The command line has more statements and words than the guard reads."""


def parse_shell(command: str) -> Script:
    """The statements of `command`. Text the grammar rejects comes back as `Unparsed` parts;
    `<>` (read-write open, which the grammar lacks) is read as the write redirection it is."""
    source = command.encode(errors="surrogateescape")
    tree = _PARSER.parse(source)
    if tree.root_node.has_error and b"<<" in source:
        # The grammar fails on `cmd <<'EOF' 2>&1 | tail`: a redirection between a here-doc
        # operator and a pipe. Bash gives them to the same command in any order.
        repaired = _HEREDOC_THEN_REDIRECTS.sub(_heredoc_last, command)
        if repaired != command:
            again = _PARSER.parse(repaired.encode(errors="surrogateescape"))
            if not again.root_node.has_error:
                source, tree = repaired.encode(errors="surrogateescape"), again
    return _Reader(source).statements(tree.root_node)


_HEREDOC_THEN_REDIRECTS: Final = re.compile(
    r"(?P<heredoc><<-?[ \t]*(?:'[^'\n]*'|\"[^\"\n]*\"|\\?[\w.-]+))"
    r"(?P<redirects>(?:[ \t]+\d*(?:>>|>\||&>>|&>|>&|<&|>|<)[ \t]*[^\s|&;<>]+)+)"
    r"(?=[ \t]*(?:\|&?|&&|\|\||;|$))",
    re.MULTILINE,
)


def _heredoc_last(match: re.Match[str]) -> str:
    return f"{match.group('redirects').lstrip()} {match.group('heredoc')}"


def assigned_in(text: str) -> set[str]:
    """Variables an arithmetic text or a `${x:=...}` expansion may assign (`x=1`, `i++`,
    `y+=2`, `${x:=y}`): their values are unknown afterwards."""
    if "=" not in text and "++" not in text and "--" not in text:
        return set()
    return {name for match in _ASSIGNED.finditer(text) for name in match.groups() if name}


class _Reader:
    """One parse: the source (here-document bodies are read from it by offset), the
    substitutions already turned into statements, and where the next here-doc body starts."""

    def __init__(self, source: bytes) -> None:
        self.source = source
        self.visited: set[int] = set()
        """Substitution nodes already judged (their ids)."""
        self.checked: set[int] = set()
        """Statement nodes already searched for substitutions their shape did not hold."""
        self.heredoc_cursor = 0
        self.runs_something = _RUNS_SOMETHING.search(source) is not None
        self.nodes = 0

    def count(self) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise CommandTooLargeError(f"more than {MAX_NODES:,} statements and words")

    def statements(self, node: Node) -> Script:
        out: Script = []
        for child in node.named_children:
            out.extend(self.statement(child))
        return out

    def statement(self, node: Node) -> Script:
        self.count()
        found = self._statement(node)
        if self.runs_something:
            missed = self.missed(node)
            if missed:
                return [*missed, *found]  # substitutions run before their statement
        return found

    def missed(self, node: Node) -> Script:
        """Substitutions under `node` that no shape took in (`$(( $(cmd) ))`, `${x:=$(cmd)}`,
        `a[$(cmd)]=1`), each as a child shell's statements; searched once per node."""
        self.checked.add(node.id)
        out: Script = []
        stack = list(reversed(node.children))
        while stack:
            child = stack.pop()
            if child.id in self.visited or child.id in self.checked:
                continue
            if child.type in _SUBSTITUTIONS:
                out.extend(self.substitution(child))
                continue
            parent = child.parent
            if child.type == "word" and parent is not None and parent.type == "expansion":
                out.extend(_reparsed_substitutions(_text(child)))
                continue
            stack.extend(reversed(child.children))
        return out

    def substitution(self, node: Node) -> Script:
        self.visited.add(node.id)
        return [Block(self.substituted(node), subshell=True)]

    def substituted(self, node: Node) -> Script:
        """The statements of `$(...)` or `<(...)`. Bash 5.2 runs such a substitution from its
        own reprint of the text, which drops the first `;` after a here-document inside
        (`$(cat <<EOF ... EOF\ncp a; b)` runs `cp a b`): the guard cannot tell what runs."""
        statements = self.statements(node)
        if not _separator_after_heredoc(node):
            return statements
        why = (
            "bash joins the commands around a `;` or `&` after a here-document inside `$(...)`; "
            "put each command after the here-document on its own line"
        )
        return [Unparsed(_text(node), why), *statements]

    def _statement(self, node: Node) -> Script:
        kind = node.type
        if kind in _SILENT or (kind in _WORD_NODES and node.parent is not None):
            return self.substitutions_in(node)
        if _has_real_error(node):
            return [Unparsed(_text(node))]
        if kind == "command":
            return [self.simple(node)]
        if kind == "declaration_command":
            return [self.declaration(node)]
        if kind in ("variable_assignment", "variable_assignments"):
            assignments, appends = self.assignments(node)
            return [Simple(assignments, [], [], _text(node), appends=frozenset(appends))]
        if kind == "redirected_statement":
            return self.redirected(node)
        if kind == "pipeline":
            return self.pipeline(node)
        if kind == "subshell":
            return [Block(self.statements(node), subshell=True)]
        if kind == "function_definition":
            return [self.function(node)]
        if kind == "for_statement":
            return [self.loop(node)]
        if kind == "compound_statement" and _text(node).startswith("(("):
            return [*self.statements(node), *_arithmetic_assignments(_text(node))]
        if kind in _SEQUENCES:
            return [Block(self.statements(node))]
        if kind == "c_style_for_statement":
            body = node.child_by_field_name("body")
            header = _text(node)[: body.start_byte - node.start_byte] if body else _text(node)
            inner = self.statement(body) if body is not None else []
            # The header's assignments (`i=0`, `i++`) make the variables unknown in the body.
            return [*_arithmetic_assignments(header), Block(inner)]
        return self.substitutions_in(node)

    def simple(self, node: Node) -> Simple:
        assignments: list[tuple[str, Word]] = []
        appends: set[str] = set()
        words: list[Word] = []
        redirects: list[Redirect] = []
        descriptor: int | None = None
        children = node.named_children
        for index, child in enumerate(children):
            kind = child.type  # (each `.type` is a call into the parser: read it once)
            if kind == "variable_assignment":
                pairs, added = self.assignments(child)
                assignments.extend(pairs)
                appends |= added
            elif kind == "command_name":
                words.append(self.word(child.named_children[0]))
            elif kind in _REDIRECTS:
                redirect = self.redirect(child)
                if descriptor is not None and redirect.fd is None:
                    redirect.fd = descriptor
                descriptor = None
                redirects.append(redirect)
            elif (
                kind in ("word", "number")
                # (`next_named_sibling` walks from the first child: quadratic on long commands)
                and index + 1 < len(children)
                and _names_a_descriptor(child, children[index + 1])
            ):
                descriptor = int(_text(child))  # `exec 0<f`: the grammar reads 0 as a word
            elif kind in _WORD_NODES:
                words.append(self.word(child))
            elif kind != "comment":
                words.append((Opaque(_text(child)),))
        return Simple(assignments, words, redirects, _text(node), appends=frozenset(appends))

    def declaration(self, node: Node) -> Simple:
        assignments: list[tuple[str, Word]] = []
        appends: set[str] = set()
        words: list[Word] = []
        for child in node.named_children:
            if child.type in ("variable_assignment", "variable_assignments"):
                pairs, added = self.assignments(child)
                assignments.extend(pairs)
                appends |= added
            elif child.type in _WORD_NODES or child.type == "variable_name":
                words.append(self.word(child))
        keyword = _text(node.children[0]) if node.children else "declare"
        return Simple(
            assignments, words, [], _text(node), declaration=keyword, appends=frozenset(appends)
        )

    def assignments(self, node: Node) -> tuple[list[tuple[str, Word]], set[str]]:
        if node.type == "variable_assignments":
            pairs: list[tuple[str, Word]] = []
            appends: set[str] = set()
            for child in node.named_children:
                more, added = self.assignments(child)
                pairs.extend(more)
                appends |= added
            return pairs, appends
        if node.type != "variable_assignment":
            return [], set()
        name_node = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        name = _text(name_node) if name_node is not None else ""
        word: Word = (Lit(""),) if value is None else self.word(value)
        if value is not None and value.type == "array":
            word = (Opaque(_text(value)),)
        if name_node is not None and name_node.type == "subscript":
            word = (Opaque(_text(node)),)  # an array element: the guard keeps no arrays
        appends = {name} if any(c.type == "+=" for c in node.children) else set()
        return [(name, word)], appends

    def pipeline(self, node: Node) -> Script:
        """The grammar groups `a && b 2>&1 | c` as `(a && b 2>&1) | c`; bash runs `a` first,
        in the current shell, and pipes `b` into `c`: the list's last command is the first
        part of the pipeline."""
        parts = [self.statement(part) for part in node.named_children]
        before: Script = []
        if parts and node.named_children and _is_list(node.named_children[0]):
            sequence = _flattened(parts[0])
            before, parts[0] = sequence[:-1], sequence[-1:]
        return [*before, Pipeline(parts)]

    def redirected(self, node: Node) -> Script:
        body = node.child_by_field_name("body")
        if body is not None and body.type in ("list", "pipeline"):
            # The grammar hangs `a && b > f` and `a | b > f` on the whole list or pipeline;
            # bash gives the redirections to its last command.
            plain = [
                self.redirect(child)
                for child in node.children_by_field_name("redirect")
                if child.type != "heredoc_redirect"
            ]
            if len(plain) == len(node.children_by_field_name("redirect")):
                return _attach_last(_flattened(self.statement(body)), plain)
        redirects: list[Redirect] = []
        parts: list[Script] = []
        after: Script = []
        for child in node.children_by_field_name("redirect"):
            if child.type == "heredoc_redirect":
                redirect, more, piped, rest = self.heredoc_and_rest(child)
                redirects.append(redirect)
                redirects.extend(more)
                parts.extend(piped)
                after.extend(rest)
            else:
                redirects.append(self.redirect(child))
        inner = self.statement(body) if body is not None else []
        if len(inner) == 1 and isinstance(inner[0], Simple):
            _descriptor_from_last_word(inner[0], body, node, redirects)
            inner[0].redirects.extend(redirects)
            head: Script = inner
        else:
            head = [Block(inner, redirects=redirects)]
        if parts:
            return [Pipeline([head, *parts]), *after]
        return [*head, *after]

    def heredoc_and_rest(self, node: Node) -> tuple[Redirect, list[Redirect], list[Script], Script]:
        """A here-doc and what the grammar hung under it: further redirections of the same
        command (`cat <<EOF > out`), the rest of its pipeline (`cat <<EOF | python3`) and
        the statements after it (`cat <<EOF && make`)."""
        redirect = self.heredoc(node)
        more: list[Redirect] = []
        parts: list[Script] = []
        rest: Script = []
        for child in node.named_children:
            if child.type in _REDIRECTS:
                if child.type == "heredoc_redirect":
                    extra, further, piped, after = self.heredoc_and_rest(child)
                    more.extend([extra, *further])
                    parts.extend(piped)
                    rest.extend(after)
                else:
                    more.append(self.redirect(child))
            elif child.type == "pipeline":
                parts.extend(self.statement(part) for part in child.named_children)
            elif child.type not in ("heredoc_start", "heredoc_body", "heredoc_end"):
                rest.extend(self.statement(child))
        return redirect, more, parts, rest

    def heredoc(self, node: Node) -> Redirect:
        start = end = body = None
        for child in node.children:
            if child.type == "heredoc_start":
                start = child
            elif child.type == "heredoc_body":
                body = child
            elif child.type == "heredoc_end":
                end = child
        fd_node = node.child_by_field_name("descriptor")
        fd = int(_text(fd_node)) if fd_node is not None and _text(fd_node).isdigit() else None
        strip_tabs = any(c.type == "<<-" for c in node.children)
        delimiter = _text(start)
        # The body starts on the line after the operator's (or after an earlier here-doc of
        # that line); the grammar's body node skips its leading blank space, so read it back.
        origin = max(start.end_byte if start is not None else node.start_byte, self.heredoc_cursor)
        newline = self.source.find(b"\n", origin)
        begin = newline + 1 if newline >= 0 else len(self.source)
        finish = end.start_byte if end is not None else (body.end_byte if body else begin)
        finish = max(begin, finish)
        nested: Script = []
        if any(c in delimiter for c in "'\"\\"):
            text: Word = (Lit(self.source[begin:finish].decode(errors="surrogateescape"), True),)
            if body is not None:
                self.mark_visited(body)  # a quoted here-doc's `$(...)` is text, never run
        else:
            text, nested = self.unquoted_body(body, begin, finish)
        if end is not None:
            # Set after the body: a here-doc inside it (`$(cat <<A ...)`) starts before this end.
            # A substitution of the body read above is judged; one the loop skipped is found by
            # `missed` (nothing here marks it visited), so a misread body cannot hide a command.
            self.heredoc_cursor = max(self.heredoc_cursor, end.end_byte)
        return Redirect("<<", fd, None, nested, text=text, strip_tabs=strip_tabs)

    def unquoted_body(self, body: Node | None, begin: int, finish: int) -> tuple[Word, Script]:
        """An unquoted here-doc's text and the commands its substitutions run. The grammar
        misses a `$(...)` at the start of an indented line (`  $(cmd)`) and after an escaped
        one; when a gap between what it found still holds a substitution, the body is read
        again as the double-quoted string it expands like, and if that fails too, the guard
        says it cannot parse it."""
        segments: list[Segment] = []
        nested: Script = []
        gaps: list[bytes] = []
        position = begin
        for child in body.named_children if body is not None else []:
            if child.type == "heredoc_content" or child.start_byte < position:
                continue
            gaps.append(self.source[position : child.start_byte])
            segments.append(Lit(_unescape_heredoc(_decoded(gaps[-1])), True))
            word = self.word(child, quoted=True)
            segments.extend(word)
            inner = _word_scripts(word)
            # `${x:-$(cmd)}`, `$(( $(cmd) ))` in the body: opaque, but their commands run.
            nested.extend(inner if inner else self.substitutions_in(child))
            position = child.end_byte
        gaps.append(self.source[position:finish])
        segments.append(Lit(_unescape_heredoc(_decoded(gaps[-1])), True))
        if not any(_runs_in_heredoc(gap) for gap in gaps):
            return tuple(segments), nested
        raw = self.source[begin:finish]
        again = _body_as_double_quoted(raw)
        if again is not None:
            return again
        why = "a here-document whose `$(...)` or backquotes the parser cannot place"
        return (Opaque(_decoded(raw)),), [Unparsed(_decoded(raw), why), *nested]

    def mark_visited(self, node: Node) -> None:
        """Substitutions under `node` never run (the body of a quoted here-doc)."""
        stack = [node]
        while stack:
            child = stack.pop()
            if child.type in _SUBSTITUTIONS:
                self.visited.add(child.id)
            stack.extend(child.children)

    def redirect(self, node: Node) -> Redirect:
        self.count()
        if node.type == "heredoc_redirect":
            return self.heredoc(node)
        fd_node = node.child_by_field_name("descriptor")
        fd = int(_text(fd_node)) if fd_node is not None and _text(fd_node).isdigit() else None
        operators = [c for c in node.children if not c.is_named]
        op = _text(operators[0]) if operators else ""
        if op == "<" and any(c.type == "ERROR" and _text(c) == ">" for c in node.children):
            op = "<>"
        targets = [c for c in node.named_children if c.type in _WORD_NODES]
        if node.type == "herestring_redirect":
            word = self.word(targets[0]) if targets else ()
            return Redirect("<<<", fd, None, _word_scripts(word), text=word)
        return Redirect(op, fd, self.word(targets[-1]) if targets else None)

    def function(self, node: Node) -> Function:
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        redirects = [self.redirect(c) for c in node.named_children if c.type in _REDIRECTS]
        subshell = body is not None and body.type == "subshell"
        inner = (
            self.statements(body) if subshell and body is not None
            else self.statement(body) if body is not None
            else []
        )  # fmt: skip
        return Function(_text(name), inner, subshell, redirects)

    def loop(self, node: Node) -> ForLoop:
        variable = node.child_by_field_name("variable")
        values = node.children_by_field_name("value")
        body = node.child_by_field_name("body")
        return ForLoop(
            _text(variable) if variable is not None else "",
            [self.word(value) for value in values] if values else None,
            self.statement(body) if body is not None else [],
        )

    # -- words ---------------------------------------------------------------------------

    def word(self, node: Node, quoted: bool = False) -> Word:
        self.count()
        kind = node.type
        if kind in ("word", "number", "variable_name"):
            return (Lit(_text(node) if quoted else _unescape(_text(node)), quoted),)
        if kind == "brace_expression":  # `{1..3}`: expanded with the word
            return (Lit(_text(node), quoted),)
        if kind == "raw_string":
            return (Lit(_text(node)[1:-1], True),)
        if kind == "ansi_c_string":
            return (Lit(_ansi_c(_text(node)[2:-1]), True),)
        if kind in ("string", "translated_string"):
            return self.double_quoted(node)
        if kind == "concatenation":
            return tuple(segment for child in node.children for segment in self.word(child, quoted))
        if kind == "simple_expansion":
            names = [
                c
                for c in node.named_children
                if c.type in ("variable_name", "special_variable_name")
            ]
            if len(names) == 1 and names[0].type == "variable_name":
                return (Param(_text(names[0]), quoted),)
            return (Opaque(_text(node)),)
        if kind == "expansion":
            names = [c for c in node.children if c.type not in ("${", "}")]
            if len(names) == 1 and names[0].type == "variable_name":
                return (Param(_text(names[0]), quoted),)
            return (Opaque(_text(node)),)
        if kind in _SUBSTITUTIONS:
            self.visited.add(node.id)
            return (Subst(self.substituted(node), _text(node)),)
        return (Opaque(_text(node)),)

    def double_quoted(self, node: Node) -> Word:
        """The parts of "...": the grammar leaves plain text between named children out, so
        it is read back from the byte offsets."""
        segments: list[Segment] = []
        source = node.text or b""
        position = node.start_byte + 1
        for child in node.named_children:
            if child.start_byte > position:
                gap = source[position - node.start_byte : child.start_byte - node.start_byte]
                segments.append(Lit(_unescape_double(gap.decode(errors="surrogateescape")), True))
            if child.type == "string_content":
                segments.append(Lit(_unescape_double(_text(child)), True))
            else:
                segments.extend(self.word(child, quoted=True))
            position = child.end_byte
        end = node.end_byte - 1
        if end > position:
            gap = source[position - node.start_byte : end - node.start_byte]
            segments.append(Lit(_unescape_double(gap.decode(errors="surrogateescape")), True))
        return tuple(segments) or (Lit("", True),)

    def substitutions_in(self, node: Node) -> Script:
        """The commands inside substitutions anywhere under `node` (a test, a here-string)."""
        if node.type in _SUBSTITUTIONS:
            return self.substitution(node)
        return [s for child in node.named_children for s in self.substitutions_in(child)]


def _descriptor_from_last_word(
    command: Simple, body: Node | None, node: Node, redirects: list[Redirect]
) -> None:
    """`exec 0<f`: the grammar reads the `0` as the command's last word, and the redirection
    as one without a descriptor."""
    first = next(iter(node.children_by_field_name("redirect")), None)
    last = body.named_children[-1] if body is not None and body.named_children else None
    if (
        first is None
        or last is None
        or last.type not in ("word", "number")
        or not _text(last).isdigit()
        or last.end_byte != first.start_byte
        or not redirects
        or redirects[0].fd is not None
        or not command.words
    ):
        return
    command.words.pop()
    redirects[0].fd = int(_text(last))


def _separator_after_heredoc(node: Node) -> bool:
    """Whether a `$(...)` or `<(...)` (not backquotes, which bash runs as written) holds a
    here-document and, after its operator, a `;` or `&` separator."""
    if not node.children or node.children[0].type == "`" or b"<<" not in (node.text or b""):
        return False
    heredoc_at: int | None = None
    stack = list(reversed(node.children[1:]))
    while stack:
        child = stack.pop()
        if child.type == "heredoc_redirect" and heredoc_at is None:
            heredoc_at = child.start_byte
        elif child.type in (";", "&") and heredoc_at is not None and child.start_byte > heredoc_at:
            return True
        stack.extend(reversed(child.children))
    return False


def _runs_in_heredoc(raw: bytes) -> bool:
    """Whether unquoted here-doc text holds a `$(...)` or backquote that bash would run
    (`\\$(` and `` \\` `` are literal there)."""
    if b"$(" not in raw and b"`" not in raw:
        return False
    index = 0
    while index < len(raw):
        char = raw[index : index + 1]
        if char == b"\\":
            index += 2
            continue
        if char == b"`" or raw[index : index + 2] == b"$(":
            return True
        index += 1
    return False


def _body_as_double_quoted(raw: bytes) -> tuple[Word, Script] | None:
    """Here-doc text read as the double-quoted string it expands like (`: "TEXT"`): its
    words and the commands its substitutions run. None when that reading is not the same:
    a `\\"` (kept in a here-doc, unescaped in quotes), or a `"` outside any substitution
    (the string would end there)."""
    if b'\\"' in raw:
        return None
    source = b': "' + raw + b'"'
    root = _PARSER.parse(source).root_node
    command = root.named_children[0] if len(root.named_children) == 1 else None
    if root.has_error or command is None or command.type != "command":
        return None
    operands = command.named_children[1:]
    if len(operands) != 1 or operands[0].type != "string" or operands[0].end_byte != len(source):
        return None
    nested = _Reader(source).missed(operands[0])
    return _Reader(source).double_quoted(operands[0]), nested


def _reparsed_substitutions(text: str) -> Script:
    """The grammar leaves `` `cmd` `` inside `${x:-...}` as a plain word: read it again as a
    word on its own, for the substitutions it runs."""
    if "`" not in text and "$(" not in text:
        return []
    return [
        Block(segment.script, subshell=True)
        for statement in parse_shell(": " + text)
        if isinstance(statement, Simple)
        for word in statement.words
        for segment in word
        if isinstance(segment, Subst)
    ]


def _is_list(node: Node) -> bool:
    if node.type == "list":
        return True
    body = node.child_by_field_name("body") if node.type == "redirected_statement" else None
    return body is not None and body.type == "list"


def _flattened(script: Script) -> Script:
    """A list's statements (a plain sequence block is the same as its statements)."""
    if len(script) == 1 and isinstance(script[0], Block):
        block = script[0]
        if not block.subshell and not block.redirects:
            return _flattened(block.body) if block.body else []
    return script


def _attach_last(script: Script, redirects: list[Redirect]) -> Script:
    """`script` with `redirects` given to its last command."""
    if not script:
        return [Block([], redirects=redirects)]
    last = script[-1]
    if isinstance(last, Simple):
        last.redirects.extend(redirects)
    elif isinstance(last, Pipeline) and last.parts:
        last.parts[-1] = _attach_last(last.parts[-1], redirects)
    elif isinstance(last, Block) and not last.subshell and not last.redirects and last.body:
        last.body = _attach_last(last.body, redirects)
    else:
        return [*script[:-1], Block([last], redirects=redirects)]
    return script


def _arithmetic_assignments(text: str) -> Script:
    """`(( x = 1 ))`, `for ((i=0; ...))`: the variables assigned become unknown."""
    names = sorted(assigned_in(text))
    if not names:
        return []
    return [Simple([(name, (Opaque(text),)) for name in names], [], [], text)]


def _has_real_error(node: Node) -> bool:
    """Whether the grammar failed somewhere under `node`, other than on `<>`."""
    if not node.has_error:
        return False
    if node.type == "ERROR" or node.is_missing:
        return not _is_read_write_gap(node)
    return any(_has_real_error(child) for child in node.children)


def _is_read_write_gap(node: Node) -> bool:
    parent = node.parent
    return (
        _text(node) == ">"
        and parent is not None
        and parent.type == "file_redirect"
        and node.prev_sibling is not None
        and _text(node.prev_sibling) == "<"
    )


def _names_a_descriptor(word: Node, following: Node) -> bool:
    """Whether `word` is the descriptor of the redirection right after it (`exec 0<f`)."""
    return (
        following.type == "file_redirect"
        and following.start_byte == word.end_byte
        and _text(word).isdigit()
        and following.child_by_field_name("descriptor") is None
    )


def _word_scripts(word: Word) -> Script:
    return [Block(s.script, subshell=True) for s in word if isinstance(s, Subst)]


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text  # most words: nothing to undo
    out: list[str] = []
    escaped = False
    for char in text:
        if escaped:
            if char != "\n":  # backslash-newline is a line continuation
                out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            out.append(char)
    return "".join(out)


def _unescape_double(text: str) -> str:
    """Inside double quotes a backslash escapes only $ ` " \\ and newline."""
    return _unescape_some(text, '$`"\\\n')


def _unescape_heredoc(text: str) -> str:
    """In an unquoted here-document a backslash escapes only $ ` \\ and newline."""
    return _unescape_some(text, "$`\\\n")


def _unescape_some(text: str, escapable: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] in escapable:
            if text[index + 1] != "\n":
                out.append(text[index + 1])
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)


def _ansi_c(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            out.append(_ANSI_ESCAPES.get(text[index + 1], "\\" + text[index + 1]))
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)


def _decoded(raw: bytes) -> str:
    return raw.decode(errors="surrogateescape")


def _text(node: Node | None) -> str:
    if node is None:
        return ""
    return (node.text or b"").decode(errors="surrogateescape")
