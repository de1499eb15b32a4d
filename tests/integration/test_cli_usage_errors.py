"""Usage errors are one line on stderr (`lockyard: error: ...`), in every command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


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
