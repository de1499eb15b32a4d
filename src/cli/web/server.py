"""`lockyard web`'s ASGI application (Starlette), served by uvicorn.

Read-only: GET and HEAD only. The page is static (its assets ship inside the package: no
CDN, nothing fetched from the internet); its data comes from `/events` (server-sent events:
a board whenever the store changes) and `/api/...` (JSON). Every response forbids inline
scripts and any other origin (Content-Security-Policy), so a file or agent name that holds
HTML or script is shown as text and never runs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any
from urllib.parse import parse_qs

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ...infra.lockstore import open_journal
from ..views.feed import BoardFeed
from .access import COOKIE, Access
from .hub import BoardHub, JournalFanout
from .timeline import TimelineQueryError, Window, parse_window, read_window

TimelineReader = Callable[[Window], dict[str, Any]]
"""Reads the journal for a window: {"items": [...], "truncated": bool, "note": str}."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

KEEP_ALIVE_SECONDS = 15.0
"""A comment line this often on a quiet event stream keeps proxies from closing it."""

CYTOSCAPE_STYLE_HASH = b"'sha256-pgvDUBa4IjFA2yuSJ2cqcyxmNYJMborsd0ORcRv9vw8='"
"""The one <style> element cytoscape.js adds (its container's position), allowed by its hash:
no other inline style, and no inline script at all, can run."""

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self' " + CYTOSCAPE_STYLE_HASH + b"; "
        b"img-src 'self' data:; "
        b"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


def static_dir() -> Any:
    return files("lockyard.cli.web") / "static"


def create_app(
    feed: BoardFeed | None,
    access: Access,
    hub: BoardHub | None = None,
    timeline: TimelineReader | None = None,
) -> ASGIApp:
    """The application: `feed` fills the hub while the server runs (None: a hub filled by
    the caller, as in tests); `timeline` reads the journal (None: there is none)."""
    hub = hub if hub is not None else BoardHub()
    fanout = JournalFanout()
    if timeline is None and feed is not None:
        timeline = journal_timeline(feed)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            if feed is not None:
                group.start_soon(hub.run, feed)
                group.start_soon(fanout.run, feed)
            yield
            group.cancel_scope.cancel()

    async def index(_request: Request) -> Response:
        return FileResponse(str(static_dir() / "index.html"), media_type="text/html")

    async def board(_request: Request) -> Response:
        await hub.after(0, KEEP_ALIVE_SECONDS)  # the first board, if it is still being read
        return Response(hub.board_json or "null", media_type="application/json")

    async def events(_request: Request) -> Response:
        return StreamingResponse(
            _event_stream(hub, fanout),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    async def timeline_answer(request: Request) -> Response:
        try:
            window = parse_window(parse_qs(request.url.query, keep_blank_values=True))
        except TimelineQueryError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        if timeline is None:
            answer = {"items": [], "truncated": False, "note": "no journal to read"}
        else:
            answer = await anyio.to_thread.run_sync(timeline, window)
        return JSONResponse(answer | {"from": window.start, "to": window.end})

    app = Starlette(
        routes=[
            Route("/", index, methods=["GET", "HEAD"]),
            Route("/api/board", board, methods=["GET", "HEAD"]),
            Route("/api/timeline", timeline_answer, methods=["GET", "HEAD"]),
            Route("/events", events, methods=["GET"]),
            Mount("/static", StaticFiles(directory=str(static_dir())), name="static"),
        ],
        lifespan=lifespan,
    )
    return Guard(app, access)


async def _event_stream(hub: BoardHub, fanout: JournalFanout) -> AsyncIterator[str]:
    """Boards (the newest each time) and journal items (every one) as they come."""
    yield "retry: 1000\n\n"
    sent = 0
    position = max(fanout.first, fanout.end - fanout.CATCH_UP)
    while True:
        async with anyio.create_task_group() as group:

            async def wake_on_board(version: int) -> None:
                await hub.after(version, KEEP_ALIVE_SECONDS)
                group.cancel_scope.cancel()

            async def wake_on_journal(seen: int) -> None:
                await fanout.after(seen, KEEP_ALIVE_SECONDS)
                group.cancel_scope.cancel()

            group.start_soon(wake_on_board, sent)
            group.start_soon(wake_on_journal, position)
        quiet = True
        if hub.version != sent:
            sent = hub.version
            quiet = False
            yield f"event: board\ndata: {hub.board_json}\n\n"
        items, position = fanout.since(position)
        if items:
            quiet = False
            yield f"event: journal\ndata: {json.dumps(items, separators=(',', ':'))}\n\n"
        if quiet:
            yield ": still here\n\n"


def journal_timeline(feed: BoardFeed) -> TimelineReader:
    """Reads the window's records from the journal of the store `feed` has opened."""

    def read(window: Window) -> dict[str, Any]:
        if feed.store is None:
            # `store: false`: the page asks again once a board says the store is there.
            return {"items": [], "truncated": False, "note": "no lock store yet", "store": False}
        journal = open_journal(feed.store)
        try:
            items, truncated = read_window(journal, window)
        finally:
            journal.close()
        return {"items": items, "truncated": truncated, "note": "", "store": True}

    return read


class Guard:
    """Every request passes here first: read-only methods, the access rules, and the
    security headers on every response."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # the lifespan
            return
        headers = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in scope.get("headers", [])
        }
        query_token = _query_token(scope.get("query_string", b""))

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        if scope["method"] not in ("GET", "HEAD"):
            await _plain(send_secured, 405, "read-only: only GET and HEAD are served")
            return
        if not self.access.allows(headers, query_token):
            if self.access.token is None:
                await _plain(send_secured, 403, "this page answers requests to localhost only")
            else:
                await _plain(
                    send_secured, 401, "a token is needed: open the page once as /?token=TOKEN"
                )
            return
        if query_token is not None and self.access.token is not None and scope["path"] == "/":
            await _set_cookie_and_reload(send_secured, self.access.token)
            return
        await self.app(scope, receive, send_secured)


def _query_token(query_string: bytes) -> str | None:
    try:
        values = parse_qs(query_string.decode("latin-1"), keep_blank_values=True).get("token")
    except ValueError:
        return None
    return values[-1] if values else None


async def _plain(send: Send, status: int, text: str) -> None:
    body = json.dumps({"error": text}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(body)),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _set_cookie_and_reload(send: Send, token: str) -> None:
    """Keep the token in an HttpOnly cookie and load `/` again: the token leaves the
    address bar and the history, and the page's scripts never read it."""
    cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/".encode()
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", b"/"), (b"set-cookie", cookie), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})
