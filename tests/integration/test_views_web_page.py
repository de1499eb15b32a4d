"""`lockyard web` as a person sees it: headless Chromium opens the page while real agent
processes hold, queue and deadlock on a real lock directory, and checks what appears and
how it follows the agents. Screenshots are saved (`LOCKYARD_SCREENSHOTS`, else tmp)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import WebServer, browser, screenshot_dir  # noqa: F401
from cli_support import Agents

from lockyard.infra.lockstore import LockStore

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


@pytest.fixture
def page(browser: Any, scene: Scene) -> Iterator[Any]:  # noqa: F811
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
    opened.goto(scene.web.address)
    yield opened
    context.close()


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
    page.wait_for_function("window.lockyardView.boards() > 0", timeout=PAGE_WAIT_MS)
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
