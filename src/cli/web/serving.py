"""Running the page's server: on the command's own thread (`lockyard web`), or on a thread
beside a demo run (`lockyard demo --web`), whose event loop it then never touches."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import anyio
import uvicorn

from .._errors import CliError, ExitCode
from ..views.feed import BoardFeed
from .access import Access
from .server import create_app


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); a one-line error when that cannot be."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise CliError(
            f"cannot listen on {host}: {error.strerror}", ExitCode.USAGE, "pass --host ADDRESS"
        ) from None
    family, kind, proto, _name, address = infos[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
        listener.listen(128)
    except OSError as error:
        listener.close()
        raise CliError(
            f"cannot listen on {host} port {port}: {error.strerror}",
            ExitCode.USAGE,
            "pass another --port (0 picks a free one)",
        ) from None
    return listener


def address_of(listener: socket.socket) -> str:
    host, port = listener.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def _server(feed: BoardFeed, access: Access) -> uvicorn.Server:
    config = uvicorn.Config(
        create_app(feed, access),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=1,  # open event streams never end by themselves
    )
    return uvicorn.Server(config)


async def _serve(
    server: uvicorn.Server, listener: socket.socket, on_ready: Callable[[str], None]
) -> None:
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve, [listener])
        while not server.started:
            if server.should_exit:
                return
            await anyio.sleep(0.02)
        on_ready(address_of(listener))


def serve_forever(
    feed: BoardFeed, access: Access, listener: socket.socket, on_ready: Callable[[str], None]
) -> None:
    """Serve until Ctrl-C or SIGTERM (uvicorn's own handlers end it cleanly)."""
    anyio.run(_serve, _server(feed, access), listener, on_ready)


class ServerThread:
    """The page served from a thread of its own; `stop()` ends it."""

    def __init__(self, feed: BoardFeed, access: Access, listener: socket.socket) -> None:
        self.address = address_of(listener)
        self._server = _server(feed, access)
        self._listener = listener
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lockyard-web", daemon=True)

    def _run(self) -> None:
        anyio.run(_serve, self._server, self._listener, lambda _address: self._ready.set())

    def start(self, timeout: float = 30.0) -> ServerThread:
        self._thread.start()
        self._ready.wait(timeout)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
