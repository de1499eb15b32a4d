"""`lockyard web` as a person sees it: headless Chromium opens the page while real agent
processes hold, queue and deadlock on a real lock directory, and checks what appears and
how it follows the agents. Screenshots are saved (`LOCKYARD_SCREENSHOTS`, else tmp)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from browser_support import WebServer, browser, screenshot_dir  # noqa: F401
from cli_support import Agents

from lockyard.cli._format import format_duration
from lockyard.infra.lockstore import JournalRecord, LockStore
from lockyard.infra.lockstore.journal.files import ACTIVE, JournalFiles, journal_dir
from lockyard.infra.lockstore.journal.record import CycleStep, encode

HOSTILE_FILE = "__<img src=x onerror=window.pwned=1>__"
HOSTILE_AGENT = "<script>window.pwned=2</script>"
PAGE_WAIT_MS = 120_000


class Scene:
    def __init__(self, lock_dir: Path) -> None:
        self.agents = Agents(lock_dir, patience=900)
        self.one = self.agents.start("agent-1", holds="__a__", waits="__b__")
        self.two = self.agents.start("agent-2", holds="__b__", waits="__a__")
        self.three = self.agents.start("agent-3", holds="__c__", waits="__a__")
        hostile = LockStore(None, lock_dir)  # held by this test's own (live) process
        assert hostile.try_lock(HOSTILE_FILE, HOSTILE_AGENT)
        for reader in ("reader-1", "reader-2"):  # two readers share one file
            assert hostile.try_lock("__shared__", reader, mode="shared")
        self.agents.go(self.three)
        self.web = WebServer("--lock-dir", str(lock_dir))


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    made = Scene(tmp_path_factory.mktemp("web") / "locks")
    try:
        yield made
    finally:
        made.web.close()
        made.agents.close()


@contextmanager
def watched_page(browser: Any, address: str) -> Iterator[Any]:  # noqa: F811
    """The page at `address`, its errors in `.problems` and its dialogs in `.dialogs`."""
    # bypass_csp: Playwright's polling evaluates its predicates as strings. It also shows
    # that names are shown as text without the policy's help (the policy has its own test).
    context = browser.new_context(viewport={"width": 1280, "height": 800}, bypass_csp=True)
    opened = context.new_page()
    opened.problems = []
    opened.dialogs = []
    opened.on("pageerror", lambda error: opened.problems.append(str(error)))
    opened.on(
        "console",
        lambda message: opened.problems.append(message.text) if message.type == "error" else None,
    )
    opened.on("dialog", lambda dialog: (opened.dialogs.append(dialog.message), dialog.dismiss()))
    try:
        opened.goto(address)
        yield opened
    finally:
        context.close()


@pytest.fixture
def page(browser: Any, scene: Scene) -> Iterator[Any]:  # noqa: F811
    with watched_page(browser, scene.web.address) as opened:
        yield opened


def text_of(page: Any, selector: str) -> str:
    return str(page.locator(selector).inner_text())


def test_the_page_shows_holders_a_queue_and_a_cycle_with_its_victim_and_follows_a_kill(
    page: Any, scene: Scene, tmp_path: Path
) -> None:
    shots = screenshot_dir(tmp_path)
    page.wait_for_function(
        "document.querySelectorAll('#locks tbody tr').length >= 4", timeout=PAGE_WAIT_MS
    )
    table = text_of(page, "#locks")
    assert "agent-1" in table
    assert "agent-2" in table
    assert "agent-3" in table
    scene.agents.go(scene.one, scene.two)  # the cycle forms while the page is open
    page.wait_for_selector("#deadlocks li.live", timeout=PAGE_WAIT_MS)
    banner = text_of(page, "#deadlocks")
    victim = text_of(page, "#deadlocks li.live .victim")
    assert victim in {"agent-1", "agent-2"}
    assert "DEADLOCK" in banner
    assert "to give way (victim)" in banner
    page.wait_for_function(
        "window.lockyardView.graph().some(e => e.classes.includes('victim'))",
        timeout=PAGE_WAIT_MS,
    )
    graph = page.evaluate("window.lockyardView.graph()")
    cycle_edges = [e["id"] for e in graph if "cycle" in e["classes"] and e["id"][0] in "hw"]
    assert len(cycle_edges) == 4  # two waits, two holds
    assert [e["label"] for e in graph if "victim" in e["classes"]] == [f"{victim} (victim)"]
    assert "3 waiting" in text_of(page, "#counts")
    assert "DEADLOCK" in text_of(page, "#counts")
    page.wait_for_timeout(1500)  # one more layout pass, for the picture
    page.screenshot(path=str(shots / "web-cycle.png"))

    scene.agents.kill(scene.one if victim == "agent-1" else scene.two)
    page.wait_for_selector("#deadlocks li.past", timeout=PAGE_WAIT_MS)  # broken, by push
    assert "gave way (victim)" in text_of(page, "#deadlocks")
    assert "DEADLOCK" not in text_of(page, "#counts")
    page.screenshot(path=str(shots / "web-after-kill.png"))
    assert page.problems == []


# Each holder cell's text: how many lines it takes, and whether any of it is cut off.
HOLDER_CELLS = """[...document.querySelectorAll('#locks td.holder')].map((cell) => {
    const range = document.createRange();
    range.selectNodeContents(cell);
    const lines = new Set([...range.getClientRects()].map((box) => Math.round(box.top)));
    return [cell.textContent, lines.size, cell.scrollWidth > cell.clientWidth];
})"""


def test_readers_of_a_shared_lock_show_in_the_table_and_the_graph(
    page: Any, tmp_path: Path
) -> None:
    page.wait_for_function(
        "[...document.querySelectorAll('#locks td.shared')].length > 0", timeout=PAGE_WAIT_MS
    )
    assert "shared: reader-1, reader-2" in text_of(page, "#locks")
    # No holder is cut, at 1280 px or 1024; the readers' names fit one line at 1280 (a holder
    # named like a script wraps: the file and queue columns need room too).
    cells = page.evaluate(HOLDER_CELLS)
    assert [text for text, lines, cut in cells if cut] == [], cells
    assert ["shared: reader-1, reader-2", 1, False] in cells
    page.set_viewport_size({"width": 1024, "height": 768})
    page.wait_for_function(f"{HOLDER_CELLS}.every(([text, lines, cut]) => !cut)")
    page.screenshot(path=str(screenshot_dir(tmp_path) / "web-1024.png"))
    page.wait_for_function(
        "window.lockyardView.graph().some(e => e.classes.includes('shared'))",
        timeout=PAGE_WAIT_MS,
    )
    shared = [
        e["id"] for e in page.evaluate("window.lockyardView.graph()") if "shared" in e["classes"]
    ]
    assert sorted(shared) == ["h|__shared__|reader-1", "h|__shared__|reader-2"]
    assert page.problems == []


DURATION_SCALES = [
    0.0, 0.00000049, 0.0000421, 0.0000995, 0.000099, 0.00042, 0.00995, 0.0421, 0.42, 0.9994,
    0.9996, 4.5, 9.94, 9.96, 12.9, 59.99, 75, 303, 3599.9, 7620, 86399, 3 * 86400 + 14405,
]  # fmt: skip
"""Durations around every boundary of `format_duration`."""


def test_the_page_writes_durations_as_log_stats_and_top_do(page: Any) -> None:
    page.wait_for_function("window.LockyardFormat !== undefined", timeout=PAGE_WAIT_MS)
    written = page.evaluate("(all) => all.map(window.LockyardFormat.duration)", DURATION_SCALES)
    assert written == [format_duration(seconds) for seconds in DURATION_SCALES]


def test_names_that_hold_html_or_script_are_shown_as_text_and_never_run(
    page: Any, scene: Scene
) -> None:
    page.wait_for_function(
        "document.querySelectorAll('#locks tbody tr').length >= 4", timeout=PAGE_WAIT_MS
    )
    table = text_of(page, "#locks")
    assert HOSTILE_FILE in table
    assert HOSTILE_AGENT in table
    assert page.evaluate("window.pwned === undefined")
    assert page.locator("#locks img, #locks script").count() == 0
    page.fill("#filter", "pwned")  # the filter narrows the table to the hostile row
    page.wait_for_function("document.querySelectorAll('#locks tbody tr').length === 1")
    assert page.dialogs == []
    assert page.problems == []


def test_the_page_loads_nothing_from_elsewhere_and_forbids_inline_script(
    browser: Any,  # noqa: F811
    scene: Scene,
) -> None:
    context = browser.new_context()
    page = context.new_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    response = page.goto(scene.web.address)
    # A selector, not a predicate: without bypass_csp the page's policy forbids the eval that
    # Playwright's predicate polling uses (Chromium 156.0.8078.108 enforces it there).
    page.wait_for_selector("body[data-boards]", state="attached", timeout=PAGE_WAIT_MS)
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert all(url.startswith(scene.web.address) for url in requested), requested
    context.close()


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.parametrize(
    "query",
    [
        "from=yesterday",
        "from=nan",
        "to=1e999",
        "from=5&to=4",
        "from=1&from=2",
        "from=0&to=99999999",
        "window=3600",
        "from=" + "9" * 5000,
        "from=%ZZ",
    ],
)
def test_a_malformed_timeline_query_gets_a_400_that_says_what_to_pass(
    scene: Scene, query: str
) -> None:
    status, body = get(f"{scene.web.address}api/timeline?{query}")
    assert status == 400
    assert set(body) == {"error"}
    assert "\n" not in body["error"]


def test_writes_are_refused_the_page_is_read_only(scene: Scene) -> None:
    request = urllib.request.Request(f"{scene.web.address}api/board", method="POST", data=b"{}")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    assert refused.value.code == 405


# ---- a hostile journal ---------------------------------------------------------------------
# Names an agent or a file may carry: each would set window.pwned if the page ran it.
EVIL_AGENT = '<img src=x onerror="window.pwned=3">'
EVIL_FILE = "<script>window.pwned=4</script>.py"
EVIL_REASON = "<b onmouseover=window.pwned=5>bold</b>"
EVIL_CYCLE_FILE = "<svg onload=window.pwned=6>"
EVIL_LIVE_AGENT = "<iframe srcdoc='<script>parent.pwned=7</script>'>"


def journal_record(at: float, kind: str, agent: str, file: str, **extra: Any) -> JournalRecord:
    return JournalRecord(at, kind, "ns", agent, file, "1.1", 1, "h", **extra)


def hostile_lines(at: float) -> bytes:
    """What no writer of ours makes, but a damaged disk or a foreign program may leave."""
    torn = b'{"t":%.6f,"kind":"release","ns":"ns","agent":"torn-agent","fi' % at
    after_torn = encode(journal_record(at, "release", "agent-good", "src/after-torn.py", held=5.0))
    not_utf8 = (
        b'{"t":%.6f,"kind":"release","ns":"ns","agent":"\xff\xfe<script>window.pwned=8'
        b'</script>","file":"src/bad-bytes.py","session":"s","pid":1,"host":"h","held":1}\n' % at
    )
    lone_surrogate = (
        b'{"t":%.6f,"kind":"release","ns":"ns","agent":"lone-\\ud800-<i>x</i>",'
        b'"file":"src/surrogate.py","session":"s","pid":1,"host":"h","held":4}\n' % at
    )
    huge = (
        b'{"t":%.6f,"kind":"release","ns":"ns","agent":"huge","file":"' % at
        + b"<script>window.pwned=9</script>" * 200_000  # 6 MB on one line
        + b'","session":"s","pid":1,"host":"h","held":1}\n'
    )
    markup = b"<html><body onload=window.pwned=10><script>window.pwned=11</script>\n"
    return torn + after_torn + not_utf8 + lone_surrogate + huge + markup


@dataclass
class HostileJournal:
    lock_dir: Path
    denied_at: float
    """When the denied write (the first row's one marker) happened."""
    web: WebServer


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileJournal]:
    """`lockyard web` on a lock directory whose journal holds good records among torn,
    non-UTF-8, huge and markup lines, and names that carry HTML and script."""
    lock_dir = tmp_path_factory.mktemp("hostile") / "locks"
    LockStore(None, lock_dir)  # a lock directory as lockyard makes it
    at = time.time() - 600
    writer = JournalFiles(journal_dir(lock_dir))
    writer.append(journal_record(at, "release", "agent-good", "src/good.py", held=30.0))
    writer.append(
        journal_record(at + 1, "wait-end", "agent-waiter", "src/good.py", waited=20.0,
                       outcome="granted")
    )  # fmt: skip
    writer.append(
        journal_record(at + 2, "denied", EVIL_AGENT, EVIL_FILE, guard="write", reason=EVIL_REASON)
    )
    writer.append(
        journal_record(
            at + 3, "deadlock", EVIL_AGENT, EVIL_CYCLE_FILE, victim=EVIL_AGENT,
            cycle=(CycleStep(EVIL_AGENT, EVIL_CYCLE_FILE, "agent-good"),
                   CycleStep("agent-good", "src/good.py", EVIL_AGENT)),
        )
    )  # fmt: skip
    writer.close()
    with open(journal_dir(lock_dir) / ACTIVE, "ab") as raw:
        raw.write(hostile_lines(at + 4))
    writer = JournalFiles(journal_dir(lock_dir))
    writer.append(journal_record(at + 5, "release", "agent-good", "src/last.py", held=2.0))
    writer.close()
    made = HostileJournal(lock_dir, at + 2, WebServer("--lock-dir", str(lock_dir)))
    try:
        yield made
    finally:
        made.web.close()


GOOD_ROWS = [
    EVIL_FILE,  # "<" sorts first
    EVIL_CYCLE_FILE,
    "src/after-torn.py",
    "src/good.py",
    "src/last.py",
    "src/surrogate.py",
]


def test_a_journal_of_torn_non_utf8_huge_and_script_lines_shows_its_good_records_as_text(
    browser: Any,  # noqa: F811
    hostile: HostileJournal,
    tmp_path: Path,
) -> None:
    with watched_page(browser, hostile.web.address) as page:
        page.wait_for_function(
            f"window.LockyardTimeline.rows().length === {len(GOOD_ROWS)}", timeout=PAGE_WAIT_MS
        )
        assert page.evaluate("window.LockyardTimeline.rows()") == GOOD_ROWS
        assert page.evaluate("window.LockyardTimeline.counts()") == {
            "hold": 4, "wait": 1, "denied": 1, "deadlock": 1
        }  # fmt: skip
        # A person hovers over the denied write: its names and reason, as plain text.
        box = page.locator("#timeline-scroll").bounding_box()
        marker_x = page.evaluate(
            """([left, width, at]) => {
                const to = Date.now() / 1000, from = to - 3600, plot = width - 198;
                return left + 190 + (at - from) / (to - from) * plot;
            }""",
            [box["x"], box["width"], hostile.denied_at],
        )
        page.mouse.move(marker_x, box["y"] + 22 + 10)  # the first row, below the time axis
        page.wait_for_selector("#tooltip:not([hidden])", timeout=PAGE_WAIT_MS)
        tip = text_of(page, "#tooltip")
        assert f"{EVIL_AGENT} → {EVIL_FILE}" in tip
        assert f"write: {EVIL_REASON}" in tip
        assert page.locator("#tooltip *").count() == 0
        page.screenshot(path=str(screenshot_dir(tmp_path) / "web-hostile-journal.png"))

        # Records written while the page is open, behind more hostile lines, are pushed.
        with open(journal_dir(hostile.lock_dir) / ACTIVE, "ab") as raw:
            raw.write(hostile_lines(time.time()))
        writer = JournalFiles(journal_dir(hostile.lock_dir))
        writer.append(
            journal_record(
                time.time(), "deadlock", EVIL_LIVE_AGENT, "src/live.py", victim=EVIL_LIVE_AGENT,
                cycle=(CycleStep(EVIL_LIVE_AGENT, "src/live.py", EVIL_AGENT),
                       CycleStep(EVIL_AGENT, EVIL_FILE, EVIL_LIVE_AGENT)),
            )
        )  # fmt: skip
        writer.close()
        page.wait_for_selector("#deadlock-list li.past", timeout=PAGE_WAIT_MS)
        listed = text_of(page, "#deadlock-list")
        assert f"{EVIL_LIVE_AGENT} → src/live.py → {EVIL_AGENT} → {EVIL_FILE} →" in listed
        assert page.locator("#deadlock-list .victim").inner_text() == EVIL_LIVE_AGENT
        assert page.locator("body img, body iframe, body svg, body script").count() == 0
        assert page.evaluate("window.pwned === undefined")
        assert page.dialogs == []
        assert page.problems == []


def test_a_hostile_journal_leaves_the_timeline_answer_whole_json(
    hostile: HostileJournal,
) -> None:
    status, body = get(f"{hostile.web.address}api/timeline")
    assert status == 200
    agents = {item["a"] for item in body["items"]}
    assert "lone-\ufffd-<i>x</i>" in agents  # a lone surrogate escape, as U+FFFD
    assert not any("pwned=8" in name or "pwned=9" in name for name in agents)
