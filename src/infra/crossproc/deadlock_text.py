"""A deadlock as a person reads it in a cross-process monitor's log and output.

The cross-process monitor names each lock by its graph node, `namespace::key` (a lock is the
pair); a person reads `src/app.py`. When every lock of the cycle is of one repository, the
keys are shown bare and the repository once, at the end.
"""

from __future__ import annotations

from typing import Final

from ...core.deadlock_info import DeadlockInfo

NODE_SEPARATOR: Final = "::"
"""Between a lock node's namespace and its key (`state.node_key`)."""


def readable(info: DeadlockInfo) -> str:
    """`a waits for src/x.py (held by b) -> b waits for src/y.py (held by a) (in NS)`; the
    nodes whole when the cycle spans several repositories."""
    namespaces = {
        step.lock_path.split(NODE_SEPARATOR, 1)[0]
        for step in info.cycle
        if NODE_SEPARATOR in step.lock_path
    }
    if len(namespaces) != 1 or not all(NODE_SEPARATOR in s.lock_path for s in info.cycle):
        return info.describe()
    (namespace,) = namespaces
    return f"{info.within(namespace).describe()} (in {namespace})"
