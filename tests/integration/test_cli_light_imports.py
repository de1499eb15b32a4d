"""The light commands stay light: each command imports only what it uses (the full list of
commands and their libraries is loaded for `lockyard --help` only)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lockyard.infra.lockstore import JournalFiles, JournalRecord
from lockyard.infra.lockstore.journal.files import journal_dir

PROBE = r"""
import atexit, json, sys
watched = ("mcp", "claude_agent_sdk", "rich", "psycopg", "pydantic", "FILE_JOURNAL")
def report():
    print(json.dumps([m for m in watched if m in sys.modules]), file=sys.stderr)
atexit.register(report)
sys.argv = ["lockyard", *sys.argv[1:]]
from lockyard.cli.entry import main
main()
"""


FILE_JOURNAL = "lockyard.infra.lockstore.journal.file_journal"
"""The lock directory's journal reader (inotify, segments): no business of PostgreSQL's."""


def heavy_imports(*args: str) -> list[str]:
    probe = PROBE.replace("FILE_JOURNAL", FILE_JOURNAL)
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120
    )
    loaded: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (("--version",), set()),
        (("status", "--json"), {"pydantic"}),  # the lock store's records
        (("clean", "--json"), {"pydantic"}),
        (("monitor", "--once", "--json"), {"pydantic"}),
        (("status",), {"rich", "pydantic"}),  # the table
        # The journal's readers load no store, and their options are converted without
        # typer's pydantic adapters: `log` and `stats` answer within a second.
        (("log", "--agent", "bob", "-n", "5"), {FILE_JOURNAL}),
        (("log", "--json", "--kind", "grant", "--since", "1h"), {FILE_JOURNAL}),
        (("stats", "--json", "--top", "3"), {FILE_JOURNAL}),
        (("stats",), {"rich", FILE_JOURNAL}),
    ],
    ids=[
        "version",
        "status-json",
        "clean-json",
        "monitor-once",
        "status-table",
        "log",
        "log-json",
        "stats-json",
        "stats-table",
    ],
)
def test_a_command_imports_no_library_it_does_not_use(
    tmp_path: Path, args: tuple[str, ...], allowed: set[str]
) -> None:
    locks = tmp_path / "locks"
    locks.mkdir(mode=0o700)
    journal = JournalFiles(journal_dir(locks))  # something for log and stats to read
    journal.append(JournalRecord(time.time(), "grant", "ns", "bob", "/r/a.py", "1", 1, "h"))
    journal.close()
    lock_dir = ("--lock-dir", str(locks)) if args != ("--version",) else ()
    assert set(heavy_imports(*args, *lock_dir)) <= allowed


SDK_EXTRA_LIBRARIES = ("claude_agent_sdk", "mcp", "mcp_types")
"""What only `lockyard[sdk]` installs: the plain install's command must run without them."""

EVERY_CLI_MODULE = r"""
import importlib, json, pkgutil, sys
import lockyard.cli
from lockyard.cli.entry import main  # the console script's entry point
names = [m.name for m in pkgutil.walk_packages(lockyard.cli.__path__, "lockyard.cli.")]
for name in names:
    importlib.import_module(name)
print(json.dumps({"modules": names, "loaded": sorted({m.partition(".")[0] for m in sys.modules})}))
"""


def test_no_module_of_the_lockyard_command_imports_the_sdk_extras_libraries() -> None:
    done = subprocess.run(
        [sys.executable, "-c", EVERY_CLI_MODULE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert {"lockyard.cli.demo.runner", "lockyard.cli.serve", "lockyard.cli.web.server"} <= set(
        found["modules"]
    )
    assert set(found["loaded"]) & set(SDK_EXTRA_LIBRARIES) == set()


@pytest.mark.parametrize("command", ["log", "stats"])
def test_the_postgresql_journal_is_read_without_the_lock_directorys(command: str) -> None:
    # No server listens there: the command fails to connect, after its imports are done.
    loaded = heavy_imports(command, "--json", "--backend", "postgresql://lockyard@127.0.0.1:1/x")
    assert "psycopg" in loaded
    assert FILE_JOURNAL not in loaded
