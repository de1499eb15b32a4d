"""Git's turns with real shells, real git and `lockyard git-turn` as agents run it.

Each command line is a `bash -c` of its own, as an agent CLI runs one: the shell holds the
turn while it runs. The lines wait on their stdin, so the test decides when each one ends;
what it waits for is a line in a log or git-turn's own stderr, never a length of time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lockyard.infra.gitturn.tickets import TurnLine
from lockyard.infra.session.process_tree import process_ref
from polling_support import wait_until

LOCKYARD = str(Path(sys.executable).parent / "lockyard")
HANG = 120.0
"""Seconds before a line that should have ended counts as hung (a failure, not a timing)."""


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
    )  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    path = tmp_path / "clone"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "t")
    (path / "README").write_text("x\n")
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "start")
    return path


@dataclass
class Line:
    """One agent command line: `git-turn`, then a log line, then a wait on stdin."""

    agent: str
    process: subprocess.Popen[str]
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def end(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("\n")
        self.process.stdin.close()
        self.process.wait(timeout=HANG)


@dataclass
class Lines:
    log: Path
    started: list[Line] = field(default_factory=list)

    def start(self, agent: str, cwd: Path, *, env: dict[str, str] | None = None) -> Line:
        stderr_path = self.log.parent / f"{agent}.err"
        script = (
            f"{LOCKYARD} git-turn --agent {agent} && echo {agent}-in >> {self.log} && "
            f"read _ && echo {agent}-out >> {self.log}"
        )
        with stderr_path.open("w") as err:
            process = subprocess.Popen(
                ["bash", "-c", script], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                stderr=err, text=True, env={**os.environ, **(env or {})},
            )  # fmt: skip
        line = Line(agent, process, stderr_path)
        self.started.append(line)
        return line

    def entries(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []

    def wait_for_entry(self, entry: str) -> None:
        wait_until(lambda: entry in self.entries(), f"{entry} in {self.entries()}", within=HANG)


@pytest.fixture
def lines(tmp_path: Path) -> Iterator[Lines]:
    made = Lines(tmp_path / "log")
    yield made
    for line in made.started:
        if line.process.poll() is None:
            line.process.kill()
            line.process.wait()


def waits_behind(line: Line, agent: str) -> None:
    wait_until(
        lambda: f"agent {agent}'s" in line.stderr(),
        lambda: f"{line.agent} waiting behind {agent}: {line.stderr()!r}",
        within=HANG,
    )


def tickets(clone: Path) -> list[int]:
    line = TurnLine(str(clone / ".git" / "lockyard" / "git-turns"))
    return [ticket.number for ticket in line.tickets()]


def test_turns_go_one_at_a_time_in_arrival_order_across_the_worktrees_of_a_clone(
    clone: Path, lines: Lines, tmp_path: Path
) -> None:
    worktree = tmp_path / "second"
    git(clone, "worktree", "add", "-q", "-b", "second", str(worktree))
    alice = lines.start("alice", clone)
    lines.wait_for_entry("alice-in")
    bob = lines.start("bob", worktree)
    waits_behind(bob, "alice")
    carol = lines.start("carol", clone)
    waits_behind(carol, "alice")
    assert lines.entries() == ["alice-in"]
    alice.end()
    lines.wait_for_entry("bob-in")
    bob.end()
    lines.wait_for_entry("carol-in")
    carol.end()
    assert lines.entries() == [
        "alice-in",
        "alice-out",
        "bob-in",
        "bob-out",
        "carol-in",
        "carol-out",
    ]


def test_a_killed_command_line_ends_its_turn_and_the_next_one_removes_its_ticket(
    clone: Path, lines: Lines
) -> None:
    alice = lines.start("alice", clone)
    lines.wait_for_entry("alice-in")
    bob = lines.start("bob", clone)
    waits_behind(bob, "alice")
    first = tickets(clone)[0]
    os.kill(alice.process.pid, signal.SIGKILL)  # the shell that holds the turn; no hook runs
    lines.wait_for_entry("bob-in")
    assert first not in tickets(clone)
    bob.end()
    assert lines.entries() == ["alice-in", "bob-in", "bob-out"]


def test_a_ticket_whose_pid_now_names_another_process_is_not_waited_for(
    clone: Path, lines: Lines
) -> None:
    me = process_ref(os.getpid())
    assert me is not None
    line = TurnLine(str(clone / ".git" / "lockyard" / "git-turns"))
    reused = type(me)(me.pid, me.start_time + 1)  # this pid, but not the process it named
    stale = line.take(reused, "ghost", "git commit")
    alice = lines.start("alice", clone)
    lines.wait_for_entry("alice-in")
    assert stale.number not in tickets(clone)
    alice.end()


def test_a_git_command_outside_lockyard_is_waited_for_until_its_index_lock_goes(
    clone: Path, lines: Lines
) -> None:
    index_lock = clone / ".git" / "index.lock"
    index_lock.write_text("")  # a person's `git commit` with its editor open
    alice = lines.start("alice", clone)
    wait_until(lambda: "index.lock to go" in alice.stderr(), alice.stderr, within=HANG)
    assert lines.entries() == []
    index_lock.unlink()
    lines.wait_for_entry("alice-in")
    alice.end()


def test_a_turn_held_past_the_limit_is_passed_saying_who_holds_it(
    clone: Path, lines: Lines
) -> None:
    alice = lines.start("alice", clone)
    lines.wait_for_entry("alice-in")
    bob = lines.start("bob", clone, env={"LOCKYARD_GIT_TURN_LIMIT": "0.2"})
    lines.wait_for_entry("bob-in")
    assert "agent alice's `echo alice-in" in bob.stderr()
    assert "going on without the turn" in bob.stderr()
    bob.end()
    alice.end()


def test_a_command_line_that_asks_twice_holds_one_turn(clone: Path) -> None:
    script = f"{LOCKYARD} git-turn --agent alice && {LOCKYARD} git-turn --agent alice && echo in"
    done = subprocess.run(
        ["bash", "-c", script], cwd=clone, capture_output=True, text=True, timeout=HANG
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "in\n", "")
    assert len(tickets(clone)) == 1


def test_git_turn_says_why_and_lets_the_line_go_on_when_it_cannot_keep_its_line(
    clone: Path,
) -> None:
    (clone / ".git" / "lockyard").write_text("not a directory")
    script = f"{LOCKYARD} git-turn --agent alice && echo in"
    done = subprocess.run(
        ["bash", "-c", script], cwd=clone, capture_output=True, text=True, timeout=HANG
    )
    assert (done.returncode, done.stdout) == (0, "in\n")
    assert done.stderr.startswith("lockyard git-turn: ")
    assert done.stderr.endswith("going on without a turn\n")
    assert done.stderr.count("\n") == 1


def test_git_turn_outside_a_git_checkout_waits_for_nothing(tmp_path: Path) -> None:
    script = f"{LOCKYARD} git-turn --agent alice && echo in"
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=HANG
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "in\n", "")


def test_git_turn_help_says_how_it_is_used_on_stdout() -> None:
    done = subprocess.run(
        [LOCKYARD, "git-turn", "--help"], capture_output=True, text=True, timeout=HANG
    )
    assert done.returncode == 0
    assert done.stdout.startswith("usage: lockyard git-turn [--agent ID] [-C DIR] && GIT")


def test_a_persistent_shell_takes_no_turn_since_it_would_hold_it_after_the_line(
    clone: Path,
) -> None:
    # A shell that reads one line after another on its input (an agent CLI's kept shell).
    shell = subprocess.run(
        ["bash"], cwd=clone, input=f"{LOCKYARD} git-turn --agent alice && echo in\n",
        capture_output=True, text=True, timeout=HANG,
    )  # fmt: skip
    assert (shell.returncode, shell.stdout) == (0, "in\n")
    assert "persistent shell" in shell.stderr
    assert tickets(clone) == []
