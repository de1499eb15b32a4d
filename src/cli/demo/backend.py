"""Where the demo's locks live: its own lock directory, or PostgreSQL.

`--backend postgres` starts a throwaway PostgreSQL server from this machine's server
binaries (as the test suite does) and removes it afterwards; `--backend postgresql://...`
uses that server, in a schema of the demo's own that is dropped at the end.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from ...infra.lockstore.postgres import BARE_WORDS, is_postgres_spec, parse_spec
from .._errors import CliError, ExitCode

FILE_CHOICES = ("file", "lockdir")


@contextmanager
def demo_backend(choice: str | None) -> Iterator[str | None]:
    """A backend spec for the demo (None: its lock directory), cleaned up afterwards."""
    if choice is None or choice.strip().lower() in FILE_CHOICES:
        yield None
        return
    text = choice.strip()
    if not is_postgres_spec(text):
        raise CliError(
            f"the demo cannot run on {choice!r}",
            ExitCode.USAGE,
            "pass --backend file, postgres (a throwaway local server) or postgresql://...",
        )
    # Here, not above: the demo on its lock directory runs without the postgres extra.
    from ...infra.lockstore.postgres import ClusterError, ThrowawayCluster, close_listeners

    if text.lower() in BARE_WORDS:
        try:
            cluster = ThrowawayCluster(max_connections=60).start()
        except ClusterError as error:
            raise CliError(str(error), ExitCode.BACKEND) from None
        try:
            yield cluster.dsn
        finally:
            close_listeners()
            cluster.destroy()
        return
    schema = f"lockyard_demo_{secrets.token_hex(4)}"
    separator = "&" if "?" in text else "?"
    try:
        yield f"{text}{separator}lockyard_schema={schema}"
    finally:
        close_listeners()
        _drop(text, schema)


NOTIFY_FLOOR: Final = "a raw NOTIFY from one session to another on this server"


def measure_notify(spec: str, rounds: int) -> list[float]:
    """The floor of a hand-off on PostgreSQL, measured beside the run: one session sends a
    NOTIFY and another, LISTENing, receives it. A hand-off is at least that (the release is
    a statement that notifies the waiter), plus lockyard's own work at both ends."""
    import psycopg  # only here: the demo on its lock directory runs without the extra

    conninfo = parse_spec(spec).conninfo
    channel = f"lockyard_floor_{secrets.token_hex(4)}"
    cycles = []
    with (
        psycopg.connect(conninfo, autocommit=True) as sender,
        psycopg.connect(conninfo, autocommit=True) as listener,
    ):
        listener.execute(f"LISTEN {channel}")
        for _ in range(rounds):
            started = time.perf_counter()
            sender.execute(f"NOTIFY {channel}")
            for _note in listener.notifies(timeout=10, stop_after=1):
                cycles.append(time.perf_counter() - started)
    return cycles


def _drop(spec: str, schema: str) -> None:
    import psycopg

    try:
        with psycopg.connect(parse_spec(spec).conninfo, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    except psycopg.Error:  # the run's own error, if any, is the one to report
        pass
