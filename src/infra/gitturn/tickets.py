"""The line of git turns on disk: numbered tickets, one per command line that waits or runs.

`<git common dir>/lockyard/git-turns/`:
- `next`: the number the next ticket gets; read and advanced under `flock(turns.lock)`, together
  with the ticket's publication, so numbers only grow and a ticket is on disk before any later
  one is numbered (a later taker always sees it);
- `tickets/<number, 20 digits>`: JSON published whole: the holder (the shell running the
  command line: pid and start time, so a reused pid is not mistaken for it), the agent, the
  start of the command line, when it was taken.

Nobody removes a ticket when its command line ends (the line may be killed; no hook runs
after it): whoever finds its holder dead removes it. A ticket that cannot be read is skipped
and removed: a broken ticket costs one turn's order, never a stuck line.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from typing import Final, NamedTuple

from ..clone_state import GitDirs
from ..session.process_tree import ProcessRef, is_alive

DIGITS: Final = 20
_TEMP_PREFIX: Final = ".tmp-"
_MAX_TICKET_BYTES: Final = 4096


class Ticket(NamedTuple):
    """One command line's place in the line."""

    number: int
    holder: ProcessRef
    """The shell running the command line: the turn is held while it lives."""
    agent: str
    command: str
    """The start of the command line, for whoever waits behind it."""
    taken: float
    """When the ticket was taken (epoch seconds)."""

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "pid": self.holder.pid,
                "start": self.holder.start_time,
                "agent": self.agent,
                "command": self.command,
                "taken": self.taken,
            }
        ).encode()


class TurnLine:
    """The line of one clone, in directory `path` (`<git common dir>/lockyard/git-turns`)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.tickets_dir = os.path.join(path, "tickets")

    def take(self, holder: ProcessRef, agent: str, command: str) -> Ticket:
        """A new ticket for `holder`, last in line; or the live ticket `holder` already has
        (a command line that asks twice holds one turn, and must not wait for itself)."""
        os.makedirs(self.tickets_dir, exist_ok=True)
        with self._locked():
            for ticket in self.tickets():
                if ticket.holder == holder:
                    return ticket
            number = max(self._next_number(), self._last_number() + 1)
            ticket = Ticket(number, holder, agent, command, time.time())
            _publish(os.path.join(self.path, "next"), str(number + 1).encode())
            _publish(os.path.join(self.tickets_dir, _name(number)), ticket.to_json())
            return ticket

    def tickets(self) -> list[Ticket]:
        """Every readable ticket, first in line first (unreadable ones are removed)."""
        found: list[Ticket] = []
        for number in self._numbers():
            ticket = self._read(number)
            if ticket is None:
                self.remove(number)
            else:
                found.append(ticket)
        return found

    def ahead_of(self, ticket: Ticket) -> list[Ticket]:
        """The tickets before `ticket` whose holder still runs, first in line first; the
        dead ones found are removed."""
        ahead: list[Ticket] = []
        for other in self.tickets():
            if other.number >= ticket.number:
                break
            if is_alive(other.holder):
                ahead.append(other)
            else:
                self.remove(other.number)
        return ahead

    def remove(self, number: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self.tickets_dir, _name(number)))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(os.path.join(self.path, "turns.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _next_number(self) -> int:
        try:
            with open(os.path.join(self.path, "next"), encoding="ascii") as file:
                return max(1, int(file.read(DIGITS + 1)))
        except (OSError, ValueError):
            return 1  # a lost counter: the tickets on disk still say where the line ends

    def _last_number(self) -> int:
        numbers = self._numbers()
        return numbers[-1] if numbers else 0

    def _numbers(self) -> list[int]:
        try:
            names = os.listdir(self.tickets_dir)
        except FileNotFoundError:
            return []
        return sorted(int(name) for name in names if len(name) == DIGITS and name.isdigit())

    def _read(self, number: int) -> Ticket | None:
        try:
            fd = os.open(
                os.path.join(self.tickets_dir, _name(number)),
                os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC,
            )
        except FileNotFoundError:
            return None
        try:
            raw = os.read(fd, _MAX_TICKET_BYTES)
        finally:
            os.close(fd)
        try:
            data = json.loads(raw)
            holder = ProcessRef(int(data["pid"]), int(data["start"]))
            return Ticket(
                number, holder, str(data["agent"]), str(data["command"]), float(data["taken"])
            )
        except (ValueError, TypeError, KeyError):
            return None


def turn_line(dirs: GitDirs) -> TurnLine:
    """The line of the clone `dirs` belongs to: one for all its worktrees."""
    return TurnLine(os.path.join(dirs.common_dir, "lockyard", "git-turns"))


def _publish(path: str, data: bytes) -> None:
    """Write `path` whole: a temp file beside it, renamed over it, so a reader never sees a
    part. (Not `atomic_files`: its imports cost every git line ~10 ms more.) Called under the
    line's flock, so one process at a time writes; the pid keeps a crashed one's temp apart."""
    temp = os.path.join(os.path.dirname(path), f"{_TEMP_PREFIX}{os.getpid()}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _name(number: int) -> str:
    return f"{number:0{DIGITS}d}"
