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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_SECONDS = 3600.0
MAX_SECONDS = 31 * 86400.0
MAX_ITEMS = 20000
"""Items one answer carries at most (the latest of the window): a page stays light."""

ENDS_A_HOLD = {"release", "hand-over", "reclaim", "operator-release"}
MARKERS = {"deadlock", "denied", "reclaim", "pass-over", "operator-release"}


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


def item_of(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The bar or marker of one journal record (its JSON form), or None."""
    kind = record.get("kind")
    at = record.get("t")
    if not isinstance(kind, str) or not isinstance(at, int | float) or not math.isfinite(at):
        return None
    agent = _text(record.get("agent"))
    file = _text(record.get("file"))
    if kind in ENDS_A_HOLD and _number(record.get("held")) is not None:
        holder = _text(record.get("other")) if kind == "hand-over" else agent
        held = _number(record.get("held")) or 0.0
        return {"k": "hold", "a": holder, "f": file, "s": at - held, "e": at}
    if kind == "wait-end" and _number(record.get("waited")) is not None:
        waited = _number(record.get("waited")) or 0.0
        return {
            "k": "wait", "a": agent, "f": file, "s": at - waited, "e": at,
            "o": _text(record.get("outcome")),
        }  # fmt: skip
    if kind == "deadlock":
        cycle = [
            [_text(step[0]), _text(step[1]), _text(step[2])]
            for step in record.get("cycle") or []
            if isinstance(step, list | tuple) and len(step) == 3
        ]
        released = record.get("released") or []
        detail = "released " + ", ".join(map(_text, released)) if released else ""
        return {
            "k": "deadlock", "a": _text(record.get("victim")) or agent, "f": file, "s": at,
            "cycle": cycle, "x": detail,
        }  # fmt: skip
    if kind in MARKERS:
        guard = _text(record.get("guard"))
        reason = _text(record.get("reason"))
        return {"k": kind, "a": agent, "f": file, "s": at, "x": f"{guard}: {reason}".strip(": ")}
    return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def items_between(
    records: Iterable[Mapping[str, Any]], window: Window, limit: int = MAX_ITEMS
) -> tuple[list[dict[str, Any]], bool]:
    """The items that show in `window` (the latest `limit`), and whether some were left out."""
    items = []
    for record in records:
        item = item_of(record)
        if item is None:
            continue
        if item.get("e", item["s"]) < window.start or item["s"] > window.end:
            continue
        items.append(item)
    if len(items) > limit:
        return items[-limit:], True
    return items, False
