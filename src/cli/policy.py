"""`lockyard policy`: show or set the lock store's policy, shared by every process on it.

One setting so far, the idle limit (crossproc/idle_policy.py): kept in the lock directory
(`policy`), so every `lockyard serve` and monitor on it applies the same limit, and the next
leader pass applies a change.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from ..infra.crossproc.idle_policy import duration_text
from ._errors import EXIT_CODES_HELP, CliError, ExitCode, reports_errors
from ._format import line_console, print_json, quiet_library_logs
from ._lockdir import (
    LOCK_DIR_HELP,
    LockDirNotCreatedError,
    location_source,
    open_store,
    store_errors,
)
from ._options import backend_option, flag, lock_dir_option

HELP = """Show or set the lock store's policy (the same for every process on it).

--idle-limit DURATION (`90s`, `10m`, `1h`; a bare number is seconds) revokes the locks of a
holder that did nothing for that long while another agent waits for one of them: the waiters
get the locks in turn, the guards refuse the holder's writes, and its next lock call tells it
why. `--idle-limit off` (the default) never revokes. The process leading deadlock detection
(any `lockyard serve`, coordinator or `lockyard monitor` on the store) applies it within
seconds; `lockyard status` and `lockyard doctor` show it.
"""

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smh]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}


def register(app: typer.Typer) -> None:
    app.command("policy", help=HELP, epilog=EXIT_CODES_HELP)(policy)


def parse_duration(text: str) -> float | None:
    """Seconds of `90s`, `10m`, `1.5h`, `600`; None for `off`. CliError otherwise."""
    spelled = text.strip().lower()
    if spelled == "off":
        return None
    match = _DURATION.fullmatch(spelled)
    seconds = float(match[1]) * _UNIT_SECONDS[match[2]] if match else 0.0
    if not seconds > 0:
        raise CliError(
            f"--idle-limit {text!r} is not a duration",
            ExitCode.USAGE,
            "give one such as 90s, 10m or 1h (a bare number is seconds), or off",
        )
    return seconds


@reports_errors
def policy(
    idle_limit: Annotated[
        str | None,
        typer.Option(
            "--idle-limit",
            metavar="DURATION|off",
            help="Revoke a holder's locks when it was idle this long while others wait.",
            show_default=False,
        ),
    ] = None,
    lock_dir: Annotated[Path | None, lock_dir_option(LOCK_DIR_HELP)] = None,
    backend: Annotated[str | None, backend_option()] = None,
    json_output: Annotated[
        bool, flag("--json", help="Print one JSON document (see docs/cli.md).")
    ] = False,
) -> None:
    quiet_library_logs()
    seconds = None if idle_limit is None else parse_duration(idle_limit)
    source = location_source(lock_dir, backend)
    try:
        store = open_store(lock_dir, backend, read_only=idle_limit is None)
    except LockDirNotCreatedError as missing:  # showing only: nothing set there yet
        _show(str(missing.path), source, None, json_output, changed=False)
        return
    with store_errors():
        try:
            if idle_limit is not None:
                store.set_idle_limit(seconds)
            current = store.idle_limit()
        finally:
            store.close()
    _show(store.location, source, current, json_output, changed=idle_limit is not None)


def _show(
    location: str, source: str, limit: float | None, json_output: bool, *, changed: bool
) -> None:
    if json_output:
        print_json({"lock_dir": location, "lock_dir_source": source, "idle_limit_seconds": limit})
        return
    said = "is now" if changed else "is"
    line_console().print(f"Policy of {location} ({source}):")
    line_console().print(f"  idle limit {said} {idle_limit_text(limit)}")


def idle_limit_text(limit: float | None) -> str:
    """`10m: a holder idle that long while others wait loses its locks`, or `off ...`."""
    if limit is None:
        return "off: a stalled holder keeps its locks (lockyard clean --agent ID revokes them)"
    return f"{duration_text(limit)}: a holder idle that long while others wait loses its locks"
