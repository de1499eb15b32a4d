"""`lockyard demo` end to end: real store, real monitor, real MCP protocol, real files."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from lockyard.cli._errors import CliError, ExitCode
from lockyard.cli.app import app
from lockyard.cli.demo import command
from lockyard.cli.demo.runner import DemoOptions, Workspace, run_demo
from lockyard.cli.demo.scenario import PERSON, build_scenario, edit_line, file_header
from lockyard.cli.demo.summary import DemoReport
from lockyard.infra.lockstore import JournalQuery, LockStore, open_journal

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


def lockyard(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LOCKYARD, *args], capture_output=True, text=True, timeout=120)


def test_demo_json_and_kept_workspace_show_every_edit_exactly_once(tmp_path: Path) -> None:
    keep = tmp_path / "kept"
    done = lockyard("demo", "--seed", "3", "--keep", str(keep), "--json")  # 8 agents, 12 files
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert report["problems"] == []
    assert report["workspace"] == str(keep.resolve())
    assert report["edits_done"] == report["edits_expected"] > 0
    assert report["lost_edits"] == 0
    assert report["overlaps"] == []
    # The scripted pair and ring were both detected and each victim got the deadlock result.
    groups = [set(record["agents"]) for record in report["deadlocks"]]
    assert {"agent-1", "agent-2"} in groups
    assert {"agent-3", "agent-4", "agent-5"} in groups
    assert report["deadlock_results"] >= 2
    assert report["waits"] > 0
    assert report["handoffs"] > 0
    assert report["handoff_median_s"] <= report["handoff_p99_s"]
    # It ends with the journal's figures of its own run: every deadlock and what it cost.
    journal = report["journal"]
    # One report, one victim's result and one record per deadlock.
    assert len(journal["deadlocks"]) == report["deadlock_results"] == len(report["deadlocks"])
    assert journal["deadlock_cost"] > 0

    # The files themselves: the same plan, every line once, nothing else.
    scenario = build_scenario(seed=3)
    for name, lines in scenario.expected_lines().items():
        content = (keep / "repo" / name).read_text()
        assert content.startswith(file_header(name))
        body = content[len(file_header(name)) :].splitlines()
        assert sorted(body) == sorted(lines)
    assert (
        edit_line("agent-1", 1)
        in (keep / "repo" / scenario.agents[0].tasks[0].files[0]).read_text()
    )
    # Nothing is left in the kept lock directory.
    store = LockStore(keep / "repo", keep / "locks")
    assert store.list_locks() == []
    act_happened_as_the_journal_shows(store, report)


def act_happened_as_the_journal_shows(store: LockStore, report: dict[str, Any]) -> None:
    """The act on tests/, read from the run's journal itself: a directory lock, two readers
    holding it at once, and the person's lock taken by a process of its own."""
    with open_journal(store) as journal:
        records = list(journal.records(JournalQuery()))
    granted = [r for r in records if r.kind in ("grant", "hand-over")]
    released = {(r.agent, r.file): r.time for r in records if r.kind == "release"}
    assert any(r.agent == "agent-6" and r.file == "tests/" and r.outcome is None for r in granted)
    readers = {r.agent: r.time for r in granted if r.file == "tests/" and r.outcome == "shared"}
    assert set(readers) == {"agent-7", "agent-8"}
    assert max(readers.values()) < min(released[(agent, "tests/")] for agent in readers)
    agents_pid = next(r.pid for r in granted if r.agent == "agent-6")
    person = [r for r in granted if r.agent == PERSON and r.file == "tests/test_models.py"]
    assert person
    assert all(r.pid != agents_pid for r in person)
    assert any(
        r.agent == PERSON and r.kind == "wait-end" and r.outcome == "granted" for r in records
    )
    # The report says what the journal says.
    act = report["act"]
    assert act["person_exit"] == 0
    assert act["person_in_own_process"] is True
    assert act["readers_together_s"] > 0
    assert act["writer_held_s"] > 0
    assert any(line.startswith("waiting for tests/test_models.py") for line in act["person_said"])


def test_demo_refuses_bad_options_without_a_traceback(tmp_path: Path) -> None:
    too_few = lockyard("demo", "--agents", "1")
    assert too_few.returncode == 2
    assert "--agents" in too_few.stderr
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "precious.txt").write_text("keep me")
    refused = lockyard("demo", "--keep", str(occupied))
    assert refused.returncode == 2
    assert "is not an empty directory" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert (occupied / "precious.txt").read_text() == "keep me"
    assert sorted(path.name for path in occupied.iterdir()) == ["precious.txt"]


def test_live_view_runs_on_a_terminal_and_the_run_still_holds() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    report, workspace = run_demo(DemoOptions(agents=3, files=4, seed=9), console)
    assert report.ok, report.problems
    assert {"agent-1", "agent-2"} in [set(record.agents) for record in report.deadlocks]
    assert "lockyard demo: 3 agents, 4 files, seed 9" in screen.getvalue()
    assert not workspace.root.exists()  # the temporary workspace is gone


def test_a_broken_invariant_exits_1(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The command's exit status follows the report (the report's rules are unit-tested)."""
    from lockyard.cli.demo import runner

    real_run_demo = runner.run_demo

    def run_then_break(
        options: DemoOptions, console: Console | None
    ) -> tuple[DemoReport, Workspace]:
        report, workspace = real_run_demo(options, console)
        broken = DemoReport(**{**report.__dict__, "problems": ("src/app/models.py: lost edit",)})
        return broken, workspace

    monkeypatch.setattr(runner, "run_demo", run_then_break)
    keep = tmp_path / "kept"
    args = ["demo", "--agents", "2", "--files", "3", "--no-live", "--keep", str(keep)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "INVARIANT BROKEN" in result.output
    assert "lost edit" in result.output
    assert "(lockyard status --lock-dir " in " ".join(result.output.split())
    assert command.HELP.splitlines()[0] in CliRunner().invoke(app, ["demo", "--help"]).output


def test_run_demo_refuses_sizes_out_of_range_before_creating_anything(tmp_path: Path) -> None:
    keep = tmp_path / "never"
    with pytest.raises(CliError, match="--files must be between") as refused:
        run_demo(DemoOptions(files=2, keep=keep), None)
    assert refused.value.code is ExitCode.USAGE
    assert not keep.exists()


def test_the_checks_catch_a_store_that_breaks_mutual_exclusion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sabotage the real store so every request is granted: the run must be judged broken."""
    from lockyard.infra.lockstore.lockdir import line

    real_take = line.take

    def grant_everything(*args: Any, **kwargs: Any) -> line.Recipe[line.Taken | None]:
        taken = yield from real_take(*args, **kwargs)
        return ("sabotaged", True) if taken is None else taken

    monkeypatch.setattr(line, "take", grant_everything)
    report, _ = run_demo(DemoOptions(agents=6, files=4, seed=2), None)
    assert not report.ok
    assert report.overlaps  # two agents were inside one file's read-modify-write at once
    assert any("edited while" in problem for problem in report.problems)
