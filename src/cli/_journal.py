"""What `lockyard log` and `lockyard stats` share: finding the journal, reading times and
filters from the command line, and showing names that may be hostile."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Final

import typer

from ..infra.lockstore import (
    JOURNAL_KINDS,
    BadQueryError,
    JournalQuery,
    JournalReader,
    chosen_spec,
    is_postgres_spec,
    open_journal,
)
from ._errors import CliError, ExitCode
from ._lockdir import check_lock_dir, resolve_lock_dir, store_errors

_AGO: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)\s*(ago)?\s*$")
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_CLOCK: Final = re.compile(r"^\s*(\d{1,2}):(\d{2})(?::(\d{2}))?\s*$")
TIME_HELP: Final = (
    "10m, 2h, 3d (that long ago), 14:02 (today, local time), or 2026-11-27T14:02 (ISO 8601)"
)
SinceOption = Annotated[
    str | None, typer.Option("--since", metavar="WHEN", help=f"From: {TIME_HELP}.")
]
UntilOption = Annotated[
    str | None, typer.Option("--until", metavar="WHEN", help="Up to (not including).")
]
"""The time window's options, the same in `log` and `stats`."""
KIND_HELP: Final = f"Only records of this kind (repeatable): {', '.join(JOURNAL_KINDS)}."
_UNPRINTABLE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e]")


class JournalNotCreatedError(Exception):
    """The lock directory does not exist yet: nothing was ever recorded there."""

    def __init__(self, where: Path) -> None:
        super().__init__(f"no journal in {where}: the lock directory does not exist yet")
        self.where = where


def open_command_journal(lock_dir: Path | None, backend: str | None) -> JournalReader:
    """The journal a command reads: of `--backend` (PostgreSQL), else of the lock directory
    (`--lock-dir`, $LOCKYARD_LOCK_DIR, the default), which is checked, never created."""
    with store_errors():
        spec = chosen_spec(backend)
        if spec is not None and is_postgres_spec(spec):
            if lock_dir is not None:
                raise CliError("pass either --lock-dir or a PostgreSQL --backend", ExitCode.USAGE)
            return open_journal(spec)
    if spec is not None and spec.strip() != "file" and lock_dir is None:
        lock_dir = Path(spec)
    where = resolve_lock_dir(lock_dir)
    try:
        check_lock_dir(where)
    except Exception as error:
        if type(error).__name__ == "LockDirNotCreatedError":
            raise JournalNotCreatedError(where) from None
        raise
    return open_journal(str(where))


def parse_when(text: str, option: str, now: float | None = None) -> float:
    """A point in time from the command line, as seconds since the epoch."""
    now = time.time() if now is None else now
    ago = _AGO.match(text)
    if ago is not None:
        return now - float(ago.group(1)) * _UNITS[ago.group(2)]
    clock = _CLOCK.match(text)
    if clock is not None:
        hour, minute, second = int(clock.group(1)), int(clock.group(2)), int(clock.group(3) or 0)
        if hour < 24 and minute < 60 and second < 60:
            today = datetime.fromtimestamp(now).replace(
                hour=hour, minute=minute, second=second, microsecond=0
            )
            if today.timestamp() > now:  # 23:50 asked at 00:10 means last night
                today -= timedelta(days=1)
            return today.timestamp()
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        pass
    raise CliError(
        f"{option} {text!r} is not a time lockyard understands",
        ExitCode.USAGE,
        f"write it as {TIME_HELP}",
    )


def build_query(
    *,
    agents: list[str] | None = None,
    files: list[str] | None = None,
    kinds: list[str] | None = None,
    namespaces: list[str] | None = None,
    since: str | None = None,
    until: str | None = None,
) -> JournalQuery:
    """The query the options ask for; a usage error (one line, what to write) otherwise."""
    now = time.time()
    try:
        return JournalQuery.of(
            agents=agents or (),
            files=files or (),
            kinds=kinds or (),
            namespaces=namespaces or (),
            since=None if since is None else parse_when(since, "--since", now),
            until=None if until is None else parse_when(until, "--until", now),
        )
    except BadQueryError as error:
        raise CliError(str(error), ExitCode.USAGE, error.hint) from None


def shown(text: str) -> str:
    """`text` safe to print on a terminal: control characters (an escape sequence in a
    hostile file name) and bidirectional overrides are shown as escapes, not obeyed."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def clock(t: float, *, with_date: bool = False) -> str:
    """Local time of `t`: `14:02:11.532`, with the date in front when asked."""
    moment = datetime.fromtimestamp(t)
    text = moment.strftime("%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
    return f"{moment:%Y-%m-%d} {text}" if with_date else text
