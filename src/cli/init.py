"""`lockyard init` and `lockyard uninstall`: set a repository up for agent CLI sessions.

Never asks a question: everything comes from the arguments and the repository's files, so it
runs the same from a terminal, a script or an agent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from ..infra.agentcli.config_files import OUTSIDE_FLAG, ConfigFileError, FileChange, Plan, apply
from ..infra.agentcli.guard_address import parse_port
from ..infra.agentcli.setups import SETUPS, CliSetup, Invocation
from ..infra.clone_state import checkout_root
from ..infra.lockstore import default_lock_dir_path
from ._errors import CliError, ExitCode, reports_errors
from ._options import flag, lock_dir_option

INIT_HELP = """Set this repository up for agent CLI sessions side by side: each session gets
the lock tools (an MCP server, `lockyard serve`, with an agent id of its own) and a hook that
refuses its edits and commits of files it has not locked (crush: the lock tools only, no
hook).

CLIs: claude-code, codex, opencode, gemini, copilot, qwen, pi, kilo, droid, auggie, crush. None
named: the ones installed on this machine (their command on PATH) and the ones this repository
already has configuration for, else claude-code; it says which it found and where. Existing
files are merged into: every byte outside lockyard's own entries stays as it was; running it
again changes nothing; `lockyard uninstall` takes back exactly what it added. An existing file
that is not valid JSON/TOML, an entry named `lockyard` that lockyard did not write, or a name
that leads outside the repository (a symlinked .claude/) stops it before anything is written.
"""

UNINSTALL_HELP = """Remove what `lockyard init` added for the named CLIs (none named: every CLI
it finds set up). Other entries in the same files are kept; files lockyard created and that
hold nothing else are deleted."""

CliNames = Annotated[
    list[str] | None,
    typer.Argument(
        help="claude-code, codex, opencode, gemini, copilot, qwen, pi, kilo, droid, auggie, crush",
        show_default=False,
    ),
]
RepoOption = Annotated[
    Path | None,
    typer.Option("--repo", help="The repository (default: the one around the working directory).",
                 show_default=False),
]  # fmt: skip
DryRun = Annotated[bool, flag("--dry-run", help="Show the changes as a diff; write nothing.")]
OutsideOk = Annotated[
    bool,
    flag(
        OUTSIDE_FLAG,
        help="Also write files whose names lead outside the repository (a symlinked .claude/ "
        "or .codex/, a file with other hard links): lockyard refuses them otherwise, since "
        "every project that shares them would change.",
    ),
]


def register(app: typer.Typer) -> None:
    app.command("init", help=INIT_HELP)(init)
    app.command("uninstall", help=UNINSTALL_HELP)(uninstall)


@reports_errors
def init(
    clis: CliNames = None,
    repo: RepoOption = None,
    dry_run: DryRun = False,
    write_outside_repo: OutsideOk = False,
    lock_dir: Annotated[
        Path | None,
        lock_dir_option(
            "A lock directory to write into every command (default: each command's own default)."
        ),
    ] = None,
    command: Annotated[
        str | None,
        typer.Option(
            "--command",
            help="How the CLIs start lockyard (default: `lockyard` if it "
            "is on PATH, else this installation's absolute path).",
            show_default=False,
        ),
    ] = None,
    ipc: Annotated[
        str | None,
        typer.Option(
            "--ipc",
            metavar="DIR",
            help="Inside a sandbox: its IPC folder as the sandbox sees it (e.g. /ipc). The "
            "lock tools and the write guard then go through `lockyard ipc-host` on the host "
            "(see docs/sandboxes.md).",
            show_default=False,
        ),
    ] = None,
    guard_port: Annotated[
        str | None,
        typer.Option(
            "--guard-port",
            help="The loopback port of lockyard's guard, written into every command and HTTP "
            "hook (default: derived from the lock directory; give one when two lock "
            "directories of this machine share a derived port).",
            show_default=False,
        ),
    ] = None,
) -> None:
    try:
        port = None if guard_port is None else parse_port(guard_port)
        default_dir = default_lock_dir_path()
    except ValueError as exc:
        raise CliError(str(exc), ExitCode.USAGE) from None
    root = _repository(repo)
    if ipc is not None and lock_dir is not None:
        raise CliError(
            "--ipc and --lock-dir do not go together: inside a sandbox the host keeps the locks",
            ExitCode.USAGE,
            "drop --lock-dir",
        )
    if ipc is not None and not ipc.startswith("/"):
        raise CliError(
            f"--ipc {ipc!r} is not an absolute path",
            ExitCode.USAGE,
            "pass the IPC folder as the sandbox mounts it, e.g. --ipc /ipc",
        )
    plan = Plan(root, outside_ok=write_outside_repo)
    chosen = _chosen(clis) or _detected(root)
    with _config_errors():
        how = Invocation(
            command or default_command(),
            None if lock_dir is None else str(lock_dir),
            ipc=ipc,
            guard_port=port,
            default_lock_dir=default_dir,
        )
        for setup in chosen:
            setup.install(plan, how)
        changes = plan.changes()
        _report(root, changes, dry_run, f"set up for {', '.join(s.display for s in chosen)}")
    if not dry_run and ipc is None:
        typer.echo(next_steps(root, chosen))


@reports_errors
def uninstall(
    clis: CliNames = None,
    repo: RepoOption = None,
    dry_run: DryRun = False,
    write_outside_repo: OutsideOk = False,
) -> None:
    root = _repository(repo)
    plan = Plan(root, outside_ok=write_outside_repo)
    with _config_errors():
        chosen = _chosen(clis) or [s for s in SETUPS.values() if s.installed(plan)]
        others = [s for s in SETUPS.values() if s not in chosen]
        for setup in chosen:
            setup.uninstall(plan, others)
        changes = plan.changes()
        names = ", ".join(s.display for s in chosen) or "no agent CLI"
        _report(root, changes, dry_run, f"lockyard removed for {names}")


def _detected(root: Path) -> list[CliSetup]:
    """The CLIs installed here or configured in the repository, each reported with where it
    was found; Claude Code when there are none."""
    found: list[CliSetup] = []
    for setup in SETUPS.values():
        command, marker = setup.found_on_path(), setup.found_in(root)
        where = [] if command is None else [f"{Path(command).name} on PATH ({command})"]
        where += [] if marker is None else [f"{marker} in the repository"]
        if where:
            typer.echo(f"found {setup.display}: {', '.join(where)}")
            found.append(setup)
    if not found:
        typer.echo(
            "found no agent CLI on PATH or in the repository: setting up Claude Code "
            f"(name the CLIs to choose: {', '.join(SETUPS)})"
        )
        return [SETUPS["claude-code"]]
    return found


def default_command() -> str:
    """`lockyard` when PATH finds this very installation, else its absolute path."""
    ours = Path(sys.executable).parent / "lockyard"
    found = shutil.which("lockyard")
    if not ours.exists():
        return found or "lockyard"
    if found is not None and Path(found).resolve() == ours.resolve():
        return "lockyard"
    return str(ours)


def _repository(repo: Path | None) -> Path:
    start = Path.cwd() if repo is None else repo
    if not start.is_dir():
        raise CliError(f"{start} is not a directory", ExitCode.USAGE, "pass --repo PATH")
    root = checkout_root(os.fspath(start))
    if root is None:
        raise CliError(
            f"{start.resolve()} is not inside a git repository",
            ExitCode.USAGE,
            "run this in the repository the agents edit (or pass --repo PATH); `git init` first "
            "if it has none",
        )
    return Path(root)


def _chosen(names: list[str] | None) -> list[CliSetup]:
    chosen: list[CliSetup] = []
    for name in names or []:
        setup = SETUPS.get(name)
        if setup is None:
            raise CliError(
                f"unknown agent CLI {name!r}", ExitCode.USAGE, f"use {', '.join(SETUPS)}"
            )
        if setup not in chosen:
            chosen.append(setup)
    return chosen


@contextlib.contextmanager
def _config_errors() -> Iterator[None]:
    """A file that cannot be edited safely is a usage error: one line, nothing written."""
    try:
        yield
    except ConfigFileError as exc:
        raise CliError(str(exc), ExitCode.USAGE) from None


def _report(root: Path, changes: list[FileChange], dry_run: bool, done: str) -> None:
    if not changes:
        typer.echo(f"{root}: nothing to change ({done} already).")
        return
    if dry_run:
        for change in changes:
            typer.echo(change.diff(root), nl=False)
    else:
        apply(changes)
        for change in changes:
            verb = (
                "created"
                if change.before is None
                else "removed"
                if change.after is None
                else "updated"
            )
            typer.echo(f"{verb} {change.name(root)}")
    if dry_run:
        typer.echo(f"(dry run: nothing written; without --dry-run: {done})")
    else:
        typer.echo(f"{root}: {done}.")


WHAT_EACH_CLI_ASKS_FIRST = {
    "claude-code": "Claude Code reads .claude/settings.json (the hook, the allowed lock tools) "
    "only in a trusted workspace: accept the trust dialog the first time you run claude here.",
    "codex": "Codex loads .codex/ only in a trusted project, and runs its hooks only once you "
    "have reviewed and trusted them: do both when codex asks.",
}


def _guarded_from_start(guarded: list[CliSetup], unguarded: list[CliSetup]) -> str:
    if not guarded:
        return ""
    which = f" of {', '.join(s.display for s in guarded)}" if unguarded else ""
    return f" New sessions{which} are guarded from their first tool call."


def next_steps(root: Path, chosen: list[CliSetup]) -> str:
    """What a person does after `init`: the sessions pick the set-up up when they start."""
    names = ", ".join(setup.display for setup in chosen)
    unguarded = [setup for setup in chosen if not setup.guarded]
    steps = [
        f"Restart the {names} sessions already running in {root}: a session reads its "
        "configuration when it starts."
        + _guarded_from_start([setup for setup in chosen if setup.guarded], unguarded),
        "Nothing else to start or remember: the sessions' own lockyard servers find and break "
        "deadlocks between them (lockyard monitor only prints them, for whoever wants the log).",
        *(WHAT_EACH_CLI_ASKS_FIRST[s.name] for s in chosen if s.name in WHAT_EACH_CLI_ASKS_FIRST),
        *(
            f"{s.display} gets the lock tools only: no hook of it refuses a write of an unlocked "
            f"file (docs/clis/{s.name}.md says why)."
            for s in unguarded
        ),
        "lockyard doctor checks the set-up and says what to fix; lockyard status shows who "
        "holds what.",
    ]
    wrapped = [
        textwrap.fill(step, 80, initial_indent="- ", subsequent_indent="  ", break_on_hyphens=False)
        for step in steps
    ]
    return "Next:\n" + "\n".join(wrapped)
