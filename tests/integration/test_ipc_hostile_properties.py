"""Property: whatever mix of files a sandbox plants in requests/, the host answers every entry
with a request id exactly once (valid requests run, everything else refused with a code),
touches nothing outside the sandbox folder, and keeps serving another sandbox."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ipc_support import answer, call_body, running_host, sandbox, write_request

from lockyard.infra.lockstore.lockdir.store import LockStore
from lockyard.infra.transports.ipc.host import IpcHost
from polling_support import wait_until_async

pytestmark = pytest.mark.anyio

KINDS = (
    "call",
    "list_tools",
    "symlink",
    "hardlink",
    "fifo",
    "huge",
    "garbage",
    "full_directory",
    "extra_field",
    "wrong_version",
    "not_a_request_name",
)
VALID = {"call", "list_tools"}


def plant(requests: Path, outside: Path, index: int, kind: str, garbage: bytes) -> str | None:
    """Put one entry in `requests/`; the request id it carries, or None."""
    request_id = f"plant{index:04d}"
    path = requests / f"{request_id}.json"
    body: dict[str, Any] = call_body(request_id, "lock_acquire", {"filepaths": [f"f{index}.py"]})
    if kind == "list_tools":
        body = {"version": 1, "id": request_id, "kind": "list_tools"}
    elif kind == "extra_field":
        body["sandbox"] = "bystander"
    elif kind == "wrong_version":
        body["version"] = 99
    if kind in ("call", "list_tools", "extra_field", "wrong_version"):
        path.write_text(json.dumps(body))
    elif kind == "symlink":
        os.symlink(outside / "secret.txt", path)
    elif kind == "hardlink":
        os.link(outside / "secret.txt", path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "huge":
        path.touch()
        os.truncate(path, 10**9)
    elif kind == "garbage":
        path.write_bytes(garbage)
    elif kind == "full_directory":
        path.mkdir()
        (path / "inside").write_text("x")
    else:
        (requests / f"junk-{index}.txt").write_text("not a request")
        return None
    return request_id


def snapshot(outside: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in outside.iterdir()}


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=12),
    garbage=st.binary(max_size=64),
)
async def test_every_planted_entry_is_answered_once_and_nothing_outside_changes(
    kinds: list[str], garbage: bytes
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "repo").mkdir()
        outside = base / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_text("host only\n")
        root = base / "ipc"
        evil = sandbox(root, "evil")
        requests = evil / "requests"
        requests.mkdir()
        expected = {
            request_id: kind
            for index, kind in enumerate(kinds)
            if (request_id := plant(requests, outside, index, kind, garbage)) is not None
        }
        before = snapshot(outside)
        store = LockStore(base / "repo", base / "locks")
        async with running_host(root, store, rescan_interval=0.05) as host:  # many passes
            assert isinstance(host, IpcHost)

            def answered() -> bool:
                names = {p.name for p in (evil / "responses").iterdir()}
                return {f"{i}.json" for i in expected} <= names

            await wait_until_async(answered)
            bystander = sandbox(root, "bystander")
            write_request(
                bystander, "bystander1", call_body("bystander1", "lock_release", {"all": True})
            )
            assert (await answer(bystander, "bystander1"))["ok"] is True
            written = list(host.sandboxes["evil"].unclaimed)
        replies = {
            request_id: json.loads((evil / "responses" / f"{request_id}.json").read_bytes())
            for request_id in expected
        }
        assert sorted(written) == sorted(f"{i}.json" for i in expected)  # once each
        for request_id, kind in expected.items():
            assert replies[request_id]["ok"] is (kind in VALID), (kind, replies[request_id])
            if kind == "call":
                assert replies[request_id]["result"]["is_error"] is False
        assert snapshot(outside) == before
        assert sorted(p.name for p in requests.iterdir()) == sorted(
            f"{i}.json" for i, kind in expected.items() if kind == "full_directory"
        )
        store.close()
