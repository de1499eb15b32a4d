"""The light commands stay light: each command imports only what it uses (the full list of
commands and their libraries is loaded for `lockyard --help` only)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = r"""
import atexit, json, sys
watched = ("mcp", "claude_agent_sdk", "rich", "psycopg")
def report():
    print(json.dumps([m for m in watched if m in sys.modules]), file=sys.stderr)
atexit.register(report)
sys.argv = ["lockyard", *sys.argv[1:]]
from lockyard.cli.entry import main
main()
"""


def heavy_imports(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120
    )
    loaded: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (("--version",), set()),
        (("status", "--json"), set()),
        (("clean", "--json"), set()),
        (("monitor", "--once", "--json"), set()),
        (("status",), {"rich"}),  # the table
    ],
    ids=["version", "status-json", "clean-json", "monitor-once", "status-table"],
)
def test_a_command_imports_no_library_it_does_not_use(
    tmp_path: Path, args: tuple[str, ...], allowed: set[str]
) -> None:
    lock_dir = ("--lock-dir", str(tmp_path / "locks")) if args != ("--version",) else ()
    assert set(heavy_imports(*args, *lock_dir)) <= allowed
