"""Requests for directory and glob locks under way: a line such a request holds is no grant yet.

A directory or glob request holds its key's line while it waits for the holds below it to go
("draining", `scopes.py`), and a line's holder record looks the same whether its grant was
made or not. So each request says it is under way, from before it first takes the line until
it is granted or gives up:

    pending/<lock name>.<x|s><token>  -> <card>   x: an exclusive request, s: a shared one

The entry is a symlink to the holder card of the agent's grants of that key (`disk.py`), which
names the agent and the processes whose death ends the entry (`scope_marks.py` makes, removes
and prunes entries). A line of a directory or glob held by an agent with no request under way
is granted; one held by an agent whose request is under way is draining, and waits for the
holds below it (a shared request only for the exclusive ones). The deadlock monitor draws the
draining lock's edges from this (`holds_graph.waits_below`), and the guards look below an
agent's own directory or glob lock only while a request of it is under way. Standard library
only: the guards' hook processes read it too.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Final

from ..errors import CorruptRecordError
from .disk import DIR_FLAGS

if TYPE_CHECKING:
    from .disk import LockDir

PENDING: Final = "pending"
"""The folder of the requests under way (present only while there is one)."""


def request_entry(name: str, exclusive: bool, token: str) -> str:
    """The entry of one request for lock `name`."""
    return f"{name}.{'x' if exclusive else 's'}{token}"


def any_pending(dir_fd: int) -> bool:
    """Whether a directory or glob request is under way in this lock directory (one
    `faccessat`)."""
    return os.access(PENDING, os.F_OK, dir_fd=dir_fd, follow_symlinks=False)


def pending_requests(directory: LockDir, name: str | None = None) -> dict[str, dict[str, bool]]:
    """lock name -> {agent: whether a request of it is exclusive} of the requests under way
    (of lock `name` only, when given). An entry whose card cannot be read is left out: it
    names no agent (a request's card is written before its entry)."""
    try:
        folder_fd = os.open(PENDING, DIR_FLAGS, dir_fd=directory.fd)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    try:
        entries = os.listdir(folder_fd)
        found: dict[str, dict[str, bool]] = {}
        for entry in entries:
            lock, _dot, rest = entry.partition(".")
            if (name is not None and lock != name) or rest[:1] not in ("x", "s"):
                continue
            agent = _agent_of(directory, folder_fd, entry)
            if agent is not None:
                agents = found.setdefault(lock, {})
                agents[agent] = agents.get(agent, False) or rest[0] == "x"
        return found
    finally:
        os.close(folder_fd)


def _agent_of(directory: LockDir, folder_fd: int, entry: str) -> str | None:
    try:
        text = directory.cards.read(os.readlink(entry, dir_fd=folder_fd))
        agent = None if text is None else json.loads(text).get("agent_id")
    except (OSError, ValueError, AttributeError, CorruptRecordError):
        return None  # gone meanwhile, or not a card the store wrote: it names no agent
    return agent if isinstance(agent, str) else None
