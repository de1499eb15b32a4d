"""A `lockyard ipc-host` process against sandboxes that misbehave: a request id used twice at
once, a request file the host cannot open yet. Real IPC folders, a real host process, a real
lock directory; the test writes the sandbox's side of the protocol by hand."""

from __future__ import annotations

import fcntl
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from ipc_support import (
    answer_now,
    call_body,
    heartbeat,
    host_process,
    result_of,
    sandbox,
    write_request,
)

from lockyard.infra.lockstore.lockdir.store import LockStore
from polling_support import wait_until


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> Iterator[LockStore]:
    for name in ("a.py", "b.py"):
        (repo / name).write_text(f"# {name}\n")
    with LockStore(repo, lock_dir) as opened:
        yield opened


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "ipc"
    (path / "bob").mkdir(parents=True)
    return path


def test_a_request_id_reused_while_its_call_waits_is_refused_and_hides_no_call(
    store: LockStore, repo: Path, lock_dir: Path, root: Path
) -> None:
    bob = sandbox(root, "bob")
    assert store.try_lock("a.py", "outsider")
    wait_for_a = call_body("reused-id", "lock_acquire", {"filepaths": ["a.py"],
                                                         "timeout_seconds": 600})  # fmt: skip
    with host_process(root, repo, "--lock-dir", str(lock_dir), "--stale-after", "1",
                      serving=("bob",)) as host:  # fmt: skip
        with heartbeat(bob):
            write_request(bob, "reused-id", wait_for_a)
            wait_until(lambda: ("bob", "a.py") in store.snapshot().waits, "bob's wait for a.py")
            write_request(bob, "reused-id", wait_for_a)  # the same id, its first call running
            refused = answer_now(bob, "reused-id")
        # Silence: the reclaim must cancel the first call, the only one that runs.
        reclaimed = answer_now(bob, "reused-id")
        assert ("bob", "a.py") not in store.snapshot().waits, "no wait of bob is left"
        assert store.release("a.py", "outsider")
        assert store.acquire("a.py", "next", timeout_seconds=30), "no hidden call took a.py"
        assert host.running(), host.log()
    assert refused["ok"] is False
    assert refused["error"]["code"] == "bad_request"
    assert "reused-id" in refused["error"]["message"]
    assert "new id" in refused["error"]["message"]
    assert reclaimed["error"]["code"] == "reclaimed"


def test_a_request_the_host_cannot_open_yet_is_answered_once_it_can(
    store: LockStore, repo: Path, lock_dir: Path, root: Path
) -> None:
    """A write lease on the request file makes the host's open fail with EAGAIN until the
    lease is given up: the host retries the file, it never drops it unanswered."""
    bob = sandbox(root, "bob")
    (bob / "requests").mkdir()
    leased = bob / "requests" / ".leased"
    leased.write_bytes(
        b'{"version":1,"id":"under-lease","kind":"call","tool":"lock_acquire",'
        b'"arguments":{"filepaths":["a.py"],"timeout_seconds":0}}'
    )
    previous = signal.signal(signal.SIGIO, lambda *_: None)  # the lease break's signal
    fd = os.open(leased, os.O_RDONLY)
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
        with host_process(root, repo, "--lock-dir", str(lock_dir),
                          serving=("bob",)) as host, heartbeat(bob):  # fmt: skip
            os.rename(leased, bob / "requests" / "under-lease.json")
            # The host tried to open it: the kernel asks us to give the lease up.
            wait_until(lambda: fcntl.fcntl(fd, fcntl.F_GETLEASE) != fcntl.F_WRLCK, "a break")
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
            os.close(fd)
            fd = -1
            result = result_of(answer_now(bob, "under-lease"))
            assert host.running(), host.log()
    finally:
        if fd >= 0:
            os.close(fd)
        signal.signal(signal.SIGIO, previous)
    assert result["all_acquired"] is True
    assert store.holder("a.py") is None, "the host released bob's lock when it stopped"
