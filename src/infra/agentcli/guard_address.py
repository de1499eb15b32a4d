"""Where lockyard's guard listens for a lock directory, and what a request may carry: one
loopback port, the same for every process that agrees on the lock directory, with nothing
to configure or remember.

Every `lockyard serve` of a lock directory listens on the port derived from the directory's
real path (or `LOCKYARD_GUARD_PORT`), and `lockyard init` writes that port into the URL of an
HTTP hook; a command hook computes it the same way. Each request names the directory it is
for (its tag), so a guard of another lock directory that happens to share the port refuses
to answer for it instead of answering wrongly.

Standard library only (`os`): the command hook's fast path imports this.
"""

from __future__ import annotations

import os

GUARD_PORT_ENV = "LOCKYARD_GUARD_PORT"
HOST = "127.0.0.1"
HOOK_PATH = "/v1/pre-tool-use"
COMMAND_VIA = "command"
"""`via=` of a request that wants what a command hook prints (its exit status, stdout and
stderr) instead of the CLI's HTTP hook answer: lockyard's command hook and plugins send it."""
FIRST_PORT = 20000
PORT_COUNT = 12768
"""Derived ports lie in 20000-32767: below Linux's ephemeral range (32768-60999), so no
outgoing connection of this machine is ever given one by chance."""


MAX_PAYLOAD_BYTES = 32 * 1024 * 1024
"""Larger hook inputs are refused unread (a write that large should be split anyway)."""


class GuardPortError(ValueError):
    """`LOCKYARD_GUARD_PORT` (or `--guard-port`) is not a port number."""


def _fnv1a(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def _digest(lock_dir: str) -> int:
    return _fnv1a(os.fsencode(os.path.realpath(lock_dir)))


def lock_dir_tag(lock_dir: str) -> str:
    """The short name of a lock directory that each guard request carries."""
    return f"{_digest(lock_dir):08x}"


def parse_port(text: str) -> int:
    """A port number given by a person; GuardPortError says what is wrong."""
    try:
        port = int(text.strip())
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise GuardPortError(
            f"guard port {text!r} is not a port number (1-65535): fix {GUARD_PORT_ENV} or "
            "--guard-port"
        )
    return port


def guard_port(lock_dir: str, configured: str | int | None = None) -> int:
    """The guard's port for `lock_dir`: `configured`, else `LOCKYARD_GUARD_PORT`, else the
    port derived from the directory's real path."""
    if configured is None or configured == "":
        configured = os.environ.get(GUARD_PORT_ENV) or None
    if isinstance(configured, int):
        return parse_port(str(configured))
    if configured is not None:
        return parse_port(configured)
    return FIRST_PORT + _digest(lock_dir) % PORT_COUNT


def hook_url(lock_dir: str, cli: str, port: int) -> str:
    """The URL an HTTP hook of `cli` posts each tool call to."""
    return f"http://{HOST}:{port}{HOOK_PATH}?cli={cli}&dir={lock_dir_tag(lock_dir)}"
