"""`lockyard status PATH...`: for each path, who holds it and who waits for it, since when,
and whether taking it now would be granted at once.

The same look an agent's `lock_status` tool gives (`infra/tools/lock_look.py`: two reads of
the store per path, nothing written), for a person: a few short lines per path, wrapped to
the terminal, or one JSON document. Holders and waiters name their process and whether it is
alive, since a dead holder is what an operator then clears with `lockyard clean`.
"""

from __future__ import annotations

import shutil
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..infra.lockstore import HolderRecord, LockBackend, WaiterRecord, open_checkout
from ..infra.tools.lock_look import (
    Look,
    Overlap,
    holding_entry,
    look,
    overlap_entry,
    overlaps,
    waiting_entry,
)
from ._errors import CliError, ExitCode
from ._format import format_duration, print_json
from ._keys import lock_keys
from ._lockdir import LockDirNotCreatedError, open_store, store_errors

NOTHING_LOOKED_AT = "nothing was looked at"


def show_paths(
    paths: list[str],
    *,
    lock_dir: Path | None,
    backend: str | None,
    repo: Path | None,
    namespace: str | None,
    source: str,
    json_output: bool,
) -> None:
    """Look at each of `paths` in the store and print what a person needs to know."""
    store: LockBackend | None
    try:
        store = open_store(lock_dir, backend, read_only=True, repo=repo, namespace=namespace)
        where: str | Path = store.location
    except LockDirNotCreatedError as missing:  # nothing was ever locked there: all free
        store, where = None, missing.path
    try:
        keys = _keys(store, paths, repo, namespace)
        with store_errors():
            now = time.time()
            locks = [] if store is None else store.list_locks()  # what lies above or below
            looks = [
                Look(key, (), ())
                if store is None
                else look(store, key, overlaps(key, store.namespace, locks))
                for key in keys
            ]
    finally:
        if store is not None:
            store.close()
    if json_output:
        print_json(
            {
                "lock_dir": str(where),
                "lock_dir_source": source,
                "lock_dir_exists": store is not None,
                "taken_at": now,
                "paths": [path_payload(found, now) for found in looks],
            }
        )
        return
    width = max(40, shutil.get_terminal_size((80, 24)).columns)
    print(_wrap(f"Locks in {where} ({source})", width))
    if store is None:
        print(_wrap("It does not exist yet: nothing was ever locked there.", width))
    for found in looks:
        for line in describe(found, now):
            print(_wrap(line, width) if line else line)


def _wrap(line: str, width: int) -> str:
    """`line` folded at spaces to `width`, continued indented under its text (paths and agent ids,
    hyphens and all, are never split; one longer than the terminal gets a line of its own)."""
    indent = " " * (len(line) - len(line.lstrip()) + 3)
    return textwrap.fill(
        line, width, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False
    )


def _keys(
    store: LockBackend | None, paths: list[str], repo: Path | None, namespace: str | None
) -> list[str]:
    if store is not None:
        return lock_keys(store.canonicalize, paths, NOTHING_LOOKED_AT)
    with store_errors():
        try:
            checkout = open_checkout(repo, namespace)
        except ValueError as bad:  # no such --repo directory, a bad --namespace
            raise CliError(str(bad), ExitCode.USAGE) from None
    return lock_keys(checkout.key, paths, NOTHING_LOOKED_AT)


def path_payload(found: Look, now: float) -> dict[str, Any]:
    """One path in `status PATH... --json`: the agent's `lock_status` entry, each holder and
    waiter with its process and liveness, and no `you_*` fields (a person holds nothing)."""
    return {
        "filepath": found.key,
        "held_by": [
            holding_entry(found, holder, now) | _process(holder) for holder in found.holders
        ],
        "waiting": [waiting_entry(waiter, now) | _process(waiter) for waiter in found.queue],
        "shared_by": list(found.readers),
        "would_be_granted": found.would_be_granted(""),
        "overlapping": [overlap_entry(overlap, now) for overlap in found.overlapping],
    }


def _process(record: HolderRecord | WaiterRecord) -> dict[str, Any]:
    liveness, _ = record.liveness()
    return {"pid": record.pid, "host": record.host, "liveness": liveness.value}


def describe(found: Look, now: float) -> Iterator[str]:
    """The path, then one indented line each: who holds it, who waits, the verdict."""
    yield found.key
    for holder in found.holders:
        fence = "" if holder.fence is None else f", fence {holder.fence}"
        yield (
            f"  held by {holder.agent_id} for {format_duration(now - holder.acquired_at)} "
            f"(since {_clock(holder.acquired_at, now)}; {_who(holder)}{fence})"
        )
        idle = found.idle_seconds(holder, now)
        if idle is not None:
            yield f"  {holder.agent_id} last did anything {format_duration(idle)} ago"
    if found.readers:
        waiting = " (the holder waits for them to leave)" if found.holders else ""
        yield f"  held shared by {', '.join(found.readers)}{waiting}"
    if not found.holders and not found.readers:
        yield "  free" if not found.queue else "  free, kept for the first in line"
    if found.queue:
        yield "  waiting, first come first served:"
    for place, waiter in enumerate(found.queue, start=1):
        waited = format_duration(now - waiter.since)
        yield f"    {place}. {waiter.agent_id} for {waited} ({_who(waiter)})"
    for overlap in found.overlapping:
        kind = "directory" if overlap.key.endswith("/") else "glob"
        where = f"covered by {kind} lock" if overlap.above else "below it:"
        yield f"  {where} {_overlap_text(overlap, now)}"
    yield f"  taking it now: {_verdict(found)}"


def _overlap_text(overlap: Overlap, now: float) -> str:
    """`src/api/x.py held by bob for 3 s; shared by carol; 2 waiting`."""
    parts = [
        f"held by {h.agent_id} for {format_duration(now - h.acquired_at)}" for h in overlap.holders
    ]
    if overlap.readers:
        parts.append("shared by " + ", ".join(r.agent_id for r in overlap.readers))
    if overlap.queue:
        parts.append(f"{len(overlap.queue)} waiting")
    return f"{overlap.key} {'; '.join(parts)}" if parts else overlap.key


def _verdict(found: Look) -> str:
    blocking = [o.key for o in found.overlapping if o.blocks("")]
    if blocking:
        return "waits for " + ", ".join(blocking) + " (their scopes overlap)"
    if found.would_be_granted(""):
        gone = found.holders or found.queue  # only dead processes hold or wait
        return "granted at once" + (" (taking over from dead processes)" if gone else "")
    ahead = len(found.queue)
    if found.readers and not found.holders and not ahead:
        return 'waits for the readers to leave (mode "shared" joins them)'
    return f"waits ({ahead} already waiting)" if ahead else "waits (nobody else waiting)"


def _who(record: HolderRecord | WaiterRecord) -> str:
    liveness, _ = record.liveness()
    return f"pid {record.pid} on {record.host}, {liveness.value}"


def _clock(stamp: float, now: float) -> str:
    """Local time of day, with the date when it is not within the last day."""
    shown = time.localtime(stamp)
    if now - stamp < 20 * 3600:
        return time.strftime("%H:%M:%S", shown)
    return time.strftime("%Y-%m-%d %H:%M", shown)
