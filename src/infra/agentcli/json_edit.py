"""Editing a user's JSON file in place: lockyard's entries go in and come out, every other
byte stays where it was.

Loading a file into Python values and dumping them again loses what the user wrote: `1e400`
came back as `Infinity` (which no JSON reader accepts), an earlier duplicate key vanished, the
file was re-indented. So lockyard never re-serializes a user's file: it parses the text into a
tree of spans (`parse`, iterative, so any depth is fine) and edits by splicing text at those
spans. Only lockyard's own values are ever rendered.

Every insertion has a form its removal undoes exactly (`uninstall` after `init` gives back
the same bytes):

- into a container that has elements: `,` plus the whitespace seen before its last element,
  then the new element, right after the last element. Removal deletes that comma, the
  whitespace run before the element, and the element.
- into an existing empty container: one space and the element, right after the opening
  bracket. Removal deletes the two; whatever whitespace the container held stays.
- a container lockyard creates (its key was absent) starts with a line break (pretty) or
  directly with its first element (compact), never with a single space. When lockyard's last
  element leaves a container of that form, the whole container goes, while an empty container
  the user had stays.
- a file lockyard creates is its object and one newline; a file that held only whitespace (or
  comments) gets the object after that text. When the last entry goes, each returns to what it
  was: no file, or the old text.

Lookups follow JSON readers (JavaScript's `JSON.parse`, Python's `json`): of duplicate keys,
the last one counts, so that is the one lockyard reads and edits; the others stay untouched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NoReturn

from .config_errors import NOTHING_WRITTEN, ConfigFileError

_WS: Final = " \t\n\r"
_STRING: Final = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERAL: Final = re.compile(r"true|false|null")
_READ_DEPTH: Final = 64
"""Values deeper than this are never lockyard's: `value_of` does not descend into them."""

Keys = Sequence[str]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()
"""What `JsonDocument.get` returns for a key that is not there."""


class _TooDeep:
    """Stands for a value nested deeper than `_READ_DEPTH`: equal to nothing lockyard writes."""


@dataclass(eq=False)
class Node:
    """A JSON value's span `[start, end)` and, for a container, its elements."""

    kind: str
    """"object", "array" or "scalar"."""
    start: int
    end: int = -1
    keys: list[str] = field(default_factory=list)
    key_starts: list[int] = field(default_factory=list)
    children: list[Node] = field(default_factory=list)
    """An object's member values or an array's items, in the file's order."""
    commas: list[int] = field(default_factory=list)
    """The offset of the comma after each element (one more than elements: a trailing comma)."""

    def element_start(self, index: int) -> int:
        """Where element `index` starts: a member's key, or an item's value."""
        return self.key_starts[index] if self.kind == "object" else self.children[index].start

    def last_index(self, key: str) -> int | None:
        for index in range(len(self.keys) - 1, -1, -1):
            if self.keys[index] == key:
                return index
        return None


def parse(path: Path, text: str, *, comments: bool = False) -> Node | None:
    """The root value of `text` (None when it holds only whitespace, a byte order mark, or
    comments); ConfigFileError, naming the line and column, when it is not JSON. `comments`:
    also accept `//` and `/* */` comments and trailing commas (JSONC)."""
    return _Parser(path, text, comments).document()


class _Parser:
    VALUE, FIRST_KEY, KEY, FIRST_ITEM, ITEM, AFTER = range(6)

    def __init__(self, path: Path, text: str, comments: bool) -> None:
        self.path = path
        self.text = text
        self.comments = comments
        self.at = 1 if text.startswith("\ufeff") else 0

    def document(self) -> Node | None:
        text = self.text
        self.skip()
        if self.at == len(text):
            return None
        stack: list[Node] = []
        root: Node | None = None
        key, key_start = "", -1
        state = self.VALUE
        while True:
            self.skip()
            at = self.at
            char = text[at] if at < len(text) else ""
            if state == self.AFTER:
                if not stack:
                    if char:
                        self.fail(at, "more text after the JSON value")
                    return root
                top = stack[-1]
                closing = "}" if top.kind == "object" else "]"
                if char == ",":
                    top.commas.append(at)
                    self.at = at + 1
                    state = self.KEY if top.kind == "object" else self.ITEM
                elif char == closing:
                    top.end = at + 1
                    stack.pop()
                    self.at = at + 1
                else:
                    self.fail(at, f"expected ',' or '{closing}'")
                continue
            if state in (self.FIRST_KEY, self.KEY):
                if char == "}" and (state == self.FIRST_KEY or self.comments):
                    stack[-1].end = at + 1
                    stack.pop()
                    self.at = at + 1
                    state = self.AFTER
                    continue
                match = _STRING.match(text, at) if char == '"' else None
                if match is None:
                    self.fail(at, "expected a key in double quotes")
                key, key_start = json.loads(match.group()), at
                self.at = match.end()
                self.skip()
                if text[self.at : self.at + 1] != ":":
                    self.fail(self.at, "expected ':' after the key")
                self.at += 1
                state = self.VALUE
                continue
            if (
                state in (self.FIRST_ITEM, self.ITEM)
                and char == "]"
                and (state == self.FIRST_ITEM or self.comments)
            ):
                stack[-1].end = at + 1
                stack.pop()
                self.at = at + 1
                state = self.AFTER
                continue
            # state VALUE (or an item's value)
            if char in ("{", "["):
                node = Node("object" if char == "{" else "array", at)
                state = self.FIRST_KEY if char == "{" else self.FIRST_ITEM
                self.at = at + 1
            else:
                node = self.scalar(at, char)
                self.at = node.end
                state = self.AFTER
            if stack:
                top = stack[-1]
                if top.kind == "object":
                    top.keys.append(key)
                    top.key_starts.append(key_start)
                top.children.append(node)
            else:
                root = node
            if node.kind != "scalar":
                stack.append(node)

    def scalar(self, at: int, char: str) -> Node:
        if char == '"':
            match = _STRING.match(self.text, at)
            if match is None:
                self.fail(
                    at,
                    "a string that does not end, or holds a bad escape or a raw control character",
                )
        elif char == "-" or char.isdigit():
            match = _NUMBER.match(self.text, at)
        else:
            match = _LITERAL.match(self.text, at)
        if match is None:
            self.fail(at, "expected a value" if char else "the text ends where a value should be")
        end = match.end()
        follower = self.text[end : end + 1]
        if follower and follower not in _WS + ",]}" and not (self.comments and follower == "/"):
            self.fail(end, f"unexpected {follower!r}")
        return Node("scalar", at, end)

    def skip(self) -> None:
        text, at = self.text, self.at
        while at < len(text):
            if text[at] in _WS:
                at += 1
            elif self.comments and text.startswith("//", at):
                newline = text.find("\n", at)
                at = len(text) if newline < 0 else newline
            elif self.comments and text.startswith("/*", at):
                close = text.find("*/", at + 2)
                if close < 0:
                    self.fail(at, "a comment that never ends")
                at = close + 2
            else:
                break
        self.at = at

    def fail(self, at: int, what: str) -> NoReturn:
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        kind = "JSON (with comments)" if self.comments else "JSON"
        raise ConfigFileError(
            f"{self.path} is not valid {kind} (line {line}, column {column}: {what}); fix it, "
            f"then run this again {NOTHING_WRITTEN}"
        )


def value_of(text: str, node: Node, depth: int = 0) -> Any:
    """The Python value of `node` (duplicate keys: the last counts). Numbers are read only to
    be compared (lockyard never writes a user's number back); a value nested deeper than
    `_READ_DEPTH` becomes an object equal to nothing."""
    if depth > _READ_DEPTH:
        return _TooDeep()
    if node.kind == "scalar":
        return json.loads(text[node.start : node.end])
    if node.kind == "array":
        return [value_of(text, child, depth + 1) for child in node.children]
    return {
        key: value_of(text, child, depth + 1)
        for key, child in zip(node.keys, node.children, strict=True)
    }


def _ws_run_before(text: str, at: int) -> str:
    start = at
    while start > 0 and text[start - 1] in _WS:
        start -= 1
    return text[start:at]


def _is_ws(text: str) -> bool:
    return all(char in _WS for char in text)


def _created_form(between: str, after: str) -> bool:
    """Whether a container whose one element sits between `between` and `after` is one that
    lockyard created: compact (no whitespace at all) or pretty (a line break first)."""
    if not between and not after:
        return True
    return (
        between.lstrip("\r").startswith("\n")
        and _is_ws(between)
        and "\n" in after
        and _is_ws(after)
    )


class JsonDocument:
    """One JSON file's text under edit (None: the file is absent, or is to be deleted)."""

    def __init__(self, path: Path, text: str | None, *, comments: bool = False) -> None:
        self.path = path
        self.comments = comments
        self._text = text
        self._root = self._parse(text)

    @property
    def text(self) -> str | None:
        return self._text

    # --- reading ------------------------------------------------------------------------

    def get(self, keys: Keys) -> Any:
        """The value at `keys` (MISSING when something on the way is absent or no object)."""
        node = self._find(keys, strict=False)
        return MISSING if node is None else value_of(self._text or "", node)

    def items(self, keys: Keys) -> list[Any]:
        """The items of the list at `keys` ([] when absent or not a list)."""
        node = self._find(keys, strict=False)
        if node is None or node.kind != "array":
            return []
        return [value_of(self._text or "", child) for child in node.children]

    # --- editing ------------------------------------------------------------------------

    def put(self, keys: Keys, value: Any) -> None:
        """Make the member at `keys` hold `value`, creating the objects on the way. An existing
        member is replaced in place (the caller decides whether it may be)."""
        if not keys:
            raise ValueError("put needs at least one key")
        if self._root is None:
            self._create_root(_nest(keys, value))
            return
        node = self._root
        for depth, key in enumerate(keys):
            if node.kind != "object":
                self._not_a(keys[:depth], "an object")
            index = node.last_index(key)
            if index is None:
                self._insert(node, _member(key, _nest(keys[depth + 1 :], value)))
                return
            if depth == len(keys) - 1:
                self._replace(node, index, value)
                return
            node = node.children[index]

    def delete(self, keys: Keys) -> None:
        """Remove the member at `keys` (the last of duplicates), and with it each container
        lockyard had created for it that it leaves empty. Absent: nothing happens."""
        parent = self._find(keys[:-1], strict=False)
        if parent is None or parent.kind != "object":
            return
        index = parent.last_index(keys[-1])
        if index is not None:
            self._remove(parent, index, keys[:-1])

    def put_item(self, keys: Keys, value: Any, ours: Callable[[Any], bool]) -> None:
        """Make the list at `keys` hold exactly one item that `ours` accepts, equal to `value`:
        the first such item is replaced in place (the others removed), or `value` appended."""
        node = self._find(keys, strict=True)
        if node is None:
            self.put(keys, [value])
            return
        if node.kind != "array":
            self._not_a(keys, "a list")
        text = self._text or ""
        matches = [i for i, child in enumerate(node.children) if ours(value_of(text, child))]
        if not matches:
            self._insert(node, lambda style: _render(value, style))
            return
        for index in reversed(matches[1:]):
            self._remove(node, index, keys)
            node = self._require(keys)
        self._replace(node, matches[0], value)

    def delete_items(self, keys: Keys, ours: Callable[[Any], bool]) -> None:
        """Remove every item of the list at `keys` that `ours` accepts (as `delete` does)."""
        while True:
            node = self._find(keys, strict=False)
            if node is None or node.kind != "array":
                return
            text = self._text or ""
            matches = [i for i, child in enumerate(node.children) if ours(value_of(text, child))]
            if not matches:
                return
            self._remove(node, matches[-1], keys)

    # --- the splices --------------------------------------------------------------------

    def _insert(self, container: Node, element: Callable[[_Style], str]) -> None:
        text = self._text or ""
        if container.children:
            last = len(container.children) - 1
            run = _ws_run_before(text, container.element_start(last))
            style = _Style.after(run, _indent_unit(text))
            rendered = "," + style.separator + element(style)
            at = container.children[last].end
        else:
            rendered = " " + element(_COMPACT)
            at = container.start + 1
        self._splice(at, at, rendered)

    def _replace(self, container: Node, index: int, value: Any) -> None:
        text = self._text or ""
        child = container.children[index]
        if json_equal(value_of(text, child), value):
            return
        old = text[child.start : child.end]
        if "\n" in old:
            line_start = text.rfind("\n", 0, container.element_start(index)) + 1
            indent = text[line_start : container.element_start(index)]
            newline = "\r\n" if old.count("\r\n") == old.count("\n") else "\n"
            style = _Style(newline + indent, indent, _indent_unit(text), newline)
        else:
            style = _COMPACT
        self._splice(child.start, child.end, _render(value, style))

    def _remove(self, container: Node, index: int, container_keys: Keys) -> None:
        text = self._text or ""
        start = container.element_start(index)
        end = container.children[index].end
        if len(container.children) == 1:
            between = text[container.start + 1 : start]
            after = text[end : container.end - 1]
            if between == " ":  # lockyard's insertion into an existing empty container
                self._splice(container.start + 1, end, "")
            elif _created_form(between, after):
                if container is self._root:
                    self._drop_root()
                elif container_keys:
                    self.delete(container_keys)
            else:  # shaped by hand: take the element (and a trailing comma), nothing else
                stop = container.commas[0] + 1 if container.commas else end
                self._splice(start, stop, "")
            return
        if index == 0:
            stop = container.commas[0] + 1
            while stop < len(text) and text[stop] in _WS:
                stop += 1
            self._splice(start, stop, "")
            return
        comma = container.commas[index - 1]
        run_start = start - len(_ws_run_before(text, start))
        if run_start == comma + 1:
            self._splice(comma, end, "")
        else:  # comments between the comma and the element stay
            self._splice(run_start, end, "")
            self._splice(comma, comma + 1, "")

    def _create_root(self, value: dict[str, Any]) -> None:
        rendered = _render(value, _Style("\n", "", _indent_unit(self._text or ""), "\n"))
        if self._text is None:
            self._set(rendered + "\n")
        else:
            self._set(self._text + rendered)
            if self._root is None or self._root.kind != "object":
                raise ConfigFileError(
                    f"{self.path}: lockyard cannot add its entries after the text there (it "
                    f"ends in a comment with no line break); fix it {NOTHING_WRITTEN}"
                )

    def _drop_root(self) -> None:
        text, root = self._text or "", self._root
        assert root is not None
        if root.start == 0 and text[root.end :] == "\n":
            self._set(None)
        else:
            self._set(text[: root.start] + text[root.end :])

    def _splice(self, start: int, end: int, replacement: str) -> None:
        text = self._text or ""
        self._set(text[:start] + replacement + text[end:])

    def _set(self, text: str | None) -> None:
        self._text = text
        self._root = self._parse(text)

    # --- helpers ------------------------------------------------------------------------

    def _parse(self, text: str | None) -> Node | None:
        root = None if text is None else parse(self.path, text, comments=self.comments)
        if root is not None and root.kind != "object":
            kind = "list" if root.kind == "array" else "single value"
            raise ConfigFileError(
                f"{self.path} holds a JSON {kind}, not an object; fix it, then run this again "
                f"{NOTHING_WRITTEN}"
            )
        return root

    def _find(self, keys: Keys, *, strict: bool) -> Node | None:
        node = self._root
        for depth, key in enumerate(keys):
            if node is None:
                return None
            if node.kind != "object":
                if strict:
                    self._not_a(keys[:depth], "an object")
                return None
            index = node.last_index(key)
            node = None if index is None else node.children[index]
        return node

    def _require(self, keys: Keys) -> Node:
        node = self._find(keys, strict=True)
        assert node is not None
        return node

    def _not_a(self, keys: Keys, what: str) -> NoReturn:
        raise ConfigFileError(
            f"{self.path}: {'.'.join(keys)} is not {what}; fix it, then run this again "
            f"{NOTHING_WRITTEN}"
        )


@dataclass(frozen=True)
class _Style:
    """How to render an element: on one line, or spread over lines at `indent`."""

    separator: str
    indent: str | None = None
    unit: str = "  "
    newline: str = "\n"

    @classmethod
    def after(cls, run: str, unit: str) -> _Style:
        """The style of an element that follows the whitespace `run` (seen before the last one)."""
        if "\n" not in run:
            return _Style(run or " ")
        cut = run.rindex("\n")
        newline = "\r\n" if run[cut - 1 : cut] == "\r" else "\n"
        indent = run[cut + 1 :]
        return _Style(newline + indent, indent, unit, newline)


_COMPACT: Final = _Style(" ")


def _render(value: Any, style: _Style) -> str:
    if style.indent is None:
        return json.dumps(value, ensure_ascii=False)
    text = json.dumps(value, ensure_ascii=False, indent=style.unit)
    return text.replace("\n", style.newline + style.indent)


def _member(key: str, value: Any) -> Callable[[_Style], str]:
    return lambda style: json.dumps(key, ensure_ascii=False) + ": " + _render(value, style)


def _nest(keys: Keys, value: Any) -> Any:
    for key in reversed(keys):
        value = {key: value}
    return value


def _indent_unit(text: str) -> str:
    """The file's indentation step: that of its first indented line (two spaces if none)."""
    for line in text.split("\n")[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            indent = line[: len(line) - len(stripped)]
            return "\t" if indent.startswith("\t") else indent[:8]
    return "  "


def json_equal(left: Any, right: Any) -> bool:
    """Equal as JSON: `True` is not `1`, which Python's `==` would say it is."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            json_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    return type(left) is type(right) and bool(left == right)
