"""Helpers for the IPC tests: a host running in this process or as a `lockyard ipc-host`
process, sandbox folders, raw requests, a heartbeat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from lockyard.infra.lockstore.backend import LockBackend
from lockyard.infra.transports.ipc.host import HostSettings, IpcHost
from polling_support import wait_until, wait_until_async

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


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


def answer_now(folder: Path, request_id: str, limit: float = 30.0) -> dict[str, Any]:
    """`answer`, blocking the thread (for tests that drive a host process)."""
    path = folder / "responses" / f"{request_id}.json"
    wait_until(
        lambda: path.is_file() and not path.is_symlink(),
        f"the response to {request_id}",
        within=limit,
    )
    data: dict[str, Any] = json.loads(path.read_bytes())
    path.unlink()
    return data


def result_of(response: dict[str, Any]) -> dict[str, Any]:
    """The tool result a successful response carries, parsed."""
    assert response["ok"] is True, response
    assert response["result"]["is_error"] is False, response["result"]["text"]
    data: dict[str, Any] = json.loads(response["result"]["text"])
    return data


@dataclass
class HostProcess:
    """A `lockyard ipc-host` process; its stderr (the log) goes to a file."""

    process: subprocess.Popen[bytes]
    log_file: Path

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")

    def running(self) -> bool:
        return self.process.poll() is None


def child_env(**extra: str) -> dict[str, str]:
    env = {"PATH": os.environ["PATH"], **extra}
    env.update({k: v for k, v in os.environ.items() if k.startswith(("COVERAGE_", "PYTHONPATH"))})
    return env


@contextmanager
def host_process(
    root: Path, repo: Path, *options: str, serving: tuple[str, ...] = ()
) -> Iterator[HostProcess]:
    """`lockyard ipc-host --root ROOT --repo REPO *options` at DEBUG level, once it serves
    each folder named in `serving` (its `host.json` is there); stopped at the end."""
    log_file = root.parent / f"ipc-host-{os.urandom(4).hex()}.log"
    with log_file.open("wb") as log:
        process = subprocess.Popen(
            [LOCKYARD, "ipc-host", "--root", str(root), "--repo", str(repo),
             "--log-level", "DEBUG", *options],
            env=child_env(), stderr=log, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    host = HostProcess(process, log_file)
    try:
        statuses = [root / name / "host.json" for name in serving]
        # A start (imports, the first scan) can take a minute beside a full test run.
        wait_until(
            lambda: all(s.is_file() for s in statuses) or not host.running(), host.log, within=120
        )
        assert host.running(), host.log()
        yield host
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(30)


@contextmanager
def heartbeat(folder: Path, interval: float = 0.1) -> Iterator[None]:
    """The sandbox's heartbeat file rewritten every `interval` seconds while the block runs,
    as a live `serve --ipc` does; silence after it."""
    stop = threading.Event()

    def beat() -> None:
        count = 0
        while not stop.is_set():
            count += 1
            temp = folder / f".heartbeat.{count}"
            temp.write_text(f"test {count}\n")
            os.rename(temp, folder / "heartbeat")
            stop.wait(interval)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
