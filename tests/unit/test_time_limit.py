"""A test past its share of the timeout fails alone: the run goes on with the same workers
(tests/time_limit.py). Runs a small pytest session of its own, as CI runs the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

SLOW_PROPERTY = """
    import time
    from hypothesis import given, settings, strategies as st

    @settings(deadline=None, database=None)
    @given(st.integers())
    def test_a_property_whose_every_example_fails_slowly(n):
        time.sleep(0.5)
        assert False, "every example fails, so hypothesis would shrink for ever"
"""

GROUPED = """
    import pytest

    @pytest.mark.xdist_group("after")
    @pytest.mark.parametrize("n", range(6))
    def test_the_grouped_tests_after_it_still_run(n):
        assert n >= 0
"""


def test_a_test_past_its_time_fails_alone_and_the_workers_run_the_rest(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 4\ntimeout_method = thread\n")
    (tmp_path / "test_slow.py").write_text(textwrap.dedent(SLOW_PROPERTY))
    (tmp_path / "test_grouped.py").write_text(textwrap.dedent(GROUPED))
    # (not this run's own xdist or coverage settings)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE"))}
    env["PYTHONPATH"] = str(TESTS)
    # Only the plugins the failure needs, in both processes (the controller and its worker):
    # the others (coverage, anyio, hypothesis's reporting) cost seconds of imports, and every
    # second of them where no bytecode was compiled.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-p", "pytest_timeout",
         "-p", "time_limit", "-n", "1", "--dist", "loadgroup", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 failed, 6 passed" in out, out
    assert "TestRanTooLong: still running after 3 s" in out, out
    assert "node down" not in out, out
