"""The timeline's data: journal records turned into bars and markers, and its query.

Each record becomes at most one item on its own, with no state carried between records: a
release says how long the lock was held, a wait's end how long the wait was, so a hold or a
wait that began before the window still shows whole. Holds and waits going on now are not
in the journal yet: the page draws them from the live board.

An item is compact JSON: `k` kind (hold, wait, deadlock, denied, reclaim, pass-over,
operator-release), `a` agent, `f` file, `s` start, `e` end (bars), `o` outcome (waits),
`x` a detail (a denial's reason, what a victim released), `cycle` (deadlocks:
[agent, file, held by] per step).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...infra.lockstore import JournalQuery, JournalReader, JournalRecord

DEFAULT_SECONDS = 3600.0
MAX_SECONDS = 31 * 86400.0
MAX_ITEMS = 20000
"""Items one answer carries at most (the latest of the window): a page stays light."""

ENDS_A_HOLD = {"release", "hand-over", "reclaim", "operator-release"}
MARKERS = {"deadlock", "denied", "reclaim", "pass-over", "operator-release"}
ITEM_KINDS = frozenset(ENDS_A_HOLD | MARKERS | {"wait-end"})
"""The kinds of record that can make an item (a grant's bar comes with its release)."""
BAR_KINDS = frozenset(ENDS_A_HOLD | {"wait-end"})
"""The kinds of record that end a bar: all a look past the window can show in it."""
LOOKAHEAD_SECONDS = 900.0
"""How far past a chosen window its holds and waits are looked for (their records come at
their end). Only the bars that began in the window are parsed there (the others are told
by their bytes), so the look costs a search per record; a longer one would cost more."""


class TimelineQueryError(ValueError):
    """A query parameter the timeline cannot use; the message says what it wants."""


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    live: bool
    """True when the window ends now (the page then follows pushed records)."""


def parse_window(params: Mapping[str, list[str]], now: float | None = None) -> Window:
    """The window of `?from=&to=` (seconds since the epoch; `to` empty or absent: now)."""
    now = time.time() if now is None else now
    unknown = sorted(set(params) - {"from", "to"})
    if unknown:
        raise TimelineQueryError(
            f"unknown parameter {unknown[0][:40]!r}: the timeline takes from and to "
            "(seconds since the epoch)"
        )
    end = _seconds(params, "to")
    start = _seconds(params, "from")
    live = end is None
    end = now if end is None else end
    start = end - DEFAULT_SECONDS if start is None else start
    if start >= end:
        raise TimelineQueryError("from must be before to")
    if end - start > MAX_SECONDS:
        raise TimelineQueryError("the window may span 31 days at most: narrow from and to")
    return Window(start, end, live)


def _seconds(params: Mapping[str, list[str]], name: str) -> float | None:
    values = params.get(name, [])
    if len(values) > 1:
        raise TimelineQueryError(f"{name} is given {len(values)} times: give it once")
    if not values or not values[0].strip():
        return None
    text = values[0].strip()
    try:
        value = float(text) if len(text) <= 32 else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or value > 1e11:
        raise TimelineQueryError(
            f"{name} must be a time in seconds since the epoch (like 1764240000.5), "
            f"not {text[:40]!r}"
        )
    return value


def item_of(record: JournalRecord) -> dict[str, Any] | None:
    """The bar or marker of one journal record, or None."""
    kind, at = record.kind, record.time
    if not math.isfinite(at):
        return None
    if kind in ENDS_A_HOLD and _duration(record.held) is not None:
        holder = (record.other or "") if kind == "hand-over" else record.agent
        return {"k": "hold", "a": holder, "f": record.file, "s": at - (record.held or 0.0), "e": at}
    if kind == "wait-end" and _duration(record.waited) is not None:
        return {
            "k": "wait", "a": record.agent, "f": record.file, "s": at - (record.waited or 0.0),
            "e": at, "o": record.outcome or "",
        }  # fmt: skip
    if kind == "deadlock":
        cycle = [[step.agent, step.waits_on, step.held_by] for step in record.cycle]
        detail = "released " + ", ".join(record.released) if record.released else ""
        return {
            "k": "deadlock", "a": record.victim or record.agent, "f": record.file, "s": at,
            "cycle": cycle, "x": detail,
        }  # fmt: skip
    if kind in MARKERS:
        detail = f"{record.guard or ''}: {record.reason or ''}".strip(": ")
        return {"k": kind, "a": record.agent, "f": record.file, "s": at, "x": detail}
    return None


def _duration(value: float | None) -> float | None:
    if value is not None and math.isfinite(value) and value >= 0:
        return value
    return None


def read_window(
    journal: JournalReader, window: Window, limit: int = MAX_ITEMS
) -> tuple[list[dict[str, Any]], bool]:
    """The items of `window` read from `journal` (the latest `limit`), and whether some were
    left out. Only the kinds that make an item are read (the others are skipped before they
    are parsed), and the window is read backwards from its end, so a busy hour of a big
    journal costs its last `limit` records, not all of them. A chosen window also reads the
    records of the LOOKAHEAD_SECONDS after it: a hold or a wait that began in the window and
    ended then shows too (its records are picked by their bytes: see LOOKAHEAD_SECONDS)."""
    until = None if window.live else window.end
    found = journal.latest(
        JournalQuery.of(since=window.start, until=until, kinds=ITEM_KINDS), limit + 1
    )
    later: Iterable[JournalRecord] = ()
    if until is not None:
        ahead = until + min(window.end - window.start, LOOKAHEAD_SECONDS)
        later = journal.records(
            JournalQuery.of(since=until, until=ahead, kinds=BAR_KINDS, began_before=until)
        )
    items, _ = items_between([*found[-limit:], *later], window, limit)
    return items, len(found) > limit


def items_between(
    records: Iterable[JournalRecord], window: Window, limit: int = MAX_ITEMS
) -> tuple[list[dict[str, Any]], bool]:
    """The items that show in `window` (the latest `limit`), and whether some were left out."""
    items: deque[dict[str, Any]] = deque(maxlen=limit)
    shown = 0
    for record in records:
        item = item_of(record)
        if item is None:
            continue
        if item.get("e", item["s"]) < window.start or item["s"] > window.end:
            continue
        items.append(item)
        shown += 1
    return list(items), shown > limit
