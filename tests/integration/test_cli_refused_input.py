"""The `lockyard` command refuses input it cannot use with one line and an exit code, never
a traceback: an over-long lock directory, an agent id that is not UTF-8."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


def _run(*args: str | bytes, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LOCKYARD, *args],
        capture_output=True,
        text=True,
        errors="replace",
        stdin=subprocess.DEVNULL,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_an_over_long_lock_dir_is_a_one_line_error(tmp_path: Path) -> None:
    too_long = str(tmp_path / ("x" * 300))
    for args, env in (
        (("status", "--lock-dir", too_long), None),
        (("clean", "--lock-dir", too_long), None),
        (("status",), {"LOCKYARD_LOCK_DIR": too_long}),
    ):
        done = _run(*args, env=env)
        assert done.returncode == 3, done.stderr
        assert "Traceback" not in done.stderr
        assert "File name too long" in done.stderr


def test_serve_refuses_an_agent_id_that_is_not_utf8_before_any_mcp_traffic(
    repo: Path, lock_dir: Path
) -> None:
    done = _run(
        "serve", b"--agent-id", b"al\xffce", "--repo", str(repo), "--lock-dir", str(lock_dir)
    )
    assert done.returncode == 2, done.stderr
    assert "not valid UTF-8" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    assert not lock_dir.exists() or os.listdir(lock_dir) == []
