"""README's orchestrator example, run as written with the real bundled Claude CLI and no Claude
login: the failure is the one README shows, not a silent empty run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RUN_THE_EXAMPLE = r"""
import pathlib, re, sys, anyio
block = re.findall(r"```python\n(.*?)```", pathlib.Path(sys.argv[1]).read_text(), re.S)[0]
example = {}
exec(block, example)
try:
    anyio.run(example["run_all"], sys.argv[2], {"alice": "Say hello."})
except* RuntimeError as group:
    [error] = group.exceptions
    print(f"RuntimeError: {error}")
"""


def test_the_sdk_example_without_a_login_raises_what_readme_says(tmp_path: Path) -> None:
    repo, home = tmp_path / "repo", tmp_path / "home"
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANTHROPIC_", "CLAUDE_")) and key != "LOCKYARD_LOCK_DIR"
    }
    env |= {
        "HOME": str(home),  # no login here, whatever the machine has
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",  # and nothing leaves the machine
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "LOCKYARD_LOCK_DIR": str(tmp_path / "locks"),
    }
    done = subprocess.run(
        [sys.executable, "-c", RUN_THE_EXAMPLE, str(ROOT / "README.md"), str(repo)],
        env=env, capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    shown = done.stdout.strip()
    assert shown == "RuntimeError: alice: Not logged in · Please run /login", done.stderr[-3000:]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert re.search(re.escape(f"`{shown}`"), readme)
