"""What lockyard needs to know about a TOML file's text: whether it parses, where its
multi-line strings are (a marker line there is the user's text, not lockyard's block), and how
to write a string value."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from .config_errors import NOTHING_WRITTEN, ConfigFileError


def load_toml(path: Path, text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(
            f"{path} is not valid TOML ({exc}); fix it, then run this again {NOTHING_WRITTEN}"
        ) from None


def string_lines(text: str) -> frozenset[int]:
    """The lines (0-based, split at `\\n`) that begin inside a multi-line string. `text` must
    be valid TOML (checked first), so every string here ends."""
    inside: set[int] = set()
    line, at, size = 0, 0, len(text)
    while at < size:
        char = text[at]
        if char == "\n":
            line += 1
            at += 1
        elif char == "#":
            newline = text.find("\n", at)
            at = size if newline < 0 else newline
        elif text.startswith('"""', at) or text.startswith("'''", at):
            quote, at = char, at + 3
            while at < size:
                if text[at] == "\n":
                    line += 1
                    inside.add(line)
                    at += 1
                elif quote == '"' and text[at] == "\\":
                    if text[at + 1 : at + 2] == "\n":
                        line += 1
                        inside.add(line)
                    at += 2
                elif text.startswith(quote * 3, at):
                    run = 3
                    while run < 5 and text[at + run : at + run + 1] == quote:
                        run += 1
                    at += run
                    break
                else:
                    at += 1
        elif char in "\"'":
            at += 1
            while at < size and text[at] not in (char, "\n"):
                at += 2 if char == '"' and text[at] == "\\" else 1
            at += 1
        else:
            at += 1
    return frozenset(inside)


_SHORT_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"',
                  "\\": "\\\\"}  # fmt: skip


def toml_string(value: str) -> str:
    """`value` as a TOML basic string: every character as itself except the quote, the
    backslash and control characters, which are escaped (TOML has no surrogate escapes, so a
    character outside the Basic Multilingual Plane is written as itself)."""
    out = []
    for char in value:
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
