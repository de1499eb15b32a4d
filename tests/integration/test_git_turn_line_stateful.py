"""Git's line of turns against a model, driven by hypothesis through random steps.

Several command lines of one clone, some in its main checkout and some in a linked worktree,
take tickets, end, are SIGKILLed (left a zombie, as a shell whose parent has not reaped it
yet) or come back with a reused pid, while a git outside lockyard holds its lock files now and
then. Each holder is a real process (`sleep`); the line is the real one on disk, in a real
clone. The model: the living lines in the order they took their tickets, and the lock files
held. It must hold that one line at a time has the turn (the first living one, when no lock
file of its worktree's is held), that a line behind is told exactly whom it waits for, that
no living line's ticket is ever lost, and that a dead holder's turn passes on.
"""

from __future__ import annotations

import atexit
import functools
import io
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lockyard.infra.clone_state import GitDirs, git_dirs
from lockyard.infra.gitturn.command import TurnRequest, take_turn
from lockyard.infra.gitturn.tickets import Ticket, turn_line
from lockyard.infra.gitturn.waiting import lock_files
from lockyard.infra.session.process_tree import ProcessRef, is_alive, process_ref

NAMES = ["ann", "bo", "cy", "dee"]
WORKTREES = [0, 1]  # the main checkout, a linked worktree
HANG = 60.0
"""Seconds before a turn that should have come counts as hung (a failure, not a timing)."""


def _git(cwd: str, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=cwd, check=True, capture_output=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
    )  # fmt: skip


@functools.cache
def _clone() -> tuple[str, str]:
    """One clone with a linked worktree per test process (each example starts from an empty
    line and no lock files, so they can share it)."""
    base = tempfile.mkdtemp(prefix="lockyard-git-turn-line-")
    atexit.register(shutil.rmtree, base, True)
    main, second = os.path.join(base, "main"), os.path.join(base, "second")
    os.mkdir(main)
    _git(main, "init", "-q", "-b", "main")
    _git(main, "commit", "-q", "--allow-empty", "-m", "start")
    _git(main, "worktree", "add", "-q", "-b", "second", second)
    return main, second


@dataclass
class Line:
    worktree: int
    process: subprocess.Popen[bytes]
    holder: ProcessRef
    ticket: Ticket


class GitTurnLineModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.checkouts = _clone()
        found = [git_dirs(path) for path in self.checkouts]
        assert None not in found
        self.dirs: list[GitDirs] = [dirs for dirs in found if dirs is not None]
        self.turn_line = turn_line(self.dirs[0])
        # Every worktree of a clone finds one line: that is what makes a turn clone-wide.
        assert turn_line(self.dirs[1]).path == self.turn_line.path
        shutil.rmtree(self.turn_line.path, ignore_errors=True)
        self.lock_paths = sorted({path for dirs in self.dirs for path in lock_files(dirs)})
        for path in self.lock_paths:
            if os.path.lexists(path):
                os.unlink(path)
        self.living: dict[str, Line] = {}
        self.order: list[str] = []  # the living lines, first in line first
        self.started: list[subprocess.Popen[bytes]] = []  # every holder, ended at teardown

    def teardown(self) -> None:
        for process in self.started:
            process.kill()
            process.wait()
        for path in self.lock_paths:
            if os.path.lexists(path):
                os.unlink(path)

    # -- the model's view -----------------------------------------------------------------

    def blocking(self, worktree: int) -> list[str]:
        """The lock files held that a line of `worktree` waits for."""
        return [path for path in lock_files(self.dirs[worktree]) if os.path.lexists(path)]

    def request(self, name: str, limit: float) -> TurnRequest:
        return TurnRequest(name, self.checkouts[self.living[name].worktree], limit)

    def end(self, name: str, killed: bool) -> None:
        line = self.living.pop(name)
        self.order.remove(name)
        if killed:  # a zombie until teardown: dead to the line, though its pid is not free
            line.process.send_signal(signal.SIGKILL)
            os.waitid(os.P_PID, line.process.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped
        else:
            line.process.terminate()
            line.process.wait()

    # -- steps ----------------------------------------------------------------------------

    @rule(name=st.sampled_from(NAMES), worktree=st.sampled_from(WORKTREES))
    def take_a_ticket(self, name: str, worktree: int) -> None:
        if name in self.living:
            return
        process = subprocess.Popen(["sleep", "600"], stdout=subprocess.DEVNULL)
        self.started.append(process)
        holder = process_ref(process.pid)
        assert holder is not None
        ticket = turn_line(self.dirs[worktree]).take(holder, name, f"git commit -m {name}")
        later = all(ticket.number > self.living[other].ticket.number for other in self.order)
        self.living[name] = Line(worktree, process, holder, ticket)
        self.order.append(name)
        assert later, "a new ticket is numbered after every living one"

    @precondition(lambda self: self.living)
    @rule(data=st.data())
    def a_line_asking_again_holds_one_ticket(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.living)))
        line = self.living[name]
        again = turn_line(self.dirs[1 - line.worktree]).take(line.holder, name, "git push")
        assert again == line.ticket

    @precondition(lambda self: self.living)
    @rule(data=st.data(), killed=st.booleans())
    def a_line_ends(self, data: st.DataObject, killed: bool) -> None:
        self.end(data.draw(st.sampled_from(sorted(self.living))), killed)

    @rule()
    def a_ticket_of_a_reused_pid(self) -> None:
        """A ticket whose holder's pid now names another process (this one) is a dead one's."""
        me = process_ref(os.getpid())
        assert me is not None
        self.turn_line.take(ProcessRef(me.pid, me.start_time - 1), "gone", "git gc")

    @rule()
    def the_counter_is_lost(self) -> None:
        """The tickets on disk still say where the line ends."""
        counter = os.path.join(self.turn_line.path, "next")
        if os.path.exists(counter):
            os.unlink(counter)

    @rule()
    def a_broken_ticket(self) -> None:
        """A ticket that cannot be read costs a place in the line, never a stuck line."""
        os.makedirs(self.turn_line.tickets_dir, exist_ok=True)
        last = max((t.number for t in self.turn_line.tickets()), default=0)
        with open(os.path.join(self.turn_line.tickets_dir, f"{last + 1:020d}"), "wb") as file:
            file.write(b'{"pid": "not')

    @rule(index=st.integers(min_value=0, max_value=5))
    def a_git_outside_lockyard_starts_or_ends(self, index: int) -> None:
        path = self.lock_paths[index % len(self.lock_paths)]
        if os.path.lexists(path):
            os.unlink(path)
        else:
            open(path, "x").close()

    @precondition(lambda self: self.order)
    @rule()
    def the_first_living_line_has_its_turn(self) -> None:
        head = self.order[0]
        if self.blocking(self.living[head].worktree):
            return  # see a_line_is_told_what_it_waits_for
        err = io.StringIO()
        got = take_turn(self.request(head, HANG), self.living[head].holder, err)
        assert got == self.living[head].ticket
        assert err.getvalue() == ""
        # The dead tickets before it are gone: nothing is left behind for the next ones.
        assert self.turn_line.tickets()[0].number == got.number

    @precondition(lambda self: self.living)
    @rule(data=st.data())
    def a_line_is_told_what_it_waits_for(self, data: st.DataObject) -> None:
        """Without time to wait (a limit of 0), take_turn names what it would wait for: the
        first living line before it, else a lock file of its worktree's."""
        name = data.draw(st.sampled_from(sorted(self.living)))
        err = io.StringIO()
        got = take_turn(self.request(name, 0.0), self.living[name].holder, err)
        assert got == self.living[name].ticket
        said = err.getvalue()
        if name != self.order[0]:
            assert said.startswith(f"lockyard: agent {self.order[0]}'s "), said
            assert "held git's turn" in said
        elif held := self.blocking(self.living[name].worktree):
            assert held[0] in said, said
            assert "still there" in said
        else:
            assert said == ""

    @precondition(lambda self: len(self.order) >= 2)
    @rule(killed=st.booleans())
    def the_turn_passes_on_when_its_holder_dies(self, killed: bool) -> None:
        """The second line waits for the first (really, in take_turn); the first ends; the
        second's wait ends with its turn."""
        second = self.order[1]
        held = self.blocking(self.living[second].worktree)
        for path in held:  # the outside git ends too, so the dead holder is all it waits for
            os.unlink(path)
        err = io.StringIO()
        result: list[Ticket | None] = []
        waiter = threading.Thread(
            target=lambda: result.append(
                take_turn(self.request(second, HANG), self.living[second].holder, err)
            )
        )
        waiter.start()
        self.end(self.order[0], killed)
        waiter.join(HANG * 2)
        assert not waiter.is_alive()
        assert result == [self.living[second].ticket]
        assert "going on without" not in err.getvalue(), err.getvalue()

    # -- what must always hold ----------------------------------------------------------

    @invariant()
    def the_living_tickets_are_in_line_in_arrival_order(self) -> None:
        if not os.path.isdir(self.turn_line.path):
            assert not self.order
            return
        on_disk = [t for t in self.turn_line.tickets() if is_alive(t.holder)]
        assert on_disk == [self.living[name].ticket for name in self.order]


GitTurnLineModel.TestCase.settings = settings(
    max_examples=25, stateful_step_count=20, deadline=None
)
test_the_line_of_git_turns_behaves_like_the_model = GitTurnLineModel.TestCase
