import subprocess
import sys


def test_console_entry_point_prints_help() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from lockyard.cli.app import main; main()", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "lockyard" in done.stdout
