"""`lockyard monitor`: find and softly resolve deadlocks across processes."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import anyio
import typer

from ..infra.crossproc.deadlock_text import readable
from ..infra.crossproc.monitor_loop import CrossProcessMonitor, PassReport
from ..infra.crossproc.sources import monitor_source
from ..infra.crossproc.state import LockDirUnreadableError, resolve_lock_dir
from ..infra.lockstore import (
    BackendError,
    LockStore,
    LockStoreError,
    chosen_spec,
    is_postgres_spec,
)
from ._detached_output import DetachedOutput
from ._errors import CliError, ExitCode, reports_errors
from ._format import quiet_library_logs
from ._lockdir import open_store
from ._lockdir import resolve_lock_dir as chosen_lock_dir
from ._options import backend_option, flag, lock_dir_option

DEADLOCK_FOUND = ExitCode.DEADLOCK_FOUND

MONITOR_HELP = (
    "Find deadlocks among all agents of a lock directory, whatever process serves them, and "
    "resolve them softly.\n\n"
    "Rebuilds the wait-for graph from the lock directory (lock records are holds, queue entries "
    "are waits), follows changes by inotify (polling where unavailable), re-checks every cycle "
    "against the directory, and posts a victim notice (`victims/<agent>.json`) that makes the "
    "victim's pending lock_acquire return a `deadlock` result. Nothing is killed and no lock "
    "is removed by the monitor.\n\n"
    "A lock directory that does not exist yet is created (--once: reported as empty), so the "
    "monitor can start before the agents.\n\n"
    "Runs until interrupted. --once does one pass. --json prints one JSON object per pass that "
    "found something (with --once: exactly one object).\n\n"
    "With --backend postgresql://... the graph is rebuilt from the database instead, from "
    "every host's agents; of several monitors running at once only one (the leader, by an "
    "advisory lock) posts notices, the others take over when it stops.\n\n"
    f"Exit codes: 0 ok (--once: no deadlock); 2 usage; 3 lock directory unusable; "
    f"{DEADLOCK_FOUND.value} (--once) a deadlock was found; {ExitCode.BACKEND.value} the "
    "PostgreSQL backend is unavailable."
)


def monitor_command(
    lock_dir: Annotated[
        Path | None,
        lock_dir_option(
            "The lock directory to watch (default: $LOCKYARD_LOCK_DIR, else the per-user "
            "runtime directory)."
        ),
    ] = None,
    once: Annotated[
        bool, flag("--once", help="One pass, then exit (6 if a deadlock was found).")
    ] = False,
    as_json: Annotated[bool, flag("--json", help="Machine-readable output.")] = False,
    no_resolve: Annotated[
        bool, flag("--no-resolve", help="Only report deadlocks; post no victim notices.")
    ] = False,
    poll_interval: Annotated[
        float,
        typer.Option(
            "--poll-interval",
            help="Seconds between rescans where inotify is unavailable.",
            min=0.01,
            max=60.0,
        ),
    ] = 0.5,
    verbose: Annotated[bool, flag("--verbose", "-v", help="Log to stderr.")] = False,
    backend: Annotated[str | None, backend_option()] = None,
) -> None:
    _monitor(lock_dir, backend, once=once, as_json=as_json, resolve=not no_resolve,
             poll_interval=poll_interval, verbose=verbose)  # fmt: skip


@reports_errors
def _monitor(
    lock_dir: Path | None,
    backend: str | None,
    *,
    once: bool,
    as_json: bool,
    resolve: bool,
    poll_interval: float,
    verbose: bool,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        stream=sys.stderr,
        format="lockyard monitor: %(levelname)s %(message)s",
    )
    if not verbose:  # each deadlock is printed below; the library's own report would repeat it
        quiet_library_logs()
    try:
        spec = chosen_spec(backend)
        if spec is not None and is_postgres_spec(spec):
            store = open_store(lock_dir, spec)
            directory = store.location
            monitor = CrossProcessMonitor(source=monitor_source(store), resolve=resolve)
        else:
            if spec is not None and spec.strip() != "file" and lock_dir is None:
                lock_dir = Path(spec)
            chosen = lock_dir if lock_dir is not None else chosen_lock_dir(None)
            if not os.path.lexists(chosen):
                # Nothing locked yet, a normal state: one pass finds nothing; a watching
                # monitor creates the directory (as the first agent would) and waits.
                if once:
                    _print(PassReport(), str(chosen), as_json=as_json, once=True)
                    return
                LockStore(lock_dir=chosen).close()
            directory = str(resolve_lock_dir(lock_dir))
            monitor = CrossProcessMonitor(Path(directory), resolve=resolve)
    except LockDirUnreadableError as exc:
        raise CliError(str(exc), ExitCode.LOCK_DIR, exc.hint) from None
    except LockStoreError as exc:
        raise CliError(str(exc), ExitCode.LOCK_DIR, _LOCK_DIR_HINT) from None
    if once:
        try:
            report = anyio.run(monitor.check_once)
        except (LockStoreError, OSError) as exc:
            raise CliError(f"cannot read {directory}: {exc}", _exit_code(exc),
                           _hint(exc)) from None  # fmt: skip
        _print(report, directory, as_json=as_json, once=True)
        if report.resolutions:
            raise typer.Exit(DEADLOCK_FOUND)
        return
    failure: list[Exception] = []
    # Resolution must not wait for whoever reads stdout: a reader that stops reading would
    # block the loop at the first full pipe. Lines go out from a thread, or are counted.
    output = DetachedOutput(lambda count: _dropped_line(count, directory, as_json=as_json))

    async def watch() -> None:
        from ..infra.signals import cancel_on_signals

        async with anyio.create_task_group() as group:
            await group.start(cancel_on_signals, group.cancel_scope)
            if not as_json:
                output.line(f"watching {directory} for deadlocks (Ctrl-C to stop)")
            try:
                await monitor.run(
                    lambda report: _print(report, directory, as_json=as_json, once=False,
                                          write=output.line),
                    poll_interval=poll_interval,
                )  # fmt: skip
            except (LockStoreError, OSError) as exc:  # e.g. the lock directory was removed
                failure.append(exc)
                group.cancel_scope.cancel()

    anyio.run(watch)
    output.drain(_DRAIN_SECONDS)  # a reader that is still reading gets the last lines
    if failure:
        raise CliError(f"stopped watching {directory}: {failure[0]}", _exit_code(failure[0]),
                       _hint(failure[0]))  # fmt: skip


def _exit_code(error: Exception) -> ExitCode:
    """A lost PostgreSQL server is the backend's exit code; anything else the lock dir's."""
    return ExitCode.BACKEND if isinstance(error, BackendError) else ExitCode.LOCK_DIR


def _hint(error: Exception) -> str:
    """What to check: the PostgreSQL server for a backend error, else the lock directory."""
    return _SERVER_HINT if isinstance(error, BackendError) else _LOCK_DIR_HINT


_LOCK_DIR_HINT = "check that the lock directory exists and is yours, then start the monitor again"
_SERVER_HINT = "check that the PostgreSQL server is up and reachable, then start the monitor again"


_DRAIN_SECONDS = 2.0


def _dropped_line(count: int, lock_dir: str, *, as_json: bool) -> str:
    if as_json:
        return json.dumps({"lock_dir": str(lock_dir), "dropped_reports": count})
    return f"({count} report(s) not printed: stdout was not being read)"


def _print_line(text: str) -> None:
    print(text, flush=True)


def _print(
    report: PassReport,
    lock_dir: str,
    *,
    as_json: bool,
    once: bool,
    write: Callable[[str], None] = _print_line,
) -> None:
    if as_json:
        write(json.dumps({"lock_dir": str(lock_dir), **report.to_dict()}))
        return
    for resolution in report.resolutions:
        info = resolution.deadlock
        action = (
            "notice posted"
            if resolution.notice is not None
            else "already noticed"
            if report.leader
            else "not resolved: --no-resolve"
            if not report.resolving
            else f"resolved by {report.resolved_by or 'the process that leads'}"
        )
        write(f"deadlock: {readable(info)}")
        write(f"  victim: {info.victim} ({action})")
        if info.victim_reason:
            write(f"  why: {info.victim_reason}")
    for agent in report.stale_notices_removed:
        write(f"removed a stale victim notice for {agent}")
    for revocation in report.revocations:
        released = ", ".join(revocation.released)
        write(f"revoked {revocation.stall.agent_id}'s locks ({released}): {revocation.reason}")
    if once and not report.resolutions:
        write(f"no deadlock in {lock_dir} ({report.holds} locks held, {report.waits} waits)")


def register(app: typer.Typer) -> None:
    app.command(
        "monitor",
        help=MONITOR_HELP,
        short_help="Find and softly resolve deadlocks across processes.",
    )(monitor_command)
