"""Every shell command of README that it says works offline, run as written, in order, in a
fresh copy of this checkout: a new home, an empty lock directory, uv offline (its cache is
the only source), and nothing on PATH from this environment.

README marks those blocks with `<!-- offline: ... -->` on the line before them. The test
suite's own command (`scripts/check`) is not run from inside the test suite: CI runs exactly
that line (checked below against .ci/run).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- offline:"
THE_TESTS = "python3 scripts/uv run scripts/check"


def offline_blocks(readme: str) -> list[list[str]]:
    """The command lines (comments dropped) of each marked ```bash block, in order."""
    blocks = []
    for found in re.finditer(r"^<!-- offline:[^\n]*\n```bash\n(.*?)^```", readme, re.M | re.S):
        lines = [line.split("  #")[0].strip() for line in found.group(1).splitlines()]
        blocks.append([line for line in lines if line])
    return blocks


def fresh_copy(destination: Path) -> Path:
    """The checkout's files as git knows them (tracked and not ignored), without .venv."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def test_the_readme_marks_the_blocks_a_new_user_runs_first() -> None:
    blocks = offline_blocks((ROOT / "README.md").read_text())
    assert blocks[0] == ["python3 scripts/uv run lockyard demo", THE_TESTS]  # the first screen
    assert any(line.startswith("lockyard status") for block in blocks for line in block)


def test_ci_runs_the_readme_test_command_exactly() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert THE_TESTS in ci


@pytest.mark.timeout(900)  # a fresh venv from uv's cache, the demo, the operator's commands
def test_every_offline_readme_command_works_as_written_on_a_fresh_copy(tmp_path: Path) -> None:
    copy = fresh_copy(tmp_path / "lockyard")
    home = tmp_path / "home"
    home.mkdir()
    # README's `lockyard` is the checkout's .venv/bin/lockyard until installed (the install
    # block resolves afresh from PyPI: not an offline block).
    uv_cache = os.environ.get("UV_CACHE_DIR") or str(Path.home() / ".cache" / "uv")
    lockyard_cache = Path.home() / ".cache" / "lockyard"  # scripts/uv's own copy of uv
    (home / ".cache").mkdir()
    if lockyard_cache.exists():
        (home / ".cache" / "lockyard").symlink_to(lockyard_cache)
    env = {
        "HOME": str(home),
        "PATH": f"{copy / '.venv' / 'bin'}:{_python3_dir(tmp_path)}:/usr/bin:/bin",
        "UV_CACHE_DIR": uv_cache,
        "UV_OFFLINE": "1",  # nothing from the network: the cache has what the set-up fetched
        "UV_NO_PROGRESS": "1",
        "UV_PYTHON": sys.executable,
        "LOCKYARD_LOCK_DIR": str(tmp_path / "locks"),
        "LANG": "C.UTF-8",
    }
    ran: dict[str, str] = {}
    for block in offline_blocks((ROOT / "README.md").read_text()):
        for line in block:
            if line == THE_TESTS:
                continue  # the suite itself: CI runs it (test above)
            done = subprocess.run(
                shlex.split(line), cwd=copy, env=env, capture_output=True, text=True, timeout=900
            )
            assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
            assert "Traceback" not in done.stderr, f"{line}\n{done.stderr[-3000:]}"
            ran[line] = done.stdout
    # The demo with its default settings, as a new user first runs it (stdout is a pipe: no
    # live view); the only run of the defaults in the suite, so it says what a user reads.
    demo = ran["python3 scripts/uv run lockyard demo"]
    for said in ("all invariants held", "no edit lost", "no two holders overlapped",
                 "8 scripted agents", "deadlock 1: victim "):  # fmt: skip
        assert said in demo, demo
    # The act on tests/: readers sharing it, the directory lock, the person's own process.
    flowing = " ".join(" ".join(line.strip("│ ").split()) for line in demo.splitlines())
    for said in ("agent-7 and agent-8 read tests/ together (mode shared)",
                 "agent-6 locked all of tests/ (its 2 files) in one lock_acquire",
                 "lockyard lock tests/test_models.py -- sh -c", "exit 0"):  # fmt: skip
        assert said in flowing, demo
    assert "lockyard status" in ran


def _python3_dir(tmp_path: Path) -> Path:
    """A folder with `python3` in it (this interpreter, as a user's python3 would be) and the
    uv that scripts/uv found here if it was on PATH (a machine that has none has scripts/uv's
    own copy in the cache linked above)."""
    folder = tmp_path / "python3-only"
    folder.mkdir()
    (folder / "python3").symlink_to(sys.executable)
    uv = shutil.which("uv")
    if uv is not None:
        (folder / "uv").symlink_to(uv)
    return folder
