"""Commands that show a file's content to whoever runs them: the reads of a command line.

The stale-read check (`lockyard.infra.seen`) needs to know which files an agent has seen; in
a shell command that is the operands of these viewers and a file redirected into a command
(`< f`). The walk that finds a command's writes (`targets.py`) finds its views on the way.
"""

from __future__ import annotations

from typing import Final

VIEWERS: Final = frozenset(
    {"cat", "nl", "head", "tail", "less", "more", "bat", "batcat", "sed", "awk", "tac", "view"}
)


def shows_operands(base: str, args: list[str | None]) -> bool:
    """Whether the command named `base` shows its file operands (`sed -i` edits instead)."""
    return base in VIEWERS and not (base == "sed" and _edits_in_place(args))


def _edits_in_place(args: list[str | None]) -> bool:
    """`sed -i`, `-ni`, `--in-place`."""
    for word in args:
        if word is None or not word.startswith("-"):
            continue
        if word.startswith("--in-place") or (not word.startswith("--") and "i" in word[1:]):
            return True
    return False
