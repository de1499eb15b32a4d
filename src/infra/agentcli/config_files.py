"""Editing the agent CLIs' configuration files: merge in, take back out, never clobber.

Every edit is computed in memory first (`FileChange`: the text before and after), so a file
that cannot be read as what it should be (invalid JSON, invalid TOML) stops the whole
`init` or `uninstall` before anything is written. Only what lockyard added is ever removed:
JSON entries are matched by content, text blocks by their begin/end marker lines.
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

BEGIN: Final = "lockyard:begin"
END: Final = "lockyard:end"


class ConfigFileError(Exception):
    """An existing file cannot be edited safely; nothing was written."""


@dataclass(frozen=True)
class FileChange:
    """One file's text before (None: absent) and after (None: to be deleted)."""

    path: Path
    before: str | None
    after: str | None

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self, root: Path) -> str:
        name = os.path.relpath(self.path, root)
        before = [] if self.before is None else self.before.splitlines(keepends=True)
        after = [] if self.after is None else self.after.splitlines(keepends=True)
        return "".join(
            difflib.unified_diff(
                before,
                after,
                "/dev/null" if self.before is None else f"a/{name}",
                "/dev/null" if self.after is None else f"b/{name}",
            )
        )

    def apply(self) -> None:
        if self.after is None:
            if self.path.exists():
                self.path.unlink()
            _remove_empty_parents(self.path.parent)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temp = self.path.with_name(f".{self.path.name}.lockyard-tmp")
        temp.write_text(self.after, encoding="utf-8")
        os.replace(temp, self.path)


def _remove_empty_parents(directory: Path) -> None:
    """Remove `directory` and its parents while empty (`.claude/` once its settings are gone);
    the walk stops at the first one holding anything, which the repository root always does."""
    while True:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(f"cannot read {path}: {exc}") from None


# --- JSON ----------------------------------------------------------------------------------


def load_json_object(path: Path, text: str | None) -> dict[str, Any]:
    """The file's JSON object ({} when absent); ConfigFileError when it is not one."""
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigFileError(
            f"{path} is not valid JSON ({exc}); fix or remove it, then run this again "
            "(nothing was written)"
        ) from None
    if not isinstance(data, dict):
        raise ConfigFileError(
            f"{path} holds a JSON {type(data).__name__}, not an object; fix it, then run this "
            "again (nothing was written)"
        )
    return data


def dump_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def child_object(parent: dict[str, Any], key: str, path: Path, where: str) -> dict[str, Any]:
    """`parent[key]`, created as {} if missing; ConfigFileError if it is not an object."""
    value = parent.setdefault(key, {})
    if not isinstance(value, dict):
        raise ConfigFileError(f"{path}: {where} is not an object; fix it (nothing was written)")
    return value


def child_list(parent: dict[str, Any], key: str, path: Path, where: str) -> list[Any]:
    value = parent.setdefault(key, [])
    if not isinstance(value, list):
        raise ConfigFileError(f"{path}: {where} is not a list; fix it (nothing was written)")
    return value


def prune_empty(parent: dict[str, Any], *keys: str) -> None:
    """Remove `parent[keys[0]][keys[1]]...` bottom-up wherever it became empty."""
    if not keys or keys[0] not in parent:
        return
    value = parent[keys[0]]
    if isinstance(value, dict):
        prune_empty(value, *keys[1:])
    if isinstance(value, dict | list) and not value:
        del parent[keys[0]]


def json_text(path: Path, text: str | None, data: dict[str, Any]) -> str | None:
    """The text that makes the file hold `data`: None (delete) when lockyard emptied it, the
    old text when the content is unchanged (the user's formatting kept)."""
    if not data:
        return None
    if text is not None and load_json_object(path, text) == data:
        return text
    return dump_json(data)


# --- TOML (checked with tomllib; lockyard's part is a marked text block) --------------------


def load_toml(path: Path, text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(
            f"{path} is not valid TOML ({exc}); fix it, then run this again (nothing was written)"
        ) from None


# --- marked text blocks ------------------------------------------------------------------


def with_block(path: Path, text: str | None, block: str, comment: tuple[str, str]) -> str:
    """`text` with lockyard's block (between marker lines) set to `block`, appended if new."""
    opening, closing = comment
    begin, end = f"{opening}{BEGIN}{closing}", f"{opening}{END}{closing}"
    marked = f"{begin}\n{block.rstrip()}\n{end}\n"
    current = text or ""
    span = _block_span(path, current, begin, end)
    if span is not None:
        return current[: span[0]] + marked + current[span[1] :]
    if current and not current.endswith("\n"):
        current += "\n"
    return current + ("\n" if current else "") + marked


def without_block(path: Path, text: str | None, comment: tuple[str, str]) -> str | None:
    """`text` without lockyard's block; None when nothing else is left."""
    if text is None:
        return None
    opening, closing = comment
    span = _block_span(path, text, f"{opening}{BEGIN}{closing}", f"{opening}{END}{closing}")
    if span is None:
        return text
    rest = text[: span[0]].rstrip("\n") + text[span[1] :]
    rest = rest.rstrip("\n") + "\n" if rest.strip() else ""
    return rest or None


def has_block(text: str | None, comment: tuple[str, str]) -> bool:
    return text is not None and f"{comment[0]}{BEGIN}{comment[1]}\n" in text


def _block_span(path: Path, text: str, begin: str, end: str) -> tuple[int, int] | None:
    start = text.find(begin + "\n")
    if start < 0:
        return None
    stop = text.find(end, start)
    if stop < 0:
        raise ConfigFileError(
            f"{path}: lockyard's block starts ({begin}) but never ends ({end}); restore the end "
            "line or delete the block (nothing was written)"
        )
    stop += len(end)
    if text[stop : stop + 1] == "\n":
        stop += 1
    return start, stop
