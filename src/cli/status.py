"""`lockyard status`: every lock in a lock directory, its holder, its waiters, any deadlock.

Read-only: it reads the lock directory through the store and looks for deadlocks in that one
snapshot exactly as `lockyard monitor --no-resolve` does (the same `CrossProcessMonitor` pass:
repo-qualified nodes for literal keys, agent ages from the lock records, the same victim
policy), so both name the same cycles and victims. It works with no orchestrator running and
changes nothing (a leftover lock is exactly what an operator looks for).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import typer

from ..core.deadlock_info import DeadlockInfo
from ..infra.crossproc.monitor_loop import CrossProcessMonitor
from ..infra.crossproc.notices import VictimNotice
from ..infra.crossproc.sources import monitor_source
from ..infra.crossproc.state import WaitForReader, WaitForSnapshot, node_key
from ..infra.lockstore import LockBackend, LockInfo, StoreSnapshot, WaiterRecord
from ..infra.session.registry import SessionRecord, SessionRegistry
from ._errors import EXIT_CODES_HELP, ExitCode, reports_errors
from ._format import (
    display_key,
    format_duration,
    print_json,
    quiet_library_logs,
    table_console,
)
from ._lockdir import (
    LOCK_DIR_HELP,
    LockDirNotCreatedError,
    location_source,
    open_store,
    store_errors,
)
from ._options import backend_option, flag, lock_dir_option, namespace_option
from .policy import idle_limit_text

if TYPE_CHECKING:  # rich loads in ~0.1 s: only the table output imports it
    from rich.console import Console
    from rich.text import Text

HELP = """Show every lock in the lock directory: holder, process, host, age, whether the
holder is alive, the waiters in arrival order, and any deadlock cycle.

With PATHs, only those files: who holds each and who waits for it, since when, and whether
taking it now would be granted at once (what an agent's lock_status tool says).

Read-only: safe to run at any time, with or without an orchestrator running.
"""

LIVENESS_STYLES = {"alive": "green", "dead": "bold red", "unknown": "yellow"}
NARROW_BELOW = 120
"""Terminals narrower than this get the lock table's narrow layout (pid@host under the agent)."""


def register(app: typer.Typer) -> None:
    app.command("status", help=HELP, epilog=EXIT_CODES_HELP)(status)


@reports_errors
def status(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[PATH]...",
            help="Only these files (relative to the working directory): who holds and who "
            "waits for each, and whether taking it now would be granted.",
            show_default=False,
        ),
    ] = None,
    lock_dir: Annotated[Path | None, lock_dir_option(LOCK_DIR_HELP)] = None,
    json_output: Annotated[
        bool, flag("--json", help="Print one JSON document (see docs/cli.md).")
    ] = False,
    backend: Annotated[str | None, backend_option()] = None,
    repo: Annotated[
        Path | None,
        typer.Option(
            "--repo",
            help="The repository of the PATHs (default: the one around the working directory).",
            show_default=False,
        ),
    ] = None,
    namespace: Annotated[
        str | None,
        namespace_option("The repository's name for locks, if the agents use one (as `serve`)."),
    ] = None,
) -> None:
    quiet_library_logs()  # the private monitor would log each cycle it finds; we print them
    source = location_source(lock_dir, backend)
    if paths:
        from .status_paths import show_paths

        show_paths(
            paths,
            lock_dir=lock_dir,
            backend=backend,
            repo=repo,
            namespace=namespace,
            source=source,
            json_output=json_output,
        )
        return
    try:
        store = open_store(lock_dir, backend, read_only=True)  # inspecting changes nothing
    except LockDirNotCreatedError as missing:  # nothing locked yet: empty, not an error
        _show_not_created(missing.path, missing.why, source, json_output)
        return
    with store_errors():
        snapshot = store.snapshot()
        deadlocks = find_deadlocks(store, snapshot)
        notices = monitor_source(store).board.notices()
        active = last_activity(store, snapshot)
        idle_limit = store.idle_limit()
    # Agent CLI sessions are registered in a lock directory (none with PostgreSQL).
    session_dir = getattr(store, "lock_dir", None)
    sessions = SessionRegistry(session_dir).sessions() if session_dir is not None else []
    if json_output:
        payload = status_payload(store.location, snapshot, deadlocks, notices, active)
        payload["sessions"] = sessions_payload(sessions, snapshot)
        payload["idle_limit_seconds"] = idle_limit
        print_json(payload | {"lock_dir_source": source, "lock_dir_exists": True})
    else:
        where = f"{store.location} ({source})"
        render_sessions(table_console(), sessions, snapshot)
        render_status(table_console(), where, snapshot, deadlocks, notices, active)
        if idle_limit is not None:  # off is the default: said by `lockyard policy`
            table_console().print(f"Idle limit {idle_limit_text(idle_limit)}.")
    if any(info.problem for info in snapshot.locks):
        raise typer.Exit(int(ExitCode.UNREADABLE_ENTRIES))


def _show_not_created(path: Path | str, why: str, source: str, json_output: bool) -> None:
    if json_output:
        empty = StoreSnapshot(holds={}, waits=(), locks=())
        payload = status_payload(path, empty, [], [], {})
        payload["idle_limit_seconds"] = None
        print_json(payload | {"lock_dir_source": source, "lock_dir_exists": False})
        return
    table_console().print(
        f"No locks in {path} ({source}): {why}, so no agent has locked anything there."
    )


def last_activity(store: LockBackend, snapshot: StoreSnapshot) -> dict[str, float]:
    """Each holder's last heartbeat (any tool call or hook event), where the store keeps them."""
    agents = {info.holder.agent_id for info in snapshot.locks if info.holder is not None}
    return {agent: stamp for agent in agents if (stamp := store.last_active(agent)) is not None}


def find_deadlocks(store: LockBackend, snapshot: StoreSnapshot) -> list[DeadlockInfo]:
    """The cycles in `snapshot`, with the victims `lockyard monitor` would pick.

    One pass of the cross-process monitor with resolving off (it posts and prunes no
    notices), reading this very snapshot: the deadlocks shown match the table shown.
    """
    monitor = CrossProcessMonitor(source=monitor_source(store), resolve=False)
    monitor.state = _SnapshotState(store, WaitForSnapshot.from_store_snapshot(snapshot))
    report = anyio.run(monitor.check_once)
    return [resolution.deadlock for resolution in report.resolutions]


class _SnapshotState(WaitForReader):
    """A lock directory state frozen at one snapshot (detection and re-check both read it)."""

    def __init__(self, store: LockBackend, snapshot: WaitForSnapshot) -> None:
        super().__init__(store)
        self._snapshot = snapshot

    def read(self) -> WaitForSnapshot:
        return self._snapshot


def graph_node(info: LockInfo) -> str:
    """The lock's node in the wait-for graph, as deadlocks name it: `namespace::key` (a lock
    is the pair: two repositories' `src/app.py` are two locks)."""
    if info.namespace is None:
        return info.lock_path
    return node_key(info.namespace, info.lock_path)


def lock_payload(info: LockInfo, active: Mapping[str, float]) -> dict[str, Any]:
    holder = info.holder
    last = None if holder is None else active.get(holder.agent_id)
    return {
        "lock_path": info.lock_path,
        "namespace": info.namespace,
        "node": graph_node(info),
        "holder": None
        if holder is None
        else {
            "agent_id": holder.agent_id,
            "checkout": holder.checkout,
            "pid": holder.pid,
            "host": holder.host,
            "boot_id": holder.boot_id,
            "process_start_time": holder.start_time,
            "acquired_at": holder.acquired_at,
            "token": holder.token,
            "fence": holder.fence,
            "last_active": last,
        },
        "age_seconds": info.age_seconds,
        "liveness": info.liveness,
        "liveness_reason": info.liveness_reason,
        "waiters": [
            {
                "agent_id": waiter.agent_id,
                "pid": waiter.pid,
                "host": waiter.host,
                "ticket": waiter.ticket,
                "since": waiter.since,
                "liveness": waiter.liveness()[0].value,
            }
            for waiter in info.waiters
        ],
        # Readers (mode "shared"); a holder beside them waits, with the lock, for them to leave.
        "shared_holders": [
            {
                "agent_id": member.agent_id,
                "pid": member.pid,
                "host": member.host,
                "acquired_at": member.acquired_at,
                "liveness": member.liveness()[0].value,
            }
            for member in info.shared_holders
        ],
        "problem": info.problem,
    }


def status_payload(
    lock_dir: str | Path,
    snapshot: StoreSnapshot,
    deadlocks: list[DeadlockInfo],
    notices: list[VictimNotice],
    active: Mapping[str, float],
) -> dict[str, Any]:
    locks = [lock_payload(info, active) for info in snapshot.locks]
    return {
        "lock_dir": str(lock_dir),
        "namespaces": sorted({info.namespace for info in snapshot.locks if info.namespace}),
        "taken_at": snapshot.taken_at,
        "locks": locks,
        "deadlocks": [info.to_dict() | {"summary": info.describe()} for info in deadlocks],
        "victim_notices": [
            {
                "agent_id": notice.agent_id,
                "waits_on": notice.waits_on,
                "posted_at": notice.posted_at,
                "summary": notice.deadlock.describe(),
            }
            for notice in notices
        ],
        "counts": {
            "locks": len(locks),
            "dead_holders": sum(1 for info in snapshot.locks if info.liveness == "dead"),
            "waiters": sum(len(info.waiters) for info in snapshot.locks),
            "unreadable": sum(1 for info in snapshot.locks if info.problem),
            "deadlocks": len(deadlocks),
        },
    }


def _held_by(agent_id: str, snapshot: StoreSnapshot) -> list[str]:
    return sorted(
        info.lock_path
        for info in snapshot.locks
        if info.holder is not None and info.holder.agent_id == agent_id
    )


def sessions_payload(
    sessions: list[tuple[SessionRecord, bool]], snapshot: StoreSnapshot
) -> list[dict[str, Any]]:
    """Each agent CLI session (`lockyard serve` without --agent-id) and the locks it holds."""
    return [
        {
            "agent_id": record.agent_id,
            "cli": record.cli,
            "cli_pid": record.anchor_pid,
            "alive": alive,
            "server_pid": record.server_pid,
            "repo": record.repo,
            "started_at": record.started_at,
            "locks": _held_by(record.agent_id, snapshot),
        }
        for record, alive in sessions
    ]


def render_sessions(
    console: Console, sessions: list[tuple[SessionRecord, bool]], snapshot: StoreSnapshot
) -> None:
    """The agent CLI sessions: which CLI process is which agent, and what it holds."""
    from rich.table import Table
    from rich.text import Text

    if not sessions:
        return
    table = Table(title="Agent CLI sessions", title_justify="left")
    for column in ("agent", "CLI", "CLI pid", "alive?", "holds", "repo"):
        table.add_column(column, overflow="fold")
    now = time.time()
    for record, alive in sessions:
        held = _held_by(record.agent_id, snapshot)
        state = (
            Text(f"yes ({format_duration(now - record.started_at)})", style="green")
            if alive
            else Text("closed", style="red")
        )
        holds = ", ".join(display_key(key, Path(record.repo)) for key in held) or "-"
        table.add_row(
            record.agent_id, record.cli, str(record.anchor_pid), state, holds, record.repo
        )
    console.print(table)


def render_status(
    console: Console,
    lock_dir: str | Path,
    snapshot: StoreSnapshot,
    deadlocks: list[DeadlockInfo],
    notices: list[VictimNotice],
    active: Mapping[str, float],
) -> None:
    from rich.table import Table
    from rich.text import Text

    for notice in notices:  # posted by `lockyard monitor`, not yet taken by the victim
        console.print(
            f"victim notice: {notice.agent_id} is asked to give way "
            f"({format_duration(time.time() - notice.posted_at)} ago): "
            f"{notice.deadlock.describe()}",
            style="magenta",
        )
    if not snapshot.locks:
        console.print(f"No locks in {lock_dir}: nothing is held or awaited.")
        return
    # Bare keys when every lock belongs to one namespace, else `namespace::key`.
    namespaces = {info.namespace for info in snapshot.locks if info.namespace}
    single = namespaces.pop() if len(namespaces) == 1 else None
    # Where the holders' checkouts are: in the title when all share one, else per lock.
    checkouts = {_checkout(info) for info in snapshot.locks if info.holder is not None}
    one_checkout = checkouts.pop() if len(checkouts) == 1 else None
    title = f"Locks in {lock_dir}" + (f", namespace {single}" if single else "")
    if one_checkout is not None:
        title += f"\nheld from the checkout {one_checkout}"
    table = Table(title=title, title_justify="left")
    names = [_name(info, single) for info in snapshot.locks]
    # A narrow terminal (80 columns) gets the process under the agent and narrower minimums,
    # so that the waiters keep a column of their own (folded, never cut off the edge).
    narrow = console.width < NARROW_BELOW
    table.add_column(
        "lock", overflow="fold", min_width=min(16 if narrow else 32, max(map(len, names)))
    )
    table.add_column("agent, pid@host" if narrow else "agent", overflow="fold")
    if not narrow:
        table.add_column("pid@host", overflow="fold")
    if one_checkout is None:
        table.add_column("checkout", overflow="fold")
    table.add_column("age", justify="right", no_wrap=True)
    table.add_column("alive?", no_wrap=True)
    table.add_column("waiters (in order)", overflow="fold", min_width=16 if narrow else None)
    now = time.time()
    for info in snapshot.locks:
        row = list(_row(info, single, now, active))
        if one_checkout is not None:
            del row[3]
        if narrow:
            agent, process = row[1], row.pop(2)
            row[1] = agent if process == "-" else Text.assemble(agent, "\n", process)
        table.add_row(*row)
    console.print(table)
    dead = sum(1 for info in snapshot.locks if info.liveness == "dead")
    if dead:
        console.print(
            f"{dead} lock(s) held by dead processes: `lockyard clean` releases them.",
            style="red",
        )
    for info in snapshot.locks:
        if info.problem:
            console.print(f"unreadable: {info.lock_path}: {info.problem}", style="yellow")
        elif info.holder is None and not info.shared_holders:  # why a free lock is not free
            console.print(f"{_name(info, single)}: {info.liveness_reason}", style="cyan")
    for deadlock in deadlocks:
        shown = deadlock.within(single) if single is not None else deadlock
        console.print(Text("deadlock: ", style="bold red") + Text(shown.describe()))
        console.print(f"  the monitor's policy would ask {deadlock.victim} to give way")


def _row(
    info: LockInfo, namespace: str | None, now: float, active: Mapping[str, float]
) -> tuple[str | Text, ...]:
    from rich.text import Text

    name = _name(info, namespace)
    holder = info.holder
    waiters = ", ".join(_waiter(waiter, now) for waiter in info.waiters)
    readers = ", ".join(  # an upgrading reader holds the lock: it waits for the others
        member.agent_id
        for member in info.shared_holders
        if holder is None or member.agent_id != holder.agent_id
    )
    if holder is None and readers:  # held by readers only
        held_for = "-" if info.age_seconds is None else format_duration(info.age_seconds)
        shown = Text(info.liveness, style=LIVENESS_STYLES.get(info.liveness, ""))
        return (name, f"shared by {readers}", "-", "-", held_for, shown, waiters or "-")
    if holder is None and info.problem is None:  # free, but a live waiter has the next turn
        live = [w.agent_id for w in info.waiters if w.liveness()[0].value != "dead"]
        agent = Text(f"free, reserved for {live[0] if live else 'its first waiter'}", style="cyan")
        turn = "-" if info.age_seconds is None else format_duration(info.age_seconds)
        return (name, agent, "-", "-", turn, "-", waiters or "-")
    if holder is None:  # an unreadable record: its problem is printed below the table
        return (name, "-", "-", "-", "-", Text("unreadable", style="yellow"), waiters or "-")
    age = info.age_seconds if info.age_seconds is not None else now - holder.acquired_at
    liveness = Text(info.liveness, style=LIVENESS_STYLES.get(info.liveness, ""))
    process = f"{holder.pid}@{holder.host}"
    who = holder.agent_id if holder.fence is None else f"{holder.agent_id} (fence {holder.fence})"
    last = active.get(holder.agent_id)
    if last is not None:  # how long since the holder last did anything
        who += f", idle {format_duration(now - last)}"
    if readers:  # granted, it waits for the readers to leave before it may write
        who += f", waits for readers {readers}"
    return (name, who, process, _checkout(info), format_duration(age), liveness, waiters or "-")


def _checkout(info: LockInfo) -> str:
    """The holder's checkout root, or what to know when its record does not say."""
    if info.holder is None or info.holder.checkout is None:
        return "not recorded"
    return info.holder.checkout


def _name(info: LockInfo, namespace: str | None) -> str:
    """The bare key when every lock is of one namespace; else qualified with its own."""
    if namespace is not None and info.namespace == namespace:
        return info.lock_path
    return graph_node(info)


def _waiter(waiter: WaiterRecord, now: float) -> str:
    dead = waiter.liveness()[0].value == "dead"
    waited = format_duration(now - waiter.since)
    return f"{waiter.agent_id} ({'dead, ' if dead else ''}waiting {waited})"
