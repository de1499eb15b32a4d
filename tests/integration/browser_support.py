"""A real browser for page tests: Debian's Chromium (`/usr/bin/chromium`), headless, driven
by Playwright (whose own browser download cannot be reached here), and `lockyard web` run
as a real process."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import LOCKYARD

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS_ENV = "LOCKYARD_SCREENSHOTS"
"""Where the tests save their screenshots (default: the test's temporary directory)."""
ADDRESS = re.compile(r"lockyard web: (http://\S+)")


def screenshot_dir(fallback: Path) -> Path:
    chosen = os.environ.get(SCREENSHOTS_ENV)
    directory = Path(chosen) if chosen else fallback
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module's tests (a launch costs a second)."""
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(".ci/run installs Debian's chromium: it is missing")
        pytest.skip("no /usr/bin/chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


class WebServer:
    """`lockyard web ARGS --port 0` in a process of its own; its address, once it said it."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        clean = {k: v for k, v in os.environ.items() if k != "LOCKYARD_LOCK_DIR"}
        self.process = subprocess.Popen(
            [LOCKYARD, "web", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean | (env or {}),
        )
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        found = ADDRESS.search(first)
        if found is None:
            self.process.kill()
            _out, err = self.process.communicate(timeout=30)
            raise AssertionError(f"lockyard web said {first!r}, {err!r}")
        self.address = found.group(1)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
