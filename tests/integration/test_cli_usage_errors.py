"""Usage errors are one line on stderr (`lockyard: error: ...`), in every command."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_support import LOCKYARD, lockyard


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["monitor", "--bogus"], "No such option: --bogus"),
        (["serve", "--bogus"], "No such option: --bogus"),
        (["status", "--bogus"], "No such option: --bogus"),
        (["clean", "--bogus"], "No such option: --bogus"),
        (["monitor", "--once", "--poll-interval", "soon"], "Invalid value for '--poll-interval'"),
        (["bogus"], "No such command 'bogus'"),
    ],
)
def test_a_usage_error_is_one_line_with_what_to_do(
    args: list[str], expected: str, lock_dir: Path
) -> None:
    done = subprocess.run(
        [LOCKYARD, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"LOCKYARD_LOCK_DIR": str(lock_dir), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("lockyard: error: ")
    assert expected in lines[0]
    command = "lockyard" if args == ["bogus"] else f"lockyard {args[0]}"
    assert lines[0].endswith(f"; see '{command} --help'")
    assert "╭" not in done.stderr


def test_lockyard_alone_prints_its_help_and_no_error() -> None:
    done = subprocess.run([LOCKYARD], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "Usage: lockyard" in done.stdout
    assert done.stderr == ""


# --- a blank --lock-dir is a usage error, never the current directory


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["clean", "--all", "--yes"],
        ["monitor", "--once"],
        ["serve", "--agent-id", "a", "--repo", "."],
    ],
    ids=["status", "clean", "monitor", "serve"],
)
@pytest.mark.parametrize("blank", ["", "  "], ids=["empty", "spaces"])
def test_a_blank_lock_dir_is_a_usage_error(command: list[str], blank: str) -> None:
    done = lockyard(*command, "--lock-dir", blank)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "lock directory must not be empty" in done.stderr
    assert done.stdout == ""
    assert "test_" not in done.stderr  # "." was not scanned


@pytest.mark.parametrize("command", [["status"], ["monitor", "--once"]], ids=["status", "monitor"])
def test_a_blank_lock_dir_variable_is_a_usage_error(command: list[str]) -> None:
    done = lockyard(*command, env={"LOCKYARD_LOCK_DIR": "   "})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "LOCKYARD_LOCK_DIR" in done.stderr


# --- no `--help` shows `<bool>`


@pytest.mark.parametrize("command", [[], ["status"], ["clean"], ["serve"], ["monitor"], ["demo"]])
def test_help_shows_no_bool_metavar(command: list[str]) -> None:
    done = lockyard(*command, "--help")
    assert done.returncode == 0, done.stderr
    assert "--help" in done.stdout
    assert "<bool>" not in done.stdout
