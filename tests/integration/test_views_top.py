"""`lockyard top` as a person at an 80x24 terminal sees it: run in tmux beside real agent
processes that hold, queue and deadlock on a real lock directory; keys sent with
`send-keys`, the screen read back with `capture-pane`."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import LOCKYARD, Agents

from polling_support import wait_until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

ROW_A, ROW_B, ROW_C = "\n __a__ ", "\n __b__ ", "\n __c__ "  # table rows, not mentions
SCREEN_WAIT = 100.0  # Textual starts in well under a second, but the CI machine is shared


class Terminal:
    """One tmux session of 80x24 running one command."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.name = f"lockyard-top-{secrets.token_hex(4)}"
        shell_command = (
            " ".join(_quote(part) for part in command) + "; echo TOP-EXITED $?; sleep 600"
        )
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", self.name, "-x", "80", "-y", "24", shell_command],
            check=True,
            env=env,
        )

    def screen(self) -> str:
        done = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True
        )
        return done.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def shows(self, *texts: str, absent: tuple[str, ...] = ()) -> str:
        def look() -> str | None:
            screen = self.screen()
            ok = all(text in screen for text in texts) and not any(t in screen for t in absent)
            return screen if ok else None

        return wait_until(
            look,
            lambda: f"{texts} (without {absent}) on:\n{self.screen()}",
            within=SCREEN_WAIT,
            interval=0.25,
        )

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def _quote(part: str) -> str:
    return "'" + part.replace("'", "'\\''") + "'"


@pytest.fixture
def agents(lock_dir: Path) -> Iterator[Agents]:
    crew = Agents(lock_dir, patience=900)  # waits outlast the slowest screen
    yield crew
    crew.close()


def top_terminal(lock_dir: Path, *extra: str) -> Terminal:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    env |= {"TERM": "xterm-256color", "LOCKYARD_LOCK_DIR": ""}
    env.pop("LOCKYARD_LOCK_DIR")
    return Terminal([LOCKYARD, "top", "--lock-dir", str(lock_dir), *extra], env)


@pytest.mark.timeout(900)
def test_top_shows_holders_queues_and_a_cycle_with_its_victim_then_follows_a_kill(
    lock_dir: Path, agents: Agents
) -> None:
    one = agents.start("agent-1", holds="__a__", waits="__b__")
    two = agents.start("agent-2", holds="__b__", waits="__a__")
    three = agents.start("agent-3", holds="__c__", waits="__a__")
    terminal = top_terminal(lock_dir)
    try:
        # The table's rows: the journal's panel names the files as soon as they are granted,
        # which can be before the table's first refresh.
        screen = terminal.shows(ROW_A, ROW_B, ROW_C, "no one waits")
        assert "3 held" in screen
        agents.go(three)  # a queue first: agent-3 waits for __a__
        terminal.shows("agent-3 waits", "1 waiting")
        agents.go(one, two)  # then the cycle
        screen = terminal.shows("DEADLOCK", "victim")
        deadlock_line = next(
            line for line in screen.splitlines() if line.strip().startswith("DEADLOCK")
        )
        victim = deadlock_line.rsplit("victim ", 1)[1].strip()
        assert victim in {"agent-1", "agent-2"}
        assert "3 waiting" in screen
        assert all(len(line) <= 80 for line in screen.splitlines())

        terminal.keys("/")  # filter: only __c__ and whoever holds or waits for it
        terminal.shows("show locks whose file or agent contains")
        terminal.keys("__c__", "Enter")
        screen = terminal.shows("filter '__c__'", absent=(ROW_B,))
        terminal.keys("Escape")
        terminal.shows(ROW_B, absent=("filter '",))
        terminal.keys("c")  # only the locks someone waits for: __c__ has no queue
        terminal.shows(ROW_A, "· waited-on only", absent=(ROW_C,))
        terminal.keys("c")

        agents.kill(one if victim == "agent-1" else two)  # the cycle ends with its victim
        victim_lock = "__a__" if victim == "agent-1" else "__b__"
        terminal.shows(absent=("DEADLOCK",))

        def victim_lock_row() -> str:
            lines = terminal.screen().splitlines()
            return next((line for line in lines if line.startswith(f" {victim_lock} ")), "")

        # The victim's lock is reclaimed (its holder died): the next in line holds it.
        wait_until(lambda: victim not in victim_lock_row(), victim_lock_row, within=SCREEN_WAIT)
        terminal.keys("q")
        terminal.shows("TOP-EXITED 0")
    finally:
        terminal.close()


@pytest.mark.timeout(900)
def test_top_waits_for_a_lock_directory_that_does_not_exist_yet_then_shows_readers(
    lock_dir: Path, agents: Agents
) -> None:
    terminal = top_terminal(lock_dir)
    try:
        terminal.shows("nothing locked so far")
        agents.start("agent-9", holds="__late__")
        terminal.shows("__late__", "agent-9", "1 held")
        for reader in ("agent-7", "agent-8"):
            agents.start(reader, holds="__r__@shared")
        agents.go(agents.start("agent-6", waits="__r__"))  # a writer, next once they leave
        screen = terminal.shows(
            "\n __r__ ", "shared: agent-7, agent-8", "agent-6 next",
            "for __r__, read by agent-7, agent-8", "2 held",
        )  # fmt: skip
        row = next(line for line in screen.splitlines() if line.startswith(" __r__ "))
        assert row.split()[4] == "-"  # held: the writer holds nothing yet
        assert all(len(line) <= 80 for line in screen.splitlines())
        terminal.keys("q")
        terminal.shows("TOP-EXITED 0")
    finally:
        terminal.close()


def test_top_without_a_terminal_says_what_to_run_instead(lock_dir: Path) -> None:
    done = subprocess.run(
        [LOCKYARD, "top", "--lock-dir", str(lock_dir)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("lockyard: error: lockyard top needs a terminal\n")
    assert "lockyard status --json" in done.stderr
    assert "Traceback" not in done.stderr
