"""The shell guard's corpus: every case in tests/shell_corpus/*.json, judged by the real hook
and, when allowed, run for real (tests/shell_run_support.py).

Each case runs in a fresh copy of the corpus repository. The hook (`lockyard hook pre-tool-use`
with Claude Code's payload, in this process) must decide as the case says and name exactly
the files it lists; judging must change nothing; and an allowed command, run by bash, must
change only files the agent holds (and nothing in the lock directory)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockyard.infra.hooks.shell_guard.decide import ShellGuardPolicy, decide_shell_command
from shell_run_support import AGENT, Sandbox, judge_and_run, make_template, scratch_space

CORPUS = Path(__file__).parent.parent / "shell_corpus"


def load_cases() -> list[Any]:
    params = []
    for path in sorted(CORPUS.glob("*.json")):
        for index, case in enumerate(json.loads(path.read_text())):
            params.append(pytest.param(case, id=f"{path.stem}-{index}: {case['command'][:60]}"))
    return params


CASES = load_cases()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with scratch_space(tmp_path_factory.mktemp("corpus")) as directory:
        yield directory


@pytest.fixture(scope="module")
def template(scratch: Path) -> Path:
    return make_template(scratch)


@pytest.fixture
def sandbox_root(scratch: Path) -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(dir=scratch))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_corpus_has_at_least_600_cases() -> None:
    assert len(CASES) >= 600


@pytest.mark.parametrize("case", CASES)
def test_shell_guard_decides_as_the_corpus_says(
    case: dict[str, Any], template: Path, sandbox_root: Path
) -> None:
    sandbox = Sandbox.copy_of(template, sandbox_root / "case")
    sandbox.setup([sandbox.placed(line) for line in case.get("setup", [])])
    held = set(case.get("locks", []))
    cwd = case.get("cwd", ".")
    command = sandbox.placed(case["command"])
    if "policy" in case:  # a policy is the decision API's: judged there, not by the hook
        store = sandbox.lock(held, case.get("others"))
        decision = decide_shell_command(
            command, sandbox.repo / cwd, AGENT, store,
            policy=ShellGuardPolicy(undetermined=case["policy"]), home=str(sandbox.home),
        )  # fmt: skip
        assert ("allow" if decision.allowed else "deny") == case["decision"], decision
        return
    outcome = judge_and_run(
        sandbox, command, held, others=case.get("others"), cwd=cwd,
        run=case.get("run", True),
    )  # fmt: skip
    verdict = outcome.verdict
    assert ("allow" if verdict.allowed else "deny") == case["decision"], outcome.explain()
    if "unlocked" in case:
        assert sorted(verdict.unlocked) == sorted(case["unlocked"]), outcome.explain()
    assert verdict.undetermined == case.get("undetermined", False), outcome.explain()
    assert verdict.refused == case.get("refused", False), outcome.explain()
    assert not outcome.changed_by_judging, outcome.explain()
    assert not outcome.wrongly_allowed, outcome.explain()
