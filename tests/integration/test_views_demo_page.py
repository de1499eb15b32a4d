"""`lockyard demo --web` as a person sees it: the run's page, opened in headless Chromium
while the demo runs on PostgreSQL (whose journal is written by the server itself), shows the
holders and queues live, then the run's timeline from the journal, over the run's own time;
the page stays up after the run until the demo is told to stop. Screenshots are saved."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from browser_support import browser, screenshot_dir  # noqa: F401
from cli_support import LOCKYARD

from pg_support import PgServer

ADDRESS = re.compile(r"lockyard web: (http://\S+)")
PAGE_WAIT_MS = 180_000


@pytest.mark.timeout(900)
def test_demo_web_serves_the_runs_page_with_holders_queues_and_its_timeline(
    browser: Any,  # noqa: F811
    pg_server: PgServer,
    pg_schema: str,
    tmp_path: Path,
) -> None:
    shots = screenshot_dir(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "LOCKYARD_LOCK_DIR"}
    demo = subprocess.Popen(
        [
            *(LOCKYARD, "demo", "--web", "--web-port", "0", "--no-live", "--agents", "6"),
            *("--backend", pg_server.spec(pg_schema)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert demo.stdout is not None
        first = demo.stdout.readline()
        found = ADDRESS.search(first)
        assert found is not None, first + demo.stderr.read() if demo.poll() is not None else first
        # bypass_csp: Playwright's polling evaluates its predicates as strings
        page = browser.new_page(viewport={"width": 1280, "height": 800}, bypass_csp=True)
        problems: list[str] = []
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.goto(found.group(1))
        # live: someone holds a file and someone waits behind them
        page.wait_for_function(
            "document.querySelectorAll('#locks tbody tr').length > 0", timeout=PAGE_WAIT_MS
        )
        page.wait_for_function(
            "document.querySelectorAll('#locks td.queue span.age').length > 0",
            timeout=PAGE_WAIT_MS,
        )
        page.screenshot(path=str(shots / "demo-web-running.png"))
        # the run's timeline, from the journal: holds and waits
        page.wait_for_function(
            "(window.LockyardTimeline.counts().hold || 0) > 5 "
            "&& (window.LockyardTimeline.counts().wait || 0) > 0",
            timeout=PAGE_WAIT_MS,
        )
        # The page opened before the run's store existed: its timeline read the window again
        # once the store was there (it said "no lock store yet" for good).
        page.wait_for_function(
            "!document.getElementById('timeline-note').textContent.includes('no lock store')",
            timeout=PAGE_WAIT_MS,
        )
        after = demo.stdout.readline()
        while "stays up" not in after:
            assert after, demo.stderr.read()
            after = demo.stdout.readline()
        page.wait_for_function(
            "document.querySelectorAll('#locks tbody tr').length === 0", timeout=PAGE_WAIT_MS
        )
        page.screenshot(path=str(shots / "demo-web-after.png"))
        # The timeline's window is the run's (`#from=` its start) to its latest event: the run
        # fills its width after it ended (a fixed last 5 minutes showed it in a tenth).
        asked = float(found.group(1).rsplit("#from=", 1)[1])
        start, end = page.evaluate("window.LockyardTimeline.range()")
        latest = page.evaluate("window.LockyardTimeline.latest()")
        assert start == asked
        assert start < latest <= end
        assert latest - start >= 0.9 * (end - start)
        assert problems == []
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=120) == 0
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(timeout=60)
