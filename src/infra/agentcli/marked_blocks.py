"""lockyard's blocks in a user's text file (Markdown, TOML, a plugin): marked, checksummed,
and taken out exactly.

A block is lockyard's only when all of this holds: a line is exactly
`<opening>lockyard:begin sha256:<12 hex digits><closing>`, a later line is exactly
`<opening>lockyard:end<closing>`, and the digits are the start of the SHA-256 of the lines
between them. Marker lines that a person wrote (no checksum, or text around them) are their
text, never lockyard's. A checksummed block whose lines were changed since lockyard wrote them
is not taken either: `init` and `uninstall` stop and say which lines, so a person's edit is
never overwritten nor deleted. The checksum, not the text, makes a block lockyard's: a block
written by an earlier version (other instructions, another `--command`) is still recognised.

Where a block goes, so that taking it out gives back the same bytes:
- a new file is the block alone (removing it deletes the file);
- an existing file gets one line break (in the file's own style, `\\n` or `\\r\\n`) and then
  the block at its end: the line break ends the user's last line if it had no end, else it
  leaves one blank line. Removing a block at the end takes that line break with it; a block
  with text after it (the user wrote more) is removed alone, and since it ends with a line
  break of its own, no two lines are ever joined.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .config_errors import NOTHING_WRITTEN, ConfigFileError

BEGIN: Final = "lockyard:begin"
END: Final = "lockyard:end"
DIGEST_LENGTH: Final = 12

StringLines = Callable[[str], Collection[int]]
"""The lines (0-based) of a text that begin inside a string, where no marker can stand."""


@dataclass(frozen=True)
class CommentStyle:
    """How a marker line is written in one file format."""

    opening: str
    closing: str = ""

    def begin(self, digest: str) -> str:
        return f"{self.opening}{BEGIN} sha256:{digest}{self.closing}"

    @property
    def end(self) -> str:
        return f"{self.opening}{END}{self.closing}"

    @property
    def begin_pattern(self) -> re.Pattern[str]:
        digits = f"([0-9a-f]{{{DIGEST_LENGTH}}})"
        return re.compile(
            re.escape(f"{self.opening}{BEGIN} sha256:") + digits + re.escape(self.closing)
        )


MARKDOWN_COMMENT: Final = CommentStyle("<!-- ", " -->")
HASH_COMMENT: Final = CommentStyle("# ")
SLASH_COMMENT: Final = CommentStyle("// ")


def digest(body: str) -> str:
    """The checksum in a begin line: of the block's lines, joined by `\\n`, no final one."""
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_LENGTH]


@dataclass(frozen=True)
class _Line:
    start: int
    content: str
    """Without its line break (and without a `\\r` before it)."""
    end: int
    """After its line break."""
    newline: str


@dataclass(frozen=True)
class Block:
    """One of lockyard's blocks: its text spans `[start, end)` of the file."""

    start: int
    end: int
    newline: str


def _lines(text: str) -> list[_Line]:
    lines: list[_Line] = []
    start = 0
    while start < len(text):
        newline_at = text.find("\n", start)
        end = len(text) if newline_at < 0 else newline_at + 1
        raw = text[start:newline_at] if newline_at >= 0 else text[start:]
        crlf = newline_at >= 0 and raw.endswith("\r")
        content = raw[:-1] if crlf else raw
        lines.append(
            _Line(start, content, end, "\r\n" if crlf else "\n" if newline_at >= 0 else "")
        )
        start = end
    return lines


def newline_style(text: str) -> str:
    """The file's line break: that of its first line (`\\n` when it has none)."""
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def find_blocks(
    path: Path, text: str | None, style: CommentStyle, strings: StringLines | None = None
) -> list[Block]:
    """lockyard's blocks in `text`; ConfigFileError for one that never ends or was edited."""
    if not text:
        return []
    lines = _lines(text)
    skipped = frozenset(strings(text)) if strings is not None else frozenset()
    pattern = style.begin_pattern
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        match = None if index in skipped else pattern.fullmatch(lines[index].content)
        if match is None:
            index += 1
            continue
        stop = next(
            (
                later
                for later in range(index + 1, len(lines))
                if later not in skipped and lines[later].content == style.end
            ),
            None,
        )
        if stop is None:
            raise ConfigFileError(
                f"{path}, line {index + 1}: lockyard's block begins there but never ends (no "
                f"line {style.end!r}); restore that line or delete the block, then run this "
                f"again {NOTHING_WRITTEN}"
            )
        body = "\n".join(line.content for line in lines[index + 1 : stop])
        if digest(body) != match.group(1):
            raise ConfigFileError(
                f"{path}, lines {index + 1}-{stop + 1}: the text between lockyard's markers is "
                "not what lockyard wrote there (edited since?), so lockyard leaves it alone: to "
                "keep it as your own text, delete its two marker lines; to let lockyard write "
                f"it again, delete the block; then run this again {NOTHING_WRITTEN}"
            )
        first = lines[index]
        blocks.append(Block(first.start, lines[stop].end, first.newline or "\n"))
        index = stop + 1
    return blocks


def block_text(body: str, style: CommentStyle, newline: str = "\n") -> str:
    """The block that holds `body` (its lines; a final line break is dropped)."""
    lines = body.rstrip("\n").split("\n")
    content = "\n".join(lines)
    marked = [style.begin(digest(content)), *lines, style.end]
    return newline.join(marked) + newline


def with_block(
    path: Path,
    text: str | None,
    body: str,
    style: CommentStyle,
    strings: StringLines | None = None,
) -> str:
    """`text` with lockyard's block holding `body`: the existing block replaced in place (and
    any further one removed), or a new one appended."""
    blocks = find_blocks(path, text, style, strings)
    if text is None:
        return block_text(body, style)
    if not blocks:
        newline = newline_style(text)
        return text + newline + block_text(body, style, newline)
    first = blocks[0]
    for block in reversed(blocks[1:]):
        text = _cut(text, block)
    replaced = block_text(body, style, first.newline)
    return text[: first.start] + replaced + text[first.end :]


def without_block(
    path: Path, text: str | None, style: CommentStyle, strings: StringLines | None = None
) -> str | None:
    """`text` without lockyard's blocks; None when the file was only the block."""
    blocks = find_blocks(path, text, style, strings)
    if text is None or not blocks:
        return text
    if len(blocks) == 1 and blocks[0].start == 0 and blocks[0].end == len(text):
        return None
    for block in reversed(blocks):
        text = _cut(text, block)
    return text


def has_block(
    path: Path, text: str | None, style: CommentStyle, strings: StringLines | None = None
) -> bool:
    return bool(find_blocks(path, text, style, strings))


def is_whole_block(path: Path, text: str | None, style: CommentStyle) -> bool:
    """Whether `text` is exactly one block of lockyard's (a file lockyard wrote whole)."""
    blocks = find_blocks(path, text, style)
    return text is not None and len(blocks) == 1 and blocks[0].end - blocks[0].start == len(text)


def _cut(text: str, block: Block) -> str:
    """`text` without `block`, and without the line break placed before it when it is last."""
    before, after = text[: block.start], text[block.end :]
    if after or not before:
        return before + after
    first = before.find("\n")
    if first == len(before) - 1:  # the line break lockyard added to a text that had none
        return before[:-1]
    separator = "\r\n" if first > 0 and before[first - 1] == "\r" else "\n"
    return before[: -len(separator)] if before.endswith(separator) else before
