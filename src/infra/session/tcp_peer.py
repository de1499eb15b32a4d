"""Which process is at the other end of a loopback TCP connection (Linux, /proc and netlink).

A hook that arrives over HTTP carries no proof of who sent it: its body says which session
it is about, but anything can say that. The connection itself can tell: the kernel knows
the socket at the other end (its inode and owner, asked by `sock_diag` netlink, or read
from /proc/net/tcp where netlink is unavailable), and exactly the processes holding that
socket have it in their /proc/<pid>/fd. From that process the session is found as the
command hook finds its own: the nearest ancestor that anchors one.

Standard library only, no threads: called for each new connection to lockyard's guard.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterable

_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NETLINK_SOCK_DIAG = 4
_ALL_STATES = 0xFFFFFFFF
_NO_COOKIE = 0xFFFFFFFF
_REQUEST = struct.Struct("=IHHII BBBBI HH16s16sIII")  # nlmsghdr + inet_diag_req_v2
_MESSAGE = struct.Struct("=IHHII BBBB HH16s16sIII IIIII")  # nlmsghdr + inet_diag_msg


class PeerUnknownError(Exception):
    """The connection's other end cannot be found (it closed, or /proc says nothing)."""


def peer_socket(local: tuple[str, int], remote: tuple[str, int]) -> tuple[int, int]:
    """(owner uid, inode) of the IPv4 socket at `remote` whose peer is `local`.

    `local` is this end (our address and port), `remote` the other end, both on this host.
    Raises PeerUnknownError when the kernel knows no such socket.
    """
    try:
        return _by_netlink(local, remote)
    except OSError:  # no netlink here (a restricted sandbox): the slower text table
        return _by_proc_table(local, remote)


def _by_netlink(local: tuple[str, int], remote: tuple[str, int]) -> tuple[int, int]:
    request = _REQUEST.pack(
        _REQUEST.size, _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0,
        socket.AF_INET, socket.IPPROTO_TCP, 0, 0, _ALL_STATES,
        socket.htons(remote[1]), socket.htons(local[1]),
        socket.inet_aton(remote[0]).ljust(16, b"\0"), socket.inet_aton(local[0]).ljust(16, b"\0"),
        0, _NO_COOKIE, _NO_COOKIE,
    )  # fmt: skip
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as link:
        link.sendto(request, (0, 0))
        reply = link.recv(8192)
    if len(reply) < 16:
        raise PeerUnknownError("an empty answer from the kernel")
    kind = struct.unpack_from("=H", reply, 4)[0]
    if kind == _NLMSG_ERROR:
        code = struct.unpack_from("=i", reply, 16)[0]
        raise PeerUnknownError(f"the kernel knows no such connection ({os.strerror(-code)})")
    if kind != _SOCK_DIAG_BY_FAMILY or len(reply) < _MESSAGE.size:
        raise PeerUnknownError(f"an unexpected answer from the kernel (type {kind})")
    fields = _MESSAGE.unpack_from(reply)
    return fields[-2], fields[-1]


def _by_proc_table(local: tuple[str, int], remote: tuple[str, int]) -> tuple[int, int]:
    wanted = (_hex_address(remote), _hex_address(local))
    try:
        with open("/proc/net/tcp", encoding="ascii") as table:
            next(table, None)
            for line in table:
                fields = line.split()
                if len(fields) >= 10 and (fields[1], fields[2]) == wanted:
                    return int(fields[7]), int(fields[9])
    except OSError as exc:
        raise PeerUnknownError(f"cannot read /proc/net/tcp ({exc.strerror})") from None
    raise PeerUnknownError("the connection is not in /proc/net/tcp")


def _hex_address(address: tuple[str, int]) -> str:
    """An address as /proc/net/tcp writes it: the IPv4 number in host order, then the port."""
    number = struct.unpack("=I", socket.inet_aton(address[0]))[0]
    return f"{number:08X}:{address[1]:04X}"


def holder_of(inode: int, candidates: Iterable[int]) -> int | None:
    """The first of `candidates` (pids) that has the socket `inode` open, or None."""
    link = f"socket:[{inode}]"
    for pid in candidates:
        directory = f"/proc/{pid}/fd"
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            try:
                if os.readlink(f"{directory}/{name}") == link:
                    return pid
            except OSError:
                continue
    return None


def own_processes(uid: int) -> list[int]:
    """Every process of `uid` (the slow search, when no candidate holds the socket)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    found.append(int(name))
            except OSError:
                continue
    return found


def peer_process(
    local: tuple[str, int], remote: tuple[str, int], candidates: Iterable[int] = ()
) -> int:
    """The pid of this user's process at the other end of the connection `local`-`remote`.

    `candidates` are looked at first (a hint, verified like any other pid); then every process
    of this user. Raises PeerUnknownError when the other end is another user's, or gone.
    """
    uid, inode = peer_socket(local, remote)
    if uid != os.geteuid():
        raise PeerUnknownError(f"the connection comes from another user (uid {uid})")
    pid = holder_of(inode, candidates)
    if pid is None:
        pid = holder_of(inode, own_processes(uid))
    if pid is None:
        raise PeerUnknownError("no process holds the other end of the connection any more")
    return pid
