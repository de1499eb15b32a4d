"""`lockyard demo`: the typer command around the demo session."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from .._errors import EXIT_CODES_HELP, ExitCode, reports_errors
from .._format import print_json, quiet_library_logs
from .._options import flag
from .scenario import MAX_AGENTS, MAX_FILES, MIN_AGENTS, MIN_FILES
from .summary import DemoReport, render_report

if TYPE_CHECKING:
    from .runner import Workspace

HELP = """Run a multi-agent session on a throwaway repo and check that no edit was lost.

Eight scripted agents (by default) lock, edit and release overlapping files of a small
generated repository through the real lock tools over MCP, with contention, fair handoffs
and scripted deadlocks that the monitor detects and resolves softly. Two of them read tests/
together under a shared lock, one locks the whole directory tests/ to edit it, and a person's
`lockyard lock` (a process of its own) waits its turn behind that. Nothing to configure: no
network, no API key; everything lives in a temporary directory unless --keep is given.

At the end a summary shows the edits, waits, handoff latencies, deadlocks and what the
journal recorded of tests/, and checks that every edit is in its file exactly once and no two
agents held a file at once.
"""


def register(app: typer.Typer) -> None:
    app.command("demo", help=HELP, epilog=EXIT_CODES_HELP)(demo)


@reports_errors
def demo(
    agents: Annotated[
        int,
        typer.Option(min=MIN_AGENTS, max=MAX_AGENTS, help="How many scripted agents run at once."),
    ] = 8,
    files: Annotated[
        int,
        typer.Option(min=MIN_FILES, max=MAX_FILES, help="How many files the generated repo has."),
    ] = 12,
    seed: Annotated[
        int, typer.Option(help="Seed of the plan (who edits what, in which order).")
    ] = 7,
    keep: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Keep the repo and the lock directory in DIR (new or empty) to look at later.",
        ),
    ] = None,
    json_output: Annotated[
        bool, flag("--json", help="Print the summary as JSON (no live view).")
    ] = False,
    no_live: Annotated[
        bool,
        flag("--no-live", help="No live view (it is also off when stdout is no TTY)."),
    ] = False,
    web: Annotated[
        bool,
        flag(
            "--web",
            help="Serve the run's page (lockyard web) on 127.0.0.1 and print its address; the "
            "agents go at a pace a person can follow, and the page stays up after the run "
            "until Ctrl-C.",
        ),
    ] = False,
    web_port: Annotated[
        int, typer.Option(min=0, max=65535, help="The page's port with --web (0: any free one).")
    ] = 8765,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            metavar="SPEC",
            help="Where the locks live: file (the demo's lock directory, default), postgres "
            "(a throwaway PostgreSQL server from this machine's binaries) or postgresql://... "
            "(an existing server, in a schema dropped afterwards).",
            show_default=False,
        ),
    ] = None,
) -> None:
    from .runner import DemoOptions, run_demo  # the store, monitor and scenario: only for demo

    quiet_library_logs()
    console = Console()
    live = not (json_output or no_live) and console.is_terminal
    options = DemoOptions(agents=agents, files=files, seed=seed, keep=keep, backend=backend)
    if not web:
        report_outcome(*run_demo(options, console if live else None), console, json_output, keep)
        return
    from .web import WATCHABLE, DemoPage

    def say(line: str) -> None:
        print(line, flush=True)

    def print_report(report: DemoReport, workspace: Workspace) -> None:
        report_outcome(report, workspace, console, json_output, keep, exit_on_failure=False)

    outcome = run_demo(
        replace(options, pacing=WATCHABLE),
        console if live else None,
        DemoPage(web_port, say),
        print_report,
    )
    if not outcome[0].ok:
        raise typer.Exit(int(ExitCode.INVARIANT_BROKEN))


def report_outcome(
    report: DemoReport,
    workspace: Workspace,
    console: Console,
    json_output: bool,
    keep: Path | None,
    *,
    exit_on_failure: bool = True,
) -> None:
    """Print the summary (or its JSON); exit 1 when an invariant broke."""
    kept = str(workspace.root) if keep is not None else None
    if json_output:
        print_json(report.to_dict() | {"workspace": kept})
    else:
        render_report(report, console)
        if kept is not None:
            console.print(
                f"kept: the repo in {workspace.repo}, the lock directory in {workspace.lock_dir}"
                f" (lockyard status --lock-dir {workspace.lock_dir})"
            )
    if exit_on_failure and not report.ok:
        raise typer.Exit(int(ExitCode.INVARIANT_BROKEN))
