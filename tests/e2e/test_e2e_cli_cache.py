"""The agent CLI cache: what `.ci/run` fetches ahead, and when an install counts as done."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest
from agent_cli_drivers import DRIVERS
from npm_clis import PINNED, install_home, installed_cli

ROOT = Path(__file__).parents[2]


def test_ci_fetches_every_cli_the_plays_start_ahead() -> None:
    fetched = re.search(r"python3 tests/e2e/npm_clis\.py ([a-z ]+)", (ROOT / ".ci/run").read_text())
    assert fetched is not None
    assert set(fetched[1].split()) == {d.cli for d in DRIVERS.values() if d.npm}


def fake_npm(folder: Path, calls: Path) -> None:
    """An `npm` that notes its call and puts the CLI's executable where npm links it."""
    folder.mkdir()
    npm = folder / "npm"
    npm.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {calls}\n'
        'while [ "$1" != --prefix ]; do shift; done\n'
        'mkdir -p "$2/node_modules/.bin" && touch "$2/node_modules/.bin/pi"\n'
    )
    npm.chmod(npm.stat().st_mode | stat.S_IXUSR)


def test_an_install_counts_as_done_only_once_npm_has_succeeded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls"
    fake_npm(tmp_path / "bin", calls)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("LOCKYARD_CLI_CACHE", str(tmp_path / "cache"))
    # an executable already linked by an npm that has not ended is not taken for an install
    (install_home("pi") / "node_modules" / ".bin").mkdir(parents=True)
    (install_home("pi") / "node_modules" / ".bin" / "pi").touch()
    executable = installed_cli("pi")
    assert executable == install_home("pi") / "node_modules" / ".bin" / "pi"
    assert installed_cli("pi") == executable
    [call] = calls.read_text().splitlines()  # npm ran once, the second call found it done
    assert f"{PINNED['pi'].package}@{PINNED['pi'].version}" in call
