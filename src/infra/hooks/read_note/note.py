"""What an agent sees of a file: its read tools, and the whole-file viewers of its shell
commands (`cat`, `sed -n`, `head`...), noted in the clone's book (`lockyard.infra.seen`).

A read is noted before it runs (the hooks are pre-tool hooks): if the file changes between
the note and the read, the agent saw a newer version than the book says, and its next write
is refused once too often (it reads again), never allowed once too often.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from typing import Final

from ...seen.stale import note_read
from ..guard_common import GuardStore, inside_repo
from ..write_guard.decide import absolute

logger = logging.getLogger(__name__)

VIEWERS: Final = frozenset(
    {"cat", "nl", "head", "tail", "less", "more", "bat", "batcat", "sed", "awk", "tac", "view"}
)
"""Commands that show a file's content to whoever runs them (`sed -i` edits instead)."""


def note_reads(store: GuardStore, agent_id: str, paths: Iterable[str], cwd: object) -> None:
    """Note that `agent_id` sees each repository file of `paths` (relative to `cwd`) as it is
    now. Never raises: a read is never refused, and a read not noted only costs a refusal."""
    for raw in paths:
        path = absolute(raw, cwd)
        try:
            if not inside_repo(path, store.root) or not os.path.isfile(path):
                continue
            key = store.canonicalize(path)
        except Exception:  # the read tool itself will say what is wrong with the path
            continue
        note_read(store.root, agent_id, key)


def note_shell_reads(store: GuardStore, agent_id: str, command: str, cwd: object) -> None:
    """Note the files the viewers of `command` show (`cat a b`, `sed -n 1,80p a`, `head a`).
    Read only from literal words naming existing files; `cd <dir>` is followed. Never raises."""
    if not any(name in command for name in VIEWERS):
        return  # most commands: no parse at all
    try:
        from ..shell_guard.syntax import parse_shell  # tree-sitter: only when a viewer is named

        start = cwd if isinstance(cwd, str) and cwd else store.root
        paths = list(_viewed(parse_shell(command), start))
    except Exception:
        logger.warning("could not read which files %r shows", command[:120], exc_info=True)
        return
    note_reads(store, agent_id, paths, None)


def _viewed(script: Sequence[object], cwd: str) -> Iterable[str]:
    from ..shell_guard.syntax import Simple
    from ..shell_guard.words import literal

    for statement in script:
        if isinstance(statement, Simple):
            words = [literal(word) for word in statement.words]
            if not words or words[0] is None:
                continue
            name = os.path.basename(words[0])
            if name == "cd" and len(words) == 2 and words[1] is not None:
                cwd = os.path.normpath(os.path.join(cwd, words[1]))
            elif name in VIEWERS and not (name == "sed" and _edits_in_place(words)):
                for word in words[1:]:
                    if word and not word.startswith("-"):
                        path = os.path.join(cwd, word)
                        if os.path.isfile(path):
                            yield path
                for redirect in statement.redirects:
                    target = None if redirect.target is None else literal(redirect.target)
                    if redirect.op == "<" and target:
                        yield os.path.join(cwd, target)
            continue
        for nested in (getattr(statement, "body", None), *getattr(statement, "parts", ())):
            if isinstance(nested, list):
                yield from _viewed(nested, cwd)


def _edits_in_place(words: list[str | None]) -> bool:
    """`sed -i`, `-ni`, `--in-place`: an edit, not a view."""
    for word in words[1:]:
        if word is None or not word.startswith("-"):
            continue
        if word.startswith("--in-place") or (not word.startswith("--") and "i" in word[1:]):
            return True
    return False
