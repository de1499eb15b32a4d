"""Whether a clone's agents take turns at git: a file in the clone's lockyard state.

`lockyard init --git-turns` writes `<git common dir>/lockyard/git-turns.on`, `lockyard
uninstall` removes it. The guard looks for it on each shell call (one `stat`), so the setting
reaches every session of every worktree of the clone, whatever the CLI passes to its hooks'
environment (Codex passes them only a few variables of its own). Standard library only.
"""

from __future__ import annotations

import contextlib
import os
from typing import Final

from ..clone_state import clone_state_dir

SWITCH_NAME: Final = "git-turns.on"


def switch_path(root: str) -> str:
    """The switch file of the checkout whose top is `root`."""
    return os.path.join(clone_state_dir(root), SWITCH_NAME)


def turns_switched_on(root: str) -> bool:
    """Whether `lockyard init --git-turns` switched git turns on for the clone of `root`."""
    return os.path.exists(switch_path(root))


def switch_turns(root: str, on: bool) -> bool:
    """Switch git turns on or off for the clone of `root`; whether that changed anything."""
    path = switch_path(root)
    if on:
        if os.path.exists(path):
            return False
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as file:
            file.write("Written by `lockyard init --git-turns`: agents here take turns at git.\n")
        return True
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
        return True
    return False
