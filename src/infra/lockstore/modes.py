"""Lock modes: an exclusive hold (a writer: the only holder) or a shared one (a reader:
held together with other readers; an exclusive hold excludes them)."""

from __future__ import annotations

from typing import Final, Literal

LockMode = Literal["exclusive", "shared"]
EXCLUSIVE: Final = "exclusive"
SHARED: Final = "shared"


def validate_mode(mode: object) -> LockMode:
    """`mode` itself when it is a lock mode; else ValueError saying what to pass."""
    if mode == EXCLUSIVE:
        return EXCLUSIVE
    if mode == SHARED:
        return SHARED
    raise ValueError(f"mode must be 'exclusive' or 'shared', got {mode!r}")
