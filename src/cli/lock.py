"""`lockyard lock PATH... [-- COMMAND...]`: a person, a script or a CI job takes the agents' locks.

Like flock(1), for the files of a repository and in the agents' own FIFO queues: it waits its
turn (reported on stderr: who holds each file, how many wait before it), holds every lock
while COMMAND runs and exits with COMMAND's status; without a command it holds them until
Ctrl-C. Its holds and waits are on the store like an agent's, so the monitor sees them and may
ask it to give way in a deadlock (it then releases everything and queues again).

However it ends, the locks go: released on exit; a SIGKILLed `lockyard lock` names a dead
process in its lock records (or loses its database session), so the next waiter reclaims
them. COMMAND is sent SIGTERM if `lockyard lock` dies first, so it never runs unlocked.
"""

from __future__ import annotations

import ctypes
import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, Final

import anyio
import typer

from ._errors import CliError, ExitCode, reports_errors
from ._keys import lock_keys
from ._options import LockyardCommand, backend_option, flag, lock_dir_option, namespace_option

if TYPE_CHECKING:
    from ..infra.lockstore import LockMode

LOCK_HELP = (
    "Take the agents' locks on PATHs for a person, a script or a CI job, like flock(1): wait "
    "in the same first-come queues, run COMMAND while holding every lock, release them when it "
    "exits (however it exits) and exit with its status. Without `-- COMMAND`, hold the locks "
    "until Ctrl-C.\n\n"
    "Example: lockyard lock src/db/ -- alembic upgrade head\n\n"
    "A PATH is a file, a directory written with a trailing slash (src/db/: everything under "
    "it, files created later too) or a quoted glob ('src/**/*.py'). While waiting it says on "
    "stderr who holds each path and how many wait before it. The "
    "deadlock monitor (`lockyard monitor`) sees its holds and waits like an agent's; when it "
    "is chosen to break a deadlock it releases its locks and queues again. Exit status: "
    "COMMAND's (128+N when a signal N ended it), 9 when --timeout passed first, 126/127 when "
    "COMMAND cannot be run, 2 for bad arguments, 3 for an unusable lock directory, 7 for an "
    "unusable PostgreSQL backend."
)

CANNOT_RUN: Final = 126
COMMAND_NOT_FOUND: Final = 127
_PR_SET_PDEATHSIG: Final = 1


class LockCommand(LockyardCommand):
    """Splits the arguments at the first `--`: before it the options and paths, after it the
    command, kept whole (click alone would merge both into one list)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            ctx.meta["lockyard.lock.command"] = args[cut + 1 :]
            args = args[:cut]
        return super().parse_args(ctx, args)


def lock_command(
    ctx: typer.Context,
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="PATH... [-- COMMAND [ARG...]]",
            help="Files, directories (src/db/) or globs ('src/**/*.py') to lock (relative to "
            "the working directory), then `--` and the command to run while holding them.",
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            min=0.0,
            help="Give up (exit 9, nothing held) when the locks are not all held after this "
            "long; 0 = only if they are free now. Default: wait as long as it takes.",
            show_default=False,
        ),
    ] = None,
    agent_id: Annotated[
        str | None,
        typer.Option(
            "--agent-id",
            help="Whom the locks belong to, as agents and `lockyard status` see it (default: "
            "lock-USER@HOST-PID).",
            show_default=False,
        ),
    ] = None,
    repo: Annotated[
        Path | None,
        typer.Option(
            "--repo",
            help="The repository (default: the one around the working directory).",
            show_default=False,
        ),
    ] = None,
    lock_dir: Annotated[
        Path | None,
        lock_dir_option(
            "The lock directory the agents lock in (default: $LOCKYARD_LOCK_DIR, else the "
            "per-user runtime directory)."
        ),
    ] = None,
    namespace: Annotated[
        str | None,
        namespace_option("The repository's name for locks, if the agents use one (as `serve`)."),
    ] = None,
    backend: Annotated[str | None, backend_option()] = None,
    shared: Annotated[
        bool,
        flag(
            "--shared",
            help="Hold them shared, beside others who only read them (say, a test run that "
            "needs the files unchanged): nobody can lock them to write meanwhile.",
        ),
    ] = False,
    quiet: Annotated[bool, flag("--quiet", "-q", help="Say nothing on stderr but errors.")] = False,
) -> None:
    command: list[str] | None = ctx.meta.get("lockyard.lock.command")
    mode: LockMode = "shared" if shared else "exclusive"
    code = _lock(
        paths or [], command, timeout, agent_id, repo, lock_dir, namespace, backend, quiet, mode
    )
    raise typer.Exit(code)


@reports_errors
def _lock(
    paths: list[str],
    command: list[str] | None,
    timeout: float | None,
    agent_id: str | None,
    repo: Path | None,
    lock_dir: Path | None,
    namespace: str | None,
    backend: str | None,
    quiet: bool,
    mode: LockMode = "exclusive",
) -> int:
    if not paths:
        raise _usage("name at least one file to lock: lockyard lock PATH... [-- COMMAND]")
    if command is not None and not command:
        raise _usage("nothing after `--`; name the command to run, or leave `--` out to hold "
                     "the locks until Ctrl-C")  # fmt: skip
    if command is not None:
        unrunnable = _unrunnable(command[0])
        if unrunnable is not None:
            print(f"lockyard: error: {unrunnable[0]}; nothing was locked", file=sys.stderr)
            return unrunnable[1]
    from ..infra.lockstore import LockStoreError
    from ..infra.transports.stdio.serve_config import ServeConfigError, open_serve_store

    who = agent_id if agent_id is not None else _default_agent_id()
    checkout = repo if repo is not None else Path.cwd()
    try:
        store = open_serve_store(who, checkout, lock_dir, backend, None, namespace)
    except ServeConfigError as exc:
        code = ExitCode.LOCK_DIR if exc.lock_dir_problem else ExitCode.USAGE
        raise CliError(f"{exc}; {exc.hint}", code) from None
    from .serve import claim_agent_id

    claim = claim_agent_id(store, who)
    try:
        keys = lock_keys(store.canonicalize, paths, "nothing was locked")
        say = _Say(quiet)
        try:
            fences = anyio.run(_hold, store, who, keys, timeout, say, mode)
        except _InterruptedError as stop:
            say("interrupted before every lock was held; nothing is held")
            return 128 + stop.signum
        if fences is None:
            return ExitCode.LOCK_TIMED_OUT
        fenced = ", ".join(k if f is None else f"{k} (#{f})" for k, f in fences.items())
        fenced += " shared" if mode == "shared" else ""
        try:
            if command is None:
                _hold_until_signal(lambda: say(f"holding {fenced} as {who}; Ctrl-C releases them"))
                return 0
            say(f"holding {fenced} as {who}; running {' '.join(command)}")
            return _run(command)
        finally:
            try:
                released = store.cleanup_agent_locks(who)
            except (LockStoreError, OSError) as exc:
                print(f"lockyard lock: could not release the locks: {exc}", file=sys.stderr)
            else:
                say(f"released {', '.join(sorted(released)) or 'nothing (lost meanwhile)'}")
    finally:
        if claim is not None:
            claim.release()
        store.close()


class _InterruptedError(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Say:
    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def __call__(self, text: str) -> None:
        if not self.quiet:
            print(f"lockyard lock: {text}", file=sys.stderr, flush=True)


async def _hold(
    store: Any, who: str, keys: list[str], wait_limit: float | None, say: _Say, mode: LockMode
) -> dict[str, int | None] | None:
    from ..infra.crossproc.sources import victim_notices_for
    from ..infra.tools.hold_all import HoldError, HoldTimedOutError, WaitNote, hold_all
    from ..infra.tools.lock_tools import LockTools
    from ..infra.tools.wait_view import describe_waits

    tools = LockTools(store, who, victim_notices=victim_notices_for(store))

    def on_wait(note: WaitNote) -> None:
        if note.gave_way is not None:
            say(f"gave way to break a deadlock ({note.gave_way}); queueing again")
        say(f"waiting for {describe_waits(note.views)}")

    stopped_by: list[int] = []
    failure: list[CliError] = []
    result: dict[str, int | None] | None = None
    async with anyio.create_task_group() as group:

        async def on_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as got:
                async for signum in got:
                    stopped_by.append(signum)
                    group.cancel_scope.cancel()

        group.start_soon(on_signals)
        await anyio.lowlevel.checkpoint()
        try:
            result = await hold_all(tools, store, keys, wait_limit, on_wait, mode)
        except HoldTimedOutError as exc:
            say(f"timed out after {wait_limit:g} s; still held by others: {', '.join(exc.missing)}")
        except HoldError as exc:
            failure.append(CliError(str(exc), ExitCode.LOCK_DIR))
        group.cancel_scope.cancel()
    if failure:
        raise failure[0]
    if stopped_by:
        raise _InterruptedError(stopped_by[0])
    return result


def _unrunnable(program: str) -> tuple[str, int] | None:
    """Why `program` cannot start, and env(1)'s exit code for it (127 not found, 126 not
    executable), checked before any lock is taken."""
    if "/" in program:
        if not os.path.exists(program):
            return f"{program}: no such file", COMMAND_NOT_FOUND
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            return f"{program}: not an executable file", CANNOT_RUN
    elif shutil.which(program) is None:
        return f"{program}: command not found on PATH", COMMAND_NOT_FOUND
    return None


def _default_agent_id() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"lock-{user}@{socket.gethostname().split('.')[0]}-{os.getpid()}"


_libc_prctl: Any = None


def _die_with_parent(parent: int) -> None:
    """In the child, before exec: SIGTERM when `lockyard lock` dies (even SIGKILLed), since
    its locks go with it. Only a pre-resolved C function is called (the child of a process
    with threads must not take locks)."""
    if _libc_prctl is not None:
        _libc_prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # it died before the line above
        os.kill(os.getpid(), signal.SIGTERM)


def _run(command: list[str]) -> int:
    """Run `command` in the foreground; pass SIGTERM / SIGHUP on (Ctrl-C reaches it from the
    terminal directly); its exit status (128+N for a signal N)."""
    global _libc_prctl
    try:
        _libc_prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        _libc_prctl = None
    parent = os.getpid()
    try:
        child = subprocess.Popen(command, preexec_fn=lambda: _die_with_parent(parent))
    except OSError as exc:
        print(f"lockyard lock: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return CANNOT_RUN if not isinstance(exc, FileNotFoundError) else COMMAND_NOT_FOUND

    def relay(signum: int, frame: FrameType | None) -> None:
        child.send_signal(signum)

    previous = {s: signal.signal(s, relay) for s in (signal.SIGTERM, signal.SIGHUP)}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        status = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - status if status < 0 else status


class _StopSignalError(Exception):
    pass


def _hold_until_signal(announce: Callable[[], None]) -> None:
    """Sleep until SIGINT, SIGTERM or SIGHUP; `announce` runs once they are caught, so a
    Ctrl-C sent the moment the announcement is read still releases the locks."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise _StopSignalError

    wanted = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, stop) for s in wanted}
    try:
        announce()
        while True:
            signal.pause()
    except _StopSignalError:
        pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _usage(message: str) -> CliError:
    return CliError(message, ExitCode.USAGE)


def register(app: typer.Typer) -> None:
    app.command(
        "lock",
        cls=LockCommand,
        help=LOCK_HELP,
        short_help="Hold the agents' locks on paths while a command runs (like flock).",
    )(lock_command)
