import subprocess
import sys
from pathlib import Path

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


def test_console_entry_point_prints_help() -> None:
    done = subprocess.run([LOCKYARD, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Usage: lockyard" in done.stdout
