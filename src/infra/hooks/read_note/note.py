"""What an agent sees of a file, noted in the clone's book (`lockyard.infra.seen`): the files
its read tools open, and those its shell commands show (`cat`, `sed -n`, `head`...: the shell
guard's walk finds them, `shell_guard/viewers.py`).

A read is noted before it runs (the hooks are pre-tool hooks): if the file changes between
the note and the read, the agent saw a newer version than the book says, and its next write
is refused once too often (it reads again), never allowed once too often.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ...seen.stale import note_read
from ..guard_common import GuardStore, repo_key
from ..write_guard.decide import absolute


def note_reads(store: GuardStore, agent_id: str, paths: Iterable[str], cwd: object) -> None:
    """Note that `agent_id` sees each repository file of `paths` (relative to `cwd`) as it is
    now. Never raises: a read is never refused, and a read not noted only costs a refusal."""
    for raw in paths:
        path = absolute(raw, cwd)
        try:
            key = repo_key(store, path)
            if key is None or not os.path.isfile(path):
                continue
        except Exception:  # the read tool itself will say what is wrong with the path
            continue
        note_read(store.root, agent_id, key)
