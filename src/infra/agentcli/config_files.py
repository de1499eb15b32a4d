"""Editing the agent CLIs' configuration files: merge in, take back out, never lose a byte.

This is the one way `lockyard init` and `lockyard uninstall` touch a person's files. A `Plan`
reads each file once (`repo_files`: inside the repository only, regular files only, symlinks
kept), every edit is computed in memory, and nothing is written until every file has been read
and checked; then all are written or none (`Plan.apply`).

The edits, each undone exactly by its removal (so `uninstall` after `init` gives back the
same bytes, and `init` leaves every byte outside lockyard's entries as it was):
- JSON: `Plan.json(name)` gives a `JsonDocument` that splices lockyard's members and list
  items into the text (`json_edit`): numbers, duplicate keys, comments (where the CLI allows
  them), indentation and key order of the user's text stay as they were.
- Markdown, TOML, or any text: `marked_blocks.with_block` / `without_block`, a block between
  checksummed marker lines; a block a person wrote or edited is never taken for lockyard's.
- A file lockyard owns whole (a plugin): a file that is exactly one marked block.
"""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from . import repo_files
from .config_errors import NOTHING_WRITTEN, ConfigFileError
from .json_edit import MISSING, JsonDocument
from .marked_blocks import (
    HASH_COMMENT,
    MARKDOWN_COMMENT,
    SLASH_COMMENT,
    CommentStyle,
    has_block,
    is_whole_block,
    with_block,
    without_block,
)
from .repo_files import OUTSIDE_FLAG, Location
from .toml_text import load_toml, string_lines, toml_string

__all__ = [
    "HASH_COMMENT",
    "MARKDOWN_COMMENT",
    "MISSING",
    "NOTHING_WRITTEN",
    "OUTSIDE_FLAG",
    "SLASH_COMMENT",
    "CommentStyle",
    "ConfigFileError",
    "FileChange",
    "JsonDocument",
    "Plan",
    "has_block",
    "is_whole_block",
    "load_toml",
    "string_lines",
    "toml_string",
    "with_block",
    "without_block",
]


@dataclass(frozen=True)
class FileChange:
    """One file's text before (None: absent) and after (None: to be deleted)."""

    location: Location
    snapshot: repo_files.Snapshot
    after: str | None

    @property
    def path(self) -> Path:
        """The file's name as the user knows it."""
        return self.location.shown

    @property
    def before(self) -> str | None:
        return self.snapshot.text

    def name(self, root: Path) -> str:
        """The name to show: relative to the repository, and where a symlink leads."""
        shown = (
            os.path.relpath(self.path, root) if self.path.is_relative_to(root) else str(self.path)
        )
        if self.location.real != self.path:
            return f"{shown} (-> {self.location.real})"
        return shown

    def diff(self, root: Path) -> str:
        name = (
            os.path.relpath(self.path, root) if self.path.is_relative_to(root) else str(self.path)
        )
        before = [] if self.before is None else self.before.splitlines(keepends=True)
        after = [] if self.after is None else self.after.splitlines(keepends=True)
        lines = difflib.unified_diff(
            before,
            after,
            "/dev/null" if self.before is None else f"a/{name}",
            "/dev/null" if self.after is None else f"b/{name}",
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


@dataclass
class Plan:
    """The planned text of each file (read once from disk); `changes()` lists what differs.

    Files are named relative to the repository root (or by an absolute path, for a file of
    the user's own configuration). A name that leads outside the repository is refused unless
    `outside_ok` (the user passed --write-outside-repo). Two names of one file (`AGENTS.md`
    a symlink to `CLAUDE.md`) share one planned text.
    """

    root: Path
    outside_ok: bool = False
    _locations: dict[Path, Location] = field(default_factory=dict)
    _before: dict[Path, repo_files.Snapshot] = field(default_factory=dict)
    _after: dict[Path, str | None] = field(default_factory=dict)

    def path(self, name: str | Path) -> Path:
        """The file's name as the user knows it (for messages)."""
        return self.root / name

    def _key(self, name: str | Path) -> Path:
        location = repo_files.locate(self.root, name, outside_ok=self.outside_ok)
        if location.real not in self._before:
            self._locations[location.real] = location
            self._before[location.real] = repo_files.read(location)
            self._after[location.real] = self._before[location.real].text
        return location.real

    def text(self, name: str | Path) -> str | None:
        return self._after[self._key(name)]

    def set(self, name: str | Path, text: str | None) -> None:
        self._after[self._key(name)] = text

    def same_file(self, first: str | Path, second: str | Path) -> bool:
        return self._key(first) == self._key(second)

    def read_json(self, name: str | Path, *, comments: bool = False) -> JsonDocument:
        """The file as a JSON document, to read (edits to it are not kept: see `json`)."""
        return JsonDocument(self.path(name), self.text(name), comments=comments)

    @contextlib.contextmanager
    def json(self, name: str | Path, *, comments: bool = False) -> Iterator[JsonDocument]:
        """The file as a JSON document to edit; its text is planned when the block ends."""
        document = self.read_json(name, comments=comments)
        yield document
        self.set(name, document.text)

    def changes(self) -> list[FileChange]:
        return [
            FileChange(self._locations[real], self._before[real], after)
            for real, after in sorted(self._after.items())
            if after != self._before[real].text
        ]


def apply(changes: list[FileChange]) -> None:
    """Write every change or none (see `repo_files.apply`)."""
    repo_files.apply([
        repo_files.Write(
            change.location,
            change.snapshot,
            None if change.after is None else change.after.encode("utf-8"),
        )
        for change in changes
    ])  # fmt: skip


def check_encodable(what: str, value: str) -> None:
    """A value written into configuration files must be text that UTF-8 can hold (a
    command-line argument of undecodable bytes cannot be)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigFileError(
            f"{what} {value!r} holds bytes that are not UTF-8; configuration files are UTF-8 "
            f"text, so pass a name in UTF-8 {NOTHING_WRITTEN}"
        ) from None


def toml_text_block(path: Path, text: str | None, body: str) -> str:
    """`text` (TOML) with lockyard's block holding `body`, checked to parse."""
    load_toml(path, text)
    new = with_block(path, text, body, HASH_COMMENT, string_lines)
    try:
        load_toml(path, new)
    except ConfigFileError:
        raise ConfigFileError(
            f"{path}: lockyard's lines would not fit in this TOML file (with them it would no "
            "longer parse: does it already define what lockyard adds, or define its parent "
            f"table inline?); fix it, then run this again {NOTHING_WRITTEN}"
        ) from None
    return new


def toml_without_block(path: Path, text: str | None) -> str | None:
    load_toml(path, text)
    return without_block(path, text, HASH_COMMENT, string_lines)


def toml_has_block(path: Path, text: str | None) -> bool:
    load_toml(path, text)
    return has_block(path, text, HASH_COMMENT, string_lines)
