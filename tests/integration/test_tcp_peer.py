"""Which process is at the other end of a loopback connection: the kernel's answer (netlink,
else /proc/net/tcp), never the connection's own word."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from lockyard.infra.session import tcp_peer
from lockyard.infra.session.tcp_peer import PeerUnknownError, peer_process, peer_socket

CONNECT = (
    "import socket, sys, time\n"
    "connection = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
    "print('connected', flush=True)\n"
    "time.sleep(600)\n"
)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server


@pytest.fixture
def caller(listener: socket.socket) -> Iterator[tuple[subprocess.Popen[str], socket.socket]]:
    """Another process connected to `listener`, and this end of its connection."""
    child = subprocess.Popen(
        [sys.executable, "-c", CONNECT, str(listener.getsockname()[1])],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "connected\n"
        accepted, _address = listener.accept()
        with accepted:
            yield child, accepted
    finally:
        child.kill()
        child.wait()


def ends(accepted: socket.socket) -> tuple[tuple[str, int], tuple[str, int]]:
    return accepted.getsockname(), accepted.getpeername()


def test_the_process_at_the_other_end_is_found_with_or_without_a_hint(
    caller: tuple[subprocess.Popen[str], socket.socket],
) -> None:
    child, accepted = caller
    local, remote = ends(accepted)
    assert peer_process(local, remote, [child.pid]) == child.pid
    assert peer_process(local, remote) == child.pid  # the slow search over this user's processes
    assert peer_process(local, remote, [1, 999999999, child.pid]) == child.pid  # hints are checked


def test_without_netlink_the_proc_table_gives_the_same_socket(
    caller: tuple[subprocess.Popen[str], socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    _child, accepted = caller
    local, remote = ends(accepted)
    by_netlink = peer_socket(local, remote)

    def no_netlink(*args: object) -> tuple[int, int]:
        raise PermissionError("netlink is not allowed here")

    monkeypatch.setattr(tcp_peer, "_by_netlink", no_netlink)
    assert peer_socket(local, remote) == by_netlink


def test_a_connection_the_kernel_does_not_know_is_refused(listener: socket.socket) -> None:
    local = listener.getsockname()
    with pytest.raises(PeerUnknownError, match="knows no such connection"):
        peer_socket(local, ("127.0.0.1", 1))
    with pytest.raises(PeerUnknownError, match="not in /proc/net/tcp"):
        tcp_peer._by_proc_table(local, ("127.0.0.1", 1))


def test_a_peer_that_closed_its_end_is_nobody(
    caller: tuple[subprocess.Popen[str], socket.socket],
) -> None:
    child, accepted = caller
    local, remote = ends(accepted)
    child.kill()
    child.wait()
    with pytest.raises(PeerUnknownError):
        peer_process(local, remote, [child.pid])


def test_another_users_connection_is_refused(
    caller: tuple[subprocess.Popen[str], socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    _child, accepted = caller
    local, remote = ends(accepted)
    uid, inode = peer_socket(local, remote)
    monkeypatch.setattr(tcp_peer, "peer_socket", lambda *ends: (uid + 1, inode))
    with pytest.raises(PeerUnknownError, match=f"another user \\(uid {uid + 1}\\)"):
        peer_process(local, remote)
