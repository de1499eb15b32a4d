"""The files a Codex-style patch (`*** Begin Patch` ... `*** End Patch`) would write."""

from __future__ import annotations

from typing import Final

_FILE_MARKERS: Final = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")


def patch_targets(patch: str) -> list[str]:
    """Every path the patch adds, updates, deletes or moves to, in order, without repeats."""
    targets: list[str] = []
    for line in patch.splitlines():
        for marker in _FILE_MARKERS:
            if line.startswith(marker):
                path = line[len(marker) :].strip()
                if path and path not in targets:
                    targets.append(path)
    return targets
