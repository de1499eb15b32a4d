"""Small text formatters shared by the commands' human output."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich loads in ~0.1 s: imported when there is something to render
    from rich.console import Console


def format_duration(seconds: float) -> str:
    """A duration a person reads at any scale, alike in every command and on the page
    (`static/format.js` is its twin): `42µs`, `4.2ms`, `450ms`, `4.5s`, `12s`, `5m03s`,
    `2h07m`, `3d04h`; `0s` for none (a sub-second hold is never `0.0s`)."""
    if seconds <= 0:
        return "0s"
    if seconds < 0.0000995:
        return f"{seconds * 1_000_000:.0f}µs"
    if seconds < 0.00995:
        return f"{seconds * 1000:.1f}ms"
    if seconds < 0.9995:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 9.95:
        return f"{seconds:.1f}s"
    whole = max(int(seconds), 10)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def format_ms(seconds: float | None) -> str:
    """A duration in milliseconds (microseconds below 0.1 ms) with sensible precision, or `-`."""
    if seconds is None:
        return "-"
    millis = seconds * 1000
    if millis < 0.1:  # a tmpfs directory update: microseconds, not "0.00 ms"
        return f"{millis * 1000:.1f} µs"
    if millis < 10:
        return f"{millis:.2f} ms"
    if millis < 100:
        return f"{millis:.1f} ms"
    return f"{millis:.0f} ms"


def display_key(lock_key: str, base: Path | None) -> str:
    """Show a lock key relative to `base` when it lies inside it, else unchanged."""
    if base is None:
        return lock_key
    try:
        return str(Path(lock_key).relative_to(base))
    except ValueError:
        return lock_key


def print_json(payload: Any) -> None:
    """Machine output: one JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    sys.stdout.flush()


def quiet_library_logs() -> None:
    """Keep the library's warnings (a reclaimed lock, a deadlock found) off the terminal:
    the command reports those itself, and a stray log line would break a live view."""
    logging.getLogger("lockyard").setLevel(logging.ERROR)


def line_console() -> Console:
    """A console for line-oriented output: never wraps a long path across lines."""
    from rich.console import Console

    return Console(soft_wrap=True)


PIPE_WIDTH = 1000
"""The width tables get in a pipe or a file: their content's, never rich's default of 80
columns (which crops or drops the widest columns)."""


def table_console() -> Console:
    """A console for tables: the terminal's width on a terminal, else as wide as they are."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=PIPE_WIDTH)
