"""A hostile sandbox: everything it can plant in its IPC folder. The host must not crash, must
not touch a file outside the sandbox's folder, and must keep serving the other sandboxes."""

from __future__ import annotations

import fcntl
import json
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from ipc_support import answer, call_body, running_host, sandbox, write_request

from lockyard.infra.lockstore.lockdir.store import LockStore
from lockyard.infra.transports.ipc import host as host_module
from lockyard.infra.transports.ipc.host import IpcHost
from lockyard.infra.transports.ipc.wire import MAX_REQUEST_BYTES
from polling_support import wait_until_async

pytestmark = pytest.mark.anyio


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> LockStore:
    return LockStore(repo, lock_dir)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "ipc"
    path.mkdir()
    return path


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A host file outside every sandbox folder."""
    path = tmp_path / "host-secret.txt"
    path.write_text("host only\n")
    return path


def text(path: Path) -> str:
    return path.read_text()


def release_all(request_id: str) -> dict[str, Any]:
    return call_body(request_id, "lock_release", {"all": True})


async def still_serves(root: Path, name: str = "bystander") -> None:
    """Another sandbox is answered normally."""
    folder = sandbox(root, name)
    write_request(folder, f"{name}-ok", release_all(f"{name}-ok"))
    reply = await answer(folder, f"{name}-ok")
    assert reply["ok"] is True
    assert json.loads(reply["result"]["text"]) == {"released": [], "count": 0}


async def test_a_symlinked_request_is_refused_unread_and_its_target_untouched(
    store: LockStore, root: Path, secret: Path
) -> None:
    folder = sandbox(root, "evil")
    (folder / "requests").mkdir()
    os.symlink(secret, folder / "requests" / "symlinked.json")
    async with running_host(root, store):
        reply = await answer(folder, "symlinked")
        await still_serves(root)
    assert reply["error"]["code"] == "not_a_regular_file"
    assert text(secret) == "host only\n"
    assert not (folder / "requests" / "symlinked.json").is_symlink()  # the link itself removed


async def test_a_hard_linked_request_is_refused_and_the_other_name_kept(
    store: LockStore, root: Path
) -> None:
    folder = sandbox(root, "evil")
    (folder / "requests").mkdir()
    original = folder / "keep.json"
    original.write_text(json.dumps(release_all("hardlinked")))
    os.link(original, folder / "requests" / "hardlinked.json")
    async with running_host(root, store):
        reply = await answer(folder, "hardlinked")
    assert reply["error"]["code"] == "not_a_regular_file"
    assert "links" in reply["error"]["message"]
    assert json.loads(original.read_text())["id"] == "hardlinked"


async def test_a_fifo_or_a_directory_in_requests_does_not_block_the_host(
    store: LockStore, root: Path
) -> None:
    folder = sandbox(root, "evil")
    (folder / "requests").mkdir()
    os.mkfifo(folder / "requests" / "namedpipe.json")
    (folder / "requests" / "adirectory.json").mkdir()
    async with running_host(root, store):
        pipe = await answer(folder, "namedpipe")
        directory = await answer(folder, "adirectory")
        await still_serves(root)
    assert pipe["error"]["code"] == "not_a_regular_file"
    assert directory["error"]["code"] == "not_a_regular_file"


async def test_a_gigabyte_request_is_refused_without_being_read(
    store: LockStore, root: Path
) -> None:
    folder = sandbox(root, "evil")
    (folder / "requests").mkdir()
    huge = folder / "requests" / "gigabytes.json"
    huge.touch()
    os.truncate(huge, 2**30)  # sparse: a gigabyte long, costs no disk
    over = folder / "requests" / ".justover.tmp"
    over.write_bytes(b" " * (MAX_REQUEST_BYTES + 1))
    over.rename(folder / "requests" / "justover.json")
    async with running_host(root, store):
        huge_reply = await answer(folder, "gigabytes")
        over_reply = await answer(folder, "justover")
        await still_serves(root)
    assert huge_reply["error"]["code"] == "too_large"
    assert over_reply["error"]["code"] == "too_large"
    assert list((folder / "requests").iterdir()) == []


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b'{"version": 1, "id": "badutf8x", "kind": "call", "tool": "\xff\xfe"}', "UTF-8"),
        (b"[" * 30_000 + b"]" * 30_000, "nested too deeply"),
        (
            b'{"version":1,"id":"badutf8x","kind":"call","tool":"lock_release","arguments":{"a":'
            + b"[" * 30_000
            + b"]" * 30_000
            + b"}}",
            "nested too deeply",
        ),
        (b"not json at all", "not JSON"),
        (b'["a", "list"]', "one JSON object"),
        (b'{"version": 2, "id": "badutf8x", "kind": "call"}', "version 1"),
        (b'{"version": 1, "id": "otherid1", "kind": "call", "tool": "x"}', "file name"),
        (b'{"version": 1, "id": "badutf8x", "kind": "call", "tool": 5}', '"tool"'),
        (b'{"version": 1, "id": "badutf8x", "kind": "list_tools", "tool": "x"}', "takes no"),
        (b'{"version": 1, "id": "badutf8x", "kind": "exec"}', '"kind"'),
        (
            b'{"version": 1, "id": "badutf8x", "kind": "call", "tool": "x", "arguments": []}',
            "object",
        ),
    ],
)
async def test_malformed_requests_are_refused_with_what_to_send_instead(
    store: LockStore, root: Path, raw: bytes, says: str
) -> None:
    folder = sandbox(root, "evil")
    write_request(folder, "badutf8x", raw)
    async with running_host(root, store):
        reply = await answer(folder, "badutf8x")
        await still_serves(root)
    assert reply["ok"] is False
    assert says in reply["error"]["message"]


async def test_a_flood_is_rate_limited_and_the_other_sandbox_is_served_within_its_turn(
    store: LockStore, root: Path
) -> None:
    flood = sandbox(root, "flood")
    (flood / "requests").mkdir()
    for i in range(2000):
        (flood / "requests" / f"flood{i:05d}.json").write_text(
            json.dumps(release_all(f"flood{i:05d}"))
        )
    calm = sandbox(root, "calm")
    write_request(calm, "calmcall", release_all("calmcall"))
    async with running_host(root, store, per_round=16) as host:
        assert isinstance(host, IpcHost)
        reply = await answer(calm, "calmcall")
        left = len(list((flood / "requests").iterdir()))  # served round-robin: not after all
        await wait_until_async(lambda: not any((flood / "requests").iterdir()), within=120)
        await still_serves(root)
    assert reply["ok"] is True
    assert left > 1000
    codes = [
        json.loads(path.read_bytes()).get("error", {}).get("code")
        for path in (flood / "responses").iterdir()
        if not path.name.startswith(".")
    ]
    assert codes.count("rate_limited") > 0
    assert len(codes) <= 256  # unread answers are capped, the oldest deleted


async def test_planted_response_files_are_replaced_never_written_through(
    store: LockStore, root: Path, secret: Path
) -> None:
    folder = sandbox(root, "evil")
    (folder / "responses").mkdir()
    os.symlink(secret, folder / "responses" / "planted1.json")
    (folder / "responses" / "planted2.json").mkdir()
    (folder / "responses" / "planted2.json" / "keep").write_text("x")
    async with running_host(root, store):
        write_request(folder, "planted1", release_all("planted1"))
        write_request(folder, "planted2", release_all("planted2"))
        reply = await answer(folder, "planted1")
        await still_serves(root)
    assert reply["ok"] is True
    assert text(secret) == "host only\n"
    assert text(folder / "responses" / "planted2.json" / "keep") == "x"  # left alone


async def test_requests_or_responses_replaced_by_symlinks_lead_nowhere(
    store: LockStore, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victimfile.json").write_text(json.dumps(release_all("victimfile")))
    folder = sandbox(root, "evil")
    os.symlink(outside, folder / "requests")
    os.symlink(outside, folder / "responses")
    async with running_host(root, store):
        await still_serves(root)
        await anyio.sleep(0.3)  # a few passes of the host over the evil folder
    assert sorted(p.name for p in outside.iterdir()) == ["victimfile.json"]  # unread, unanswered


async def test_a_symlinked_or_misnamed_sandbox_folder_is_not_served(
    store: LockStore, root: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, root / "linked")
    sandbox(root, "bad\nname")
    async with running_host(root, store) as host:
        await still_serves(root)
        assert set(host.sandboxes) == {"bystander"}
    assert list(elsewhere.iterdir()) == []


async def test_a_request_held_unopenable_for_too_long_is_answered_unreadable(
    store: LockStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lease the sandbox never gives up (the kernel breaks it by force after its
    lease-break time, 45 s by default) ends in an answer, not in a request kept forever."""
    monkeypatch.setattr(host_module, "GIVE_UP_OPEN_SECONDS", 0.5)
    folder = sandbox(root, "leaser")
    (folder / "requests").mkdir()
    leased = folder / "requests" / ".leased"
    leased.write_bytes(json.dumps(release_all("held-lease")).encode())
    previous = signal.signal(signal.SIGIO, lambda *_: None)
    fd = os.open(leased, os.O_RDONLY)
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
        async with running_host(root, store, rescan_interval=0.1):
            os.rename(leased, folder / "requests" / "held-lease.json")
            reply = await answer(folder, "held-lease")
            await still_serves(root)
    finally:
        os.close(fd)
        signal.signal(signal.SIGIO, previous)
    assert reply["ok"] is False
    assert reply["error"]["code"] == "unreadable"
    assert "no lease or lock held on it" in reply["error"]["message"]
    assert not (folder / "requests" / "held-lease.json").exists()
