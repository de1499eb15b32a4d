"""`lockyard clean`: release stale locks (the default), one agent's locks, or all of them.

Every removal goes through the lock store's API (removal by grant token), so a lock that
changed hands meanwhile is never touched, and waiters are woken by the store's push
notifications. A lock whose record cannot be read is reported and left alone.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..infra.lockstore import LockBackend, WaiterRecord, operator_release
from ._errors import EXIT_CODES_HELP, CliError, ExitCode, reports_errors
from ._format import (
    display_key,
    line_console,
    print_json,
    quiet_library_logs,
)
from ._lockdir import (
    LOCK_DIR_HELP,
    LockDirNotCreatedError,
    location_source,
    open_store,
    store_errors,
)
from ._options import backend_option, flag, lock_dir_option

if TYPE_CHECKING:
    from rich.console import Console

HELP = """Release locks that are left behind.

By default only stale locks: those whose holder is provably dead (same host and boot, and
its process is gone or its pid now belongs to another process), and stuck waits: a first
waiter that left a free lock untaken past its turn (a stopped or hung process). --agent ID
releases that agent's locks and ends its waits (for an agent that is gone, or one that
stalled while others wait): the journal names this command, and the agent, if it still
runs, is told on its next lock call, with --reason's text; --all releases every lock and
ends every wait, and asks for confirmation first (or --yes). Waiting agents are woken as the
locks go; a waiter whose wait was ended queues again at the back if its process still runs.
"""


def register(app: typer.Typer) -> None:
    app.command("clean", help=HELP, epilog=EXIT_CODES_HELP)(clean)


@reports_errors
def clean(
    lock_dir: Annotated[Path | None, lock_dir_option(LOCK_DIR_HELP)] = None,
    backend: Annotated[str | None, backend_option()] = None,
    agent: Annotated[
        str | None,
        typer.Option("--agent", metavar="ID", help="Release the locks held by this agent."),
    ] = None,
    release_all: Annotated[
        bool, flag("--all", help="Release every lock, alive holders' too.")
    ] = False,
    reason: Annotated[
        str | None,
        typer.Option(
            "--reason",
            metavar="TEXT",
            help="With --agent: why, as the agent is told on its next lock call.",
            show_default=False,
        ),
    ] = None,
    yes: Annotated[
        bool, flag("--yes", "-y", help="Do not ask for confirmation (for --all).")
    ] = False,
    json_output: Annotated[
        bool, flag("--json", help="Print one JSON document (see docs/cli.md).")
    ] = False,
) -> None:
    if agent is not None and release_all:
        raise CliError("--agent and --all cannot be combined", ExitCode.USAGE, "pick one")
    if reason is not None and agent is None:
        raise CliError("--reason goes with --agent ID", ExitCode.USAGE, "name the agent told")
    if reason is not None and not reason.strip():
        raise CliError("--reason is blank", ExitCode.USAGE, "say why, or leave it out")
    quiet_library_logs()
    try:
        store = open_store(lock_dir, backend)
    except LockDirNotCreatedError as missing:  # nothing locked yet: nothing to clean
        mode = "all" if release_all else "agent" if agent is not None else "stale"
        source = location_source(lock_dir, backend)
        _report_not_created(missing.path, source, mode, json_output)
        return
    alive: str | None = None
    with store_errors():
        unreadable = [
            {"lock_path": info.lock_path, "problem": info.problem}
            for info in store.list_locks()
            if info.problem
        ]
        if release_all:
            _confirm_all(store, yes)
            with operator_release("lockyard clean --all"):
                mode, released = "all", release_every_lock(store)
            released += [
                {"lock_path": entry, "agent_id": "?", "reason": "clean --all: unreadable record"}
                for entry in getattr(store, "remove_unreadable", list)()
            ]
            unreadable = [entry for entry in unreadable if not _gone(store, entry)]
            ended = ended_waits(store.end_waits(None), "clean --all")
        elif agent is not None:
            alive = live_holder(store, agent)
            with operator_release(f"lockyard clean --agent {agent}"):
                mode, released = "agent", release_agent(store, agent, reason)
            ended = ended_waits(store.end_waits(agent), f"clean --agent {agent}")
        else:
            mode, released = "stale", release_stale(store)
            ended = ended_waits(store.end_stalled_waits(), "its turn at the free lock expired")
    if json_output:
        print_json(
            {
                "lock_dir": str(store.location),
                "mode": mode,
                "released": released,
                "count": len(released),
                "ended_waits": ended,
                "skipped_unreadable": unreadable,
            }
            | ({} if mode != "agent" else {"agent_alive": alive, "told": bool(released)})
        )
    else:
        _render(line_console(), store, mode, released, ended, unreadable)
        if mode == "agent" and alive is not None and released:
            line_console().print(
                f"{agent} is still running ({alive}): it is not interrupted; its next edit or "
                "commit of these files is refused until it locks them again, and its next lock "
                "call tells it" + ("." if reason is None else f": {reason}"),
                style="yellow",
            )
    if unreadable:
        raise typer.Exit(int(ExitCode.UNREADABLE_ENTRIES))


def _report_not_created(path: Path | str, source: str, mode: str, json_output: bool) -> None:
    if json_output:
        print_json(
            {
                "lock_dir": str(path),
                "mode": mode,
                "released": [],
                "count": 0,
                "ended_waits": [],
                "skipped_unreadable": [],
            }
        )
        return
    line_console().print(
        f"Nothing to release: {path} ({source}) does not exist yet "
        "(no agent has locked anything there)."
    )


def release_stale(store: LockBackend) -> list[dict[str, Any]]:
    return [
        {
            "lock_path": reclaimed.lock_path,
            "agent_id": reclaimed.holder.agent_id,
            "pid": reclaimed.holder.pid,
            "host": reclaimed.holder.host,
            "reason": reclaimed.reason,
        }
        for reclaimed in store.reclaim_stale()
    ]


def live_holder(store: LockBackend, agent_id: str) -> str | None:
    """`pid P on HOST` when a lock of `agent_id` is held by a process that is alive, else None."""
    for info in store.list_locks():
        holder = info.holder
        if holder is not None and holder.agent_id == agent_id and info.liveness == "alive":
            return f"pid {holder.pid} on {holder.host}"
    return None


def release_agent(store: LockBackend, agent_id: str, reason: str | None) -> list[dict[str, Any]]:
    """Revoke `agent_id`'s locks; it is told `reason` on its next lock call."""
    told = f"an operator released it (lockyard clean --agent {agent_id})"
    told += ": no reason given" if reason is None else f": {reason}"
    return [
        {"lock_path": key, "agent_id": agent_id, "reason": f"clean --agent {agent_id}"}
        for key in store.revoke(agent_id, told)
    ]


def release_every_lock(store: LockBackend) -> list[dict[str, Any]]:
    holders = sorted({info.holder.agent_id for info in store.list_locks() if info.holder})
    released: list[dict[str, Any]] = []
    for agent_id in holders:
        released += [
            {"lock_path": key, "agent_id": agent_id, "reason": "clean --all"}
            for key in store.cleanup_agent_locks(agent_id, all_namespaces=True)
        ]
    return released


def _gone(store: LockBackend, entry: dict[str, Any]) -> bool:
    return not any(info.lock_path == entry["lock_path"] for info in store.list_locks())


def ended_waits(records: list[WaiterRecord], reason: str) -> list[dict[str, Any]]:
    return [
        {
            "lock_path": record.lock_path,
            "agent_id": record.agent_id,
            "pid": record.pid,
            "host": record.host,
            "reason": reason,
        }
        for record in records
    ]


def _confirm_all(store: LockBackend, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise CliError(
            "clean --all releases every lock, live holders' included, and needs confirmation",
            ExitCode.REFUSED,
            "add --yes to confirm without a terminal; nothing was released",
        )
    count = sum(1 for info in store.list_locks() if info.holder)
    if not typer.confirm(f"Release all {count} lock(s) in {store.location}?", default=False):
        raise CliError("not confirmed; nothing was released", ExitCode.REFUSED)


def _render(
    console: Console,
    store: LockBackend,
    mode: str,
    released: list[dict[str, Any]],
    ended: list[dict[str, Any]],
    unreadable: list[dict[str, Any]],
) -> None:
    what = {"stale": "stale lock", "agent": "lock", "all": "lock"}[mode]
    if not released and not ended:
        console.print(f"Nothing to release: no {what} or stuck wait matched in {store.location}.")
    for entry in released:
        name = display_key(entry["lock_path"], None)
        console.print(f"released {name} (held by {entry['agent_id']}): {entry['reason']}")
    if released:
        console.print(f"{len(released)} {what}(s) released.")
    for entry in ended:
        name = display_key(entry["lock_path"], None)
        console.print(
            f"ended the wait of {entry['agent_id']} (pid {entry['pid']}) for {name}: "
            f"{entry['reason']}"
        )
    for entry in unreadable:
        console.print(
            f"left alone (unreadable): {entry['lock_path']}: {entry['problem']}", style="yellow"
        )
