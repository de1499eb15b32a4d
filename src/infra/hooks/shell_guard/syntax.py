"""The shell parser: a command line becomes a small tree of our own (statements and words).

tree-sitter with its Bash grammar does the parsing (it read the most of the nasty cases right
and is ten times faster than bashlex: `benchmarks/compare_shell_parsers.py`). This module turns
its concrete tree into the few shapes the guard cares about, so nothing else depends on
tree-sitter's node names:

- `Simple`: one simple command (`a=1 sed -i s/x/y/ f > out`), its words and redirections;
- `Block`: statements run together (groups, `if`, `while`, `case`, function bodies), in the
  current shell or, with `subshell=True`, in a child (`( ... )`, each part of a pipeline);
- `ForLoop`: a `for` over words, so the loop variable can be expanded;
- `Unparsed`: text the grammar could not read (the guard cannot tell what it does).

Words keep their quoting (`Lit.quoted`), so globs and braces expand only where bash would.
"""

from __future__ import annotations

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


@dataclass
class Simple:
    assignments: list[tuple[str, Word]]
    words: list[Word]
    redirects: list[Redirect]
    text: str


@dataclass
class Block:
    body: Script
    subshell: bool = False
    redirects: list[Redirect] = field(default_factory=list)


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


Statement = Simple | Block | ForLoop | Unparsed
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


def parse_shell(command: str) -> Script:
    """The statements of `command`. Text the grammar rejects comes back as `Unparsed` parts;
    `<>` (read-write open, which the grammar lacks) is read as the write redirection it is."""
    tree = _PARSER.parse(command.encode())
    return _statements(tree.root_node)


def _statements(node: Node) -> Script:
    out: Script = []
    for child in node.named_children:
        out.extend(_statement(child))
    return out


def _statement(node: Node) -> Script:
    kind = node.type
    if kind in _SILENT or (kind in _WORD_NODES and node.parent is not None):
        return _substitutions_in(node)
    if _has_real_error(node):
        return [Unparsed(_text(node))]
    if kind == "command":
        return [_simple(node)]
    if kind == "declaration_command":
        assignments = [pair for child in node.named_children for pair in _assignments(child)]
        return [Simple(assignments, [], [], _text(node))]
    if kind in ("variable_assignment", "variable_assignments"):
        return [Simple(_assignments(node), [], [], _text(node))]
    if kind == "redirected_statement":
        return _redirected(node)
    if kind == "pipeline":
        return [Block(_statement(part), subshell=True) for part in node.named_children]
    if kind == "subshell":
        return [Block(_statements(node), subshell=True)]
    if kind == "function_definition":
        body = node.child_by_field_name("body")
        return [Block(_statement(body) if body is not None else [], subshell=True)]
    if kind == "for_statement":
        return [_for(node)]
    if kind in _SEQUENCES:
        return [Block(_statements(node))]
    if kind == "c_style_for_statement":
        body = node.child_by_field_name("body")
        return [Block(_statement(body) if body is not None else [])]
    return _substitutions_in(node)


def _simple(node: Node) -> Simple:
    assignments: list[tuple[str, Word]] = []
    words: list[Word] = []
    redirects: list[Redirect] = []
    for child in node.named_children:
        if child.type == "variable_assignment":
            assignments.extend(_assignments(child))
        elif child.type == "command_name":
            words.append(_word(child.named_children[0]))
        elif child.type in _REDIRECTS:
            redirects.append(_redirect(child))
        elif child.type in _WORD_NODES:
            words.append(_word(child))
        elif child.type != "comment":
            words.append((Opaque(_text(child)),))
    return Simple(assignments, words, redirects, _text(node))


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


def _assignments(node: Node) -> list[tuple[str, Word]]:
    if node.type == "variable_assignments":
        return [pair for child in node.named_children for pair in _assignments(child)]
    if node.type != "variable_assignment":
        return []
    name = node.child_by_field_name("name")
    value = node.child_by_field_name("value")
    word: Word = (Lit(""),) if value is None else _word(value)
    if value is not None and value.type == "array":
        word = (Opaque(_text(value)),)
    return [(_text(name) if name is not None else "", word)]


def _redirected(node: Node) -> Script:
    body = node.child_by_field_name("body")
    redirects: list[Redirect] = []
    after: Script = []
    for child in node.children_by_field_name("redirect"):
        redirect, rest = _redirect_and_rest(child)
        redirects.append(redirect)
        after.extend(rest)
    inner = _statement(body) if body is not None else []
    if len(inner) == 1 and isinstance(inner[0], Simple):
        inner[0].redirects.extend(redirects)
        head: Script = inner
    else:
        head = [Block(inner, redirects=redirects)]
    return [*head, *after]


def _redirect_and_rest(node: Node) -> tuple[Redirect, Script]:
    """A redirection and, for a here-doc, what the grammar hung under it: the rest of the
    pipeline (`cat <<EOF | tee out`) or further redirections (`cat <<EOF > out`)."""
    if node.type != "heredoc_redirect":
        return _redirect(node), []
    redirect = _redirect(node)
    rest: Script = []
    for child in node.named_children:
        if child.type in _REDIRECTS:
            redirect_more, more = _redirect_and_rest(child)
            rest.append(Block([], redirects=[redirect_more]))
            rest.extend(more)
        elif child.type == "pipeline":
            rest.extend(Block(_statement(part), subshell=True) for part in child.named_children)
        elif child.type not in ("heredoc_start", "heredoc_body", "heredoc_end"):
            rest.extend(_statement(child))
    return redirect, rest


def _redirect(node: Node) -> Redirect:
    fd_node = node.child_by_field_name("descriptor")
    fd = int(_text(fd_node)) if fd_node is not None and _text(fd_node).isdigit() else None
    if node.type == "heredoc_redirect":
        nested: Script = []
        for child in node.named_children:
            if child.type == "heredoc_body":
                nested.extend(s for part in child.named_children for s in _substitutions_in(part))
        return Redirect("<<", fd, None, nested)
    operators = [c for c in node.children if not c.is_named]
    op = _text(operators[0]) if operators else ""
    if op == "<" and any(c.type == "ERROR" and _text(c) == ">" for c in node.children):
        op = "<>"
    targets = [c for c in node.named_children if c.type in _WORD_NODES]
    if node.type == "herestring_redirect":
        word = _word(targets[0]) if targets else ()
        return Redirect("<<<", fd, None, list(_word_scripts(word)))
    return Redirect(op, fd, _word(targets[-1]) if targets else None)


def _for(node: Node) -> ForLoop:
    variable = node.child_by_field_name("variable")
    values = node.children_by_field_name("value")
    body = node.child_by_field_name("body")
    return ForLoop(
        _text(variable) if variable is not None else "",
        [_word(value) for value in values] if values else None,
        _statement(body) if body is not None else [],
    )


# -- words --------------------------------------------------------------------------------------


def _word(node: Node, quoted: bool = False) -> Word:
    kind = node.type
    if kind in ("word", "number"):
        return (Lit(_text(node) if quoted else _unescape(_text(node)), quoted),)
    if kind == "brace_expression":  # `{1..3}`: expanded with the word
        return (Lit(_text(node), quoted),)
    if kind == "raw_string":
        return (Lit(_text(node)[1:-1], True),)
    if kind == "ansi_c_string":
        return (Lit(_ansi_c(_text(node)[2:-1]), True),)
    if kind in ("string", "translated_string"):
        return _double_quoted(node)
    if kind == "concatenation":
        return tuple(segment for child in node.children for segment in _word(child, quoted))
    if kind == "simple_expansion":
        names = [
            c for c in node.named_children if c.type in ("variable_name", "special_variable_name")
        ]
        if len(names) == 1 and names[0].type == "variable_name":
            return (Param(_text(names[0]), quoted),)
        return (Opaque(_text(node)),)
    if kind == "expansion":
        names = [c for c in node.children if c.type not in ("${", "}")]
        if len(names) == 1 and names[0].type == "variable_name":
            return (Param(_text(names[0]), quoted),)
        return (Opaque(_text(node)),)
    if kind in ("command_substitution", "process_substitution"):
        return (Subst(_statements(node), _text(node)),)
    return (Opaque(_text(node)),)


def _double_quoted(node: Node) -> Word:
    """The parts of "...": the grammar leaves plain text between named children out, so it is
    read back from the byte offsets."""
    segments: list[Segment] = []
    source = node.text or b""
    position = node.start_byte + 1
    for child in node.named_children:
        if child.start_byte > position:
            gap = source[position - node.start_byte : child.start_byte - node.start_byte]
            segments.append(Lit(_unescape_double(gap.decode()), True))
        if child.type == "string_content":
            segments.append(Lit(_unescape_double(_text(child)), True))
        else:
            segments.extend(_word(child, quoted=True))
        position = child.end_byte
    end = node.end_byte - 1
    if end > position:
        gap = source[position - node.start_byte : end - node.start_byte]
        segments.append(Lit(_unescape_double(gap.decode()), True))
    return tuple(segments) or (Lit("", True),)


def _word_scripts(word: Word) -> Script:
    return [Block(s.script, subshell=True) for s in word if isinstance(s, Subst)]


def _substitutions_in(node: Node) -> Script:
    """The commands inside substitutions anywhere under `node` (a test, a here-doc body)."""
    if node.type in ("command_substitution", "process_substitution"):
        return [Block(_statements(node), subshell=True)]
    return [s for child in node.named_children for s in _substitutions_in(child)]


def _unescape(text: str) -> str:
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
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] in '$`"\\\n':
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


def _text(node: Node | None) -> str:
    if node is None:
        return ""
    return (node.text or b"").decode(errors="surrogateescape")
