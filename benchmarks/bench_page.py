"""Does the `lockyard web` page stay smooth with 500 files held and 100 agents? (issue 27)

    python3 scripts/uv run python benchmarks/bench_page.py [--files 500] [--agents 100]
                                                [--seconds 20] [--small-files 10]
                                                [--small-agents 4] [--other CHECKOUT]
                                                [--screenshots DIR]

Two live lock directories are made in this process: a big one (`--files` held by
`--agents`, a fifth of the agents each waiting for a file another holds) and a small one
built the same way, both churned at the same rate (a held file changes holder five times a
second, so the page gets a new board and journal records as often as a busy repository
would give them). `lockyard web` serves each; Debian's headless Chromium (driven by
Playwright, as the page's tests do) opens the page and records, for `--seconds`:

- the frames: how many were drawn, their median and 95th-percentile spacing, the longest;
- the long tasks (the browser's `longtask` entries: script or layout that held the main
  thread over 50 ms), how many and their total;
- the main thread's busy time (Chrome's own TaskDuration / ScriptDuration / LayoutDuration),
  per second of the run;
- the boards the page took in.

The big page's figures are printed beside the small one's with their ratio: what the size
costs, whatever the machine's load (both run in the same run, one after the other).
`--other CHECKOUT` also watches the big page served by that checkout's `lockyard web` (its
own page and server, on a scene alike) and prints this page's figures against it: a change's
cost in one run. `--screenshots DIR` saves each page as it looked at the end.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lockyard.infra.lockstore import LockStore
from processes import LOCKYARD, WebProcess

CHROMIUM = Path("/usr/bin/chromium")
CHURN_PER_SECOND = 5.0
WAITING_SHARE = 5
"""One agent in this many waits for a file another agent holds."""

# Installed in the page before its own scripts: every frame's time and every long task.
PROBE = """
window.__bench = { frames: [], long: [] };
(function tick(t) { window.__bench.frames.push(t); requestAnimationFrame(tick); })(0);
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__bench.long.push(entry.duration);
}).observe({ type: "longtask", buffered: true });
"""


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


class Scene:
    """A lock directory where `agents` hold `files` and some wait, changed all the time."""

    def __init__(self, lock_dir: Path, files: int, agents: int) -> None:
        self.store = LockStore(None, lock_dir)
        self.names = [f"src/pkg{n % 23}/module_{n:04d}.py" for n in range(files)]
        self.agents = [f"agent-{n:03d}" for n in range(agents)]
        self.holder: dict[str, str] = {}
        for n, name in enumerate(self.names):
            agent = self.agents[n % agents]
            assert self.store.try_lock(name, agent)
            self.holder[name] = agent
        self.stop = threading.Event()
        self.waiters: list[threading.Thread] = []
        self.waited: dict[str, str] = {}
        for n in range(0, agents, WAITING_SHARE):
            name = self.names[(n * 7 + 1) % files]
            if self.holder[name] == self.agents[n]:
                continue
            self.waited[name] = self.holder[name]
            thread = threading.Thread(target=self._wait, args=(name, self.agents[n]), daemon=True)
            thread.start()
            self.waiters.append(thread)
        self.churned = [name for name in self.names if name not in self.waited]
        self.churner = threading.Thread(target=self._churn, daemon=True)
        self.churner.start()

    def _wait(self, name: str, agent: str) -> None:
        self.store.acquire(name, agent, timeout_seconds=3600)

    def _churn(self) -> None:
        """A file changes holder now and then: a release and a grant, as agents do."""
        chance = random.Random(27)
        while not self.stop.wait(1 / CHURN_PER_SECOND):
            name = chance.choice(self.churned)
            self.store.release(name, self.holder[name])
            self.holder[name] = chance.choice(self.agents)
            self.store.try_lock(name, self.holder[name])

    def close(self) -> None:
        self.stop.set()
        self.churner.join()
        for name, holder in self.waited.items():  # the waiter gets it, and its wait ends
            self.store.release(name, holder)
        for thread in self.waiters:
            thread.join(timeout=30)
        self.store.close()


@dataclass
class Figures:
    frames: int
    frame_median_ms: float
    frame_p95_ms: float
    frame_longest_ms: float
    long_tasks: int
    long_task_ms: float
    busy_ms_per_s: float
    script_ms_per_s: float
    layout_ms_per_s: float
    boards: int


def _metrics(session: Any) -> dict[str, float]:
    answer = session.send("Performance.getMetrics")
    return {entry["name"]: float(entry["value"]) for entry in answer["metrics"]}


def watch(browser: Any, address: str, seconds: float, shot: Path | None) -> Figures:
    """The page at `address`, watched for `seconds` once its first board is drawn (then saved
    as the picture `shot`, if given)."""
    # bypass_csp: the page forbids eval, which Playwright's polling uses.
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    try:
        page = context.new_page()
        page.add_init_script(PROBE)
        session = context.new_cdp_session(page)
        session.send("Performance.enable")
        page.goto(address)
        page.wait_for_function("window.lockyardView && window.lockyardView.boards() > 0")
        page.wait_for_timeout(2000)  # the first layout and the timeline's first load
        before = _metrics(session)
        boards = page.evaluate("window.lockyardView.boards()")
        start = page.evaluate("[window.__bench.frames.length, window.__bench.long.length]")
        page.wait_for_timeout(seconds * 1000)
        after = _metrics(session)
        frames, long_tasks = page.evaluate("[window.__bench.frames, window.__bench.long]")
        boards = page.evaluate("window.lockyardView.boards()") - boards
        if shot is not None:
            page.screenshot(path=str(shot))
    finally:
        context.close()
    stamps = frames[start[0] :]
    gaps = sorted(b - a for a, b in itertools.pairwise(stamps)) or [0.0]
    long_tasks = long_tasks[start[1] :]
    spent = after["Timestamp"] - before["Timestamp"] or 1.0

    def per_second(name: str) -> float:
        return (after.get(name, 0.0) - before.get(name, 0.0)) * 1000 / spent

    return Figures(
        frames=len(stamps),
        frame_median_ms=statistics.median(gaps),
        frame_p95_ms=gaps[min(len(gaps) - 1, int(len(gaps) * 0.95))],
        frame_longest_ms=gaps[-1],
        long_tasks=len(long_tasks),
        long_task_ms=sum(long_tasks),
        busy_ms_per_s=per_second("TaskDuration"),
        script_ms_per_s=per_second("ScriptDuration"),
        layout_ms_per_s=per_second("LayoutDuration") + per_second("RecalcStyleDuration"),
        boards=boards,
    )


def measure(
    root: Path, browser: Any, files: int, agents: int, seconds: float,
    lockyard: str = LOCKYARD, shots: Path | None = None, label: str = "",
) -> Figures:  # fmt: skip
    print(
        f"{files} files, {agents} agents{label}: watching the page for {seconds:.0f} s ({load()})",
        flush=True,
    )
    name = f"{files}-files{label.replace(' ', '-')}"
    lock_dir = root / f"locks-{name}"
    scene = Scene(lock_dir, files, agents)
    try:
        web = WebProcess(lock_dir, lockyard)
        try:
            shot = None if shots is None else shots / f"page-{name}.png"
            return watch(browser, web.address, seconds, shot)
        finally:
            web.close()
    finally:
        scene.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--small-files", type=int, default=10)
    parser.add_argument("--small-agents", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--other", type=Path, help="also watch this checkout's big page")
    parser.add_argument("--screenshots", type=Path, help="save each page's picture here")
    args = parser.parse_args()
    if args.screenshots is not None:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    if not CHROMIUM.exists():
        print("no /usr/bin/chromium: apt-get install chromium")
        return 2
    from playwright.sync_api import sync_playwright

    with (
        tempfile.TemporaryDirectory(prefix="lockyard-bench-page-") as temp,
        sync_playwright() as driver,
    ):
        browser = driver.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            print(f"load {load()}")
            root, shots = Path(temp), args.screenshots
            small = measure(root, browser, args.small_files, args.small_agents, args.seconds,
                            shots=shots)  # fmt: skip
            big = measure(root, browser, args.files, args.agents, args.seconds, shots=shots)
            other = None
            if args.other is not None:
                other = measure(
                    root, browser, args.files, args.agents, args.seconds,
                    str(args.other / ".venv" / "bin" / "lockyard"), shots, " other",
                )  # fmt: skip
            print(f"load {load()}")
        finally:
            browser.close()
    small_name = f"{args.small_files} files/{args.small_agents} agents"
    big_name = f"{args.files} files/{args.agents} agents"
    print(f"{args.seconds:.0f} s of each page, churned {CHURN_PER_SECOND:.0f} times a second")
    print(f"{'':34} {small_name:>18} {big_name:>18} {'ratio':>7}", end="")
    print("" if other is None else f" {'other, ' + big_name:>24} {'this/other':>10}")
    for field, label in [
        ("frames", "frames drawn"),
        ("frame_median_ms", "frame spacing, median (ms)"),
        ("frame_p95_ms", "frame spacing, 95th pct (ms)"),
        ("frame_longest_ms", "longest frame spacing (ms)"),
        ("long_tasks", "long tasks (> 50 ms)"),
        ("long_task_ms", "long tasks, total (ms)"),
        ("busy_ms_per_s", "main thread busy (ms per s)"),
        ("script_ms_per_s", "  of it script (ms per s)"),
        ("layout_ms_per_s", "  of it style+layout (ms per s)"),
        ("boards", "boards taken in"),
    ]:
        before, after = getattr(small, field), getattr(big, field)
        ratio = f"{after / before:6.1f}x" if before else ""
        print(f"{label:34} {before:18.1f} {after:18.1f} {ratio:>7}", end="")
        if other is None:
            print()
            continue
        theirs = getattr(other, field)
        versus = f"{after / theirs:9.2f}x" if theirs else ""
        print(f" {theirs:24.1f} {versus:>10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
