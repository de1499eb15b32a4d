"""The issue's test: agents committing at once in one checkout, each line run after
`lockyard git-turn`, lose no commit (benchmarks/probe_git_turns.py runs it at full size, and
without turns beside it, to count the failures the turns prevent)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
AGENTS = 8
ROUNDS = 3
"""Rounds per agent here (the probe's default is 30): 24 lines queue one after another, and
each starts a Python process; the probe shows the larger run."""


@pytest.fixture
def probe() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import probe_git_turns

        yield probe_git_turns
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_eight_agents_committing_at_once_through_git_turns_fail_no_line_and_mix_no_commit(
    probe: ModuleType, tmp_path: Path
) -> None:
    clone = probe.make_clone(tmp_path / "clone")
    run = probe.run_commits(clone, AGENTS, ROUNDS, turns=True)
    assert (run.failed_lines, dict(run.errors)) == (0, {})
    assert (run.commits, run.mixed_commits) == (AGENTS * ROUNDS, 0)
