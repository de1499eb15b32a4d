"""Keys of directories: a directory lock's key is its repository-relative path with a
trailing slash (`src/api/`), so one string comparison tells a file key from a directory key
and a key's ancestors are its prefixes up to each slash. Pure string work, no file system."""

from __future__ import annotations


def is_directory_key(key: str) -> bool:
    """Whether `key` names a directory (`src/api/`), not a file."""
    return key.endswith("/")


def directory_ancestors(key: str) -> list[str]:
    """The directory keys that cover `key`, outermost first: `a/b/c.py` -> `a/`, `a/b/`;
    `a/b/` -> `a/`. The checkout's root (`./`, and `/` for a key outside it) is no lockable
    directory and is left out."""
    body = key[:-1] if key.endswith("/") else key
    found = []
    cut = body.find("/", 1)
    while cut != -1:
        prefix = body[: cut + 1]
        if prefix != "./":
            found.append(prefix)
        cut = body.find("/", cut + 1)
    return found


def covers(directory_key: str, key: str) -> bool:
    """Whether the directory `directory_key` covers `key` (a file or directory under it, or
    itself)."""
    return key.startswith(directory_key)
