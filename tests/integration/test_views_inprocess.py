"""`lockyard top` and `lockyard web` in this process, on a real lock directory: the Textual
app driven by its pilot at 80x24, the ASGI app through Starlette's test client."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from starlette.testclient import TestClient

from lockyard.cli.top.app import TopApp
from lockyard.cli.views.feed import BoardFeed, read_board, store_opener
from lockyard.cli.web.access import COOKIE, Access
from lockyard.cli.web.hub import BoardHub
from lockyard.cli.web.server import create_app
from lockyard.cli.web.timeline import Window
from lockyard.infra.lockstore import LockStore
from polling_support import wait_until_async

TOKEN = "a-token-of-sixteen-or-more"


@pytest.fixture
def store(lock_dir: Path) -> LockStore:
    held = LockStore(None, lock_dir)
    assert held.try_lock("__a__", "agent-1")
    assert held.try_lock("__b__", "agent-2")
    return held


@pytest.mark.anyio
async def test_top_filters_by_text_and_by_contention_and_quits(store: LockStore) -> None:
    app = TopApp(BoardFeed(store_opener(store.lock_dir, None)))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_async(lambda: len(app.board.locks) == 2)
        await pilot.press("slash", "_", "_", "b", "enter")
        assert app.filters.text == "__b"
        await pilot.press("escape", "c")
        assert (app.filters.text, app.filters.contended_only) == ("", True)
        await pilot.press("c", "q")
    assert app.return_code == 0


def test_a_board_names_holders_with_their_fence_and_finds_no_cycle(store: LockStore) -> None:
    board = read_board(LockStore(None, store.lock_dir, read_only=True))
    assert [(row.name, row.holder) for row in board.locks] == [
        ("__a__", "agent-1"),
        ("__b__", "agent-2"),
    ]
    assert board.cycles == ()
    assert board.to_dict()["counts"] == {
        "locks": 2,
        "held": 2,
        "waiting": 0,
        "agents": 2,
        "deadlocks": 0,
    }


def served(store: LockStore, access: Access, **reader: object) -> TestClient:
    hub = BoardHub()
    hub.publish(read_board(store))
    return TestClient(create_app(None, access, hub, **reader), base_url="http://127.0.0.1")  # type: ignore[arg-type]


def test_the_board_and_the_page_are_served_with_a_strict_security_policy(
    store: LockStore,
) -> None:
    with served(store, Access(None)) as client:
        page = client.get("/")
        assert page.status_code == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-content-type-options"] == "nosniff"
        board = client.get("/api/board").json()
        assert [lock["holder"] for lock in board["locks"]] == ["agent-1", "agent-2"]
        assert client.get("/static/vendor/cytoscape.LICENSE").status_code == 200
        assert client.post("/api/board").status_code == 405
        rebinding = client.get("/api/board", headers={"host": "evil.example"})
        assert rebinding.status_code == 403


def test_a_token_is_taken_once_from_the_address_then_kept_in_an_httponly_cookie(
    store: LockStore,
) -> None:
    with served(store, Access(TOKEN)) as client:
        assert client.get("/api/board").status_code == 401
        first = client.get(f"/?token={TOKEN}", follow_redirects=False)
        assert first.status_code == 303
        assert first.headers["location"] == "/"
        assert "HttpOnly" in first.headers["set-cookie"]
        client.cookies.set(COOKIE, TOKEN)
        page = client.get("/")
        assert page.status_code == 200
        assert TOKEN not in page.text
        assert TOKEN not in client.get("/api/board").text
        assert client.get("/static/app.js").status_code == 200


def test_the_timeline_reads_the_journal_for_the_window_asked(store: LockStore) -> None:
    asked: list[Window] = []

    def reader(window: Window) -> dict[str, object]:
        asked.append(window)
        return {"items": [], "truncated": False, "note": ""}

    with served(store, Access(None), timeline=reader) as client:
        answer = client.get("/api/timeline?from=100&to=200")
        assert answer.status_code == 200
        assert (answer.json()["from"], answer.json()["to"]) == (100.0, 200.0)
        assert asked == [Window(100.0, 200.0, live=False)]
        assert client.get("/api/timeline?from=x").status_code == 400


@pytest.mark.anyio
async def test_the_hub_hands_each_page_the_latest_board_only(store: LockStore) -> None:
    hub = BoardHub()
    assert await hub.after(0, 0.01) == 0  # nothing yet: a page waits
    board = await anyio.to_thread.run_sync(read_board, store)
    hub.publish(board)
    hub.publish(board)
    assert await hub.after(0, 0.01) == 2  # a slow page skips to the newest
    with anyio.move_on_after(0.05):
        assert await hub.after(2, 10) == 2
