"""Helpers for the IPC tests: a host running in this process, sandbox folders, raw requests."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from lockyard.infra.lockstore.backend import LockBackend
from lockyard.infra.transports.ipc.host import HostSettings, IpcHost
from polling_support import wait_until_async


@asynccontextmanager
async def running_host(
    root: Path, store: LockBackend, *, admin: str | None = None, **settings: Any
) -> AsyncIterator[IpcHost]:
    """An `IpcHost` serving `root` until the block ends (then it releases every lock)."""
    settings.setdefault("status_interval", 0.2)
    host = IpcHost(root, store, admin=admin, settings=HostSettings(**settings))
    async with anyio.create_task_group() as group:
        await group.start(host.run)
        try:
            yield host
        finally:
            group.cancel_scope.cancel()


def sandbox(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_request(folder: Path, request_id: str, body: bytes | dict[str, Any]) -> Path:
    """A request file written the way a careful client does (temp name, then rename)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    (folder / "requests").mkdir(exist_ok=True)
    temp = folder / "requests" / f".{request_id}.tmp"
    temp.write_bytes(data)
    target = folder / "requests" / f"{request_id}.json"
    os.rename(temp, target)
    return target


def call_body(request_id: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"version": 1, "id": request_id, "kind": "call", "tool": tool, "arguments": arguments}


async def answer(folder: Path, request_id: str, limit: float = 20.0) -> dict[str, Any]:
    """The host's response to `request_id` (read and removed), waited for by polling: the test
    side of the protocol, independent of the client under test."""
    path = folder / "responses" / f"{request_id}.json"
    await wait_until_async(
        lambda: path.is_file() and not path.is_symlink(),
        f"the response to {request_id}",
        within=limit,
    )
    data: dict[str, Any] = json.loads(path.read_bytes())
    path.unlink()
    return data
