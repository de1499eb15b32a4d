"""Agents committing at once in one checkout: git's failures without turns, none with them.

Each agent is a bash loop that, ROUNDS times, appends to its own file and runs one command
line in a shell of its own, as an agent CLI does: `git add <its file> && git commit`, with
`lockyard git-turn --agent ID &&` in front when turns are on. Without turns, git fails when
two lines meet on `.git/index.lock` or a ref's lock (`Unable to create ... File exists`,
`cannot lock ref`), or a commit takes another agent's staged file and that agent's own
commit then finds nothing to commit. The probe runs both ways on fresh clones, one after the
other, and prints each way's failed lines, commits and wall time:

    python3 scripts/uv run python benchmarks/probe_git_turns.py --agents 8 --rounds 30

`--solo N` first times N uncontended lines with and without the turn (wall and CPU time).

tests/integration/test_git_turn_commits.py runs `run_commits` with turns and asserts that no
line failed and that every commit holds exactly its agent's one file.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

LOCKYARD = str(Path(sys.executable).parent / "lockyard")
_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1"}
_SHA = re.compile(r"\b[0-9a-f]{7,40}\b")


@dataclass(frozen=True)
class CommitRun:
    """What one run of every agent's loop left."""

    failed_lines: int
    """Command lines whose `git add && git commit` failed."""
    commits: int
    """Commits made by the agents (the clone's first commit not counted)."""
    mixed_commits: int
    """Commits that do not hold exactly the one file of the agent named in their message."""
    errors: Counter[str]
    """git's error lines (the clone's path and commit ids taken out), counted."""
    seconds: float


def make_clone(path: Path) -> Path:
    """A fresh repository with one commit, at `path`."""
    path.mkdir(parents=True)
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.email", "agents@example.com"],
        ["config", "user.name", "agents"],
    ):
        _git(path, *args)
    (path / "README").write_text("agents commit here\n")
    _git(path, "add", "README")
    _git(path, "commit", "-q", "-m", "start")
    return path


def run_commits(clone: Path, agents: int, rounds: int, *, turns: bool) -> CommitRun:
    """Every agent's loop at once in `clone`; what they left once all have ended."""
    with tempfile.TemporaryDirectory(prefix="git-turn-probe-") as scratch:
        logs = Path(scratch)
        started = time.monotonic()
        loops = [
            subprocess.Popen(
                ["bash", "-c", _loop(f"agent{n}", rounds, turns, logs)],
                cwd=clone,
                env={**os.environ, **_GIT_ENV},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for n in range(agents)
        ]
        for loop in loops:
            loop.wait()
        seconds = time.monotonic() - started
        failed = sum(int((logs / f"agent{n}.failed").read_text()) for n in range(agents))
        errors: Counter[str] = Counter()
        for n in range(agents):
            err = logs / f"agent{n}.err"
            for line in err.read_text().splitlines() if err.exists() else ():
                if line.startswith(("fatal:", "error:")) or "nothing to commit" in line:
                    errors[_SHA.sub("<sha>", line.replace(str(clone), "<clone>"))] += 1
    commits, mixed = _commits(clone)
    return CommitRun(failed, commits, mixed, errors, seconds)


def _loop(agent: str, rounds: int, turns: bool, logs: Path) -> str:
    turn = f"{shlex.quote(LOCKYARD)} git-turn --agent {agent} && " if turns else ""
    line = f"{turn}git add {agent}.txt && git commit -q -m {agent}"
    err = shlex.quote(str(logs / f"{agent}.err"))
    return (
        f"failed=0; for round in $(seq {rounds}); do echo $round >> {agent}.txt; "
        f"bash -c {shlex.quote(line)} >>{err} 2>&1 || failed=$((failed+1)); done; "
        f"echo $failed > {shlex.quote(str(logs / f'{agent}.failed'))}"
    )


def _commits(clone: Path) -> tuple[int, int]:
    """(commits after the first, commits whose files are not exactly their agent's one)."""
    out = _git(clone, "log", "--format=@%s", "--name-only", "HEAD")
    commits = [block.split() for block in out.split("@")[1:]]
    made = [words for words in commits if words[0] != "start"]
    mixed = sum(1 for words in made if words[1:] != [f"{words[0]}.txt"])
    return len(made), mixed


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
        env={**os.environ, **_GIT_ENV},
    )  # fmt: skip
    return done.stdout


def solo_cost(clone: Path, runs: int, *, turns: bool) -> tuple[float, float]:
    """Median wall seconds and mean CPU seconds (children's user + system) of one uncontended
    `git add && git commit` line, with or without the turn in front."""
    walls: list[float] = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for round_ in range(runs):
        (clone / "solo.txt").write_text(f"{round_} {turns}\n")
        turn = f"{shlex.quote(LOCKYARD)} git-turn --agent solo && " if turns else ""
        started = time.monotonic()
        subprocess.run(
            ["bash", "-c", f"{turn}git add solo.txt && git commit -q -m solo"],
            cwd=clone, env={**os.environ, **_GIT_ENV}, check=True,
        )  # fmt: skip
        walls.append(time.monotonic() - started)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return statistics.median(walls), cpu / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--solo", type=int, default=0, help="also time N uncontended lines")
    options = parser.parse_args()
    if options.solo:
        with tempfile.TemporaryDirectory(prefix="git-turn-probe-") as scratch:
            clone = make_clone(Path(scratch) / "clone")
            plain = solo_cost(clone, options.solo, turns=False)
            turned = solo_cost(clone, options.solo, turns=True)
        print(f"one uncontended `git add && git commit` line, {options.solo} runs each:")
        for label, (wall, cpu) in (("git alone", plain), ("with git-turn", turned)):
            print(
                f"{label:>24}: {wall * 1000:7.1f} ms wall (median), {cpu * 1000:6.1f} ms CPU "
                f"({cpu / plain[1]:.2f}x)"
            )
    lines = options.agents * options.rounds
    print(f"{options.agents} agents x {options.rounds} `git add && git commit` lines, at once")
    for turns in (False, True):
        with tempfile.TemporaryDirectory(prefix="git-turn-probe-") as scratch:
            clone = make_clone(Path(scratch) / "clone")
            run = run_commits(clone, options.agents, options.rounds, turns=turns)
        label = "with lockyard git-turn" if turns else "without lockyard"
        print(
            f"{label:>24}: {run.failed_lines}/{lines} lines failed, {run.commits} commits, "
            f"{run.mixed_commits} with another agent's file, {run.seconds:.1f} s"
        )
        for error, count in run.errors.most_common(4):
            print(f"{'':>26}{count:4d} x {error[:100]}")


if __name__ == "__main__":
    main()
