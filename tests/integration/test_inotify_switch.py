"""One environment switch turns inotify off for every part of lockyard: the lock store's
waiters and the cross-process watchers alike."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lockyard.infra.lockstore import inotify_available

PROBE = (
    "from lockyard.infra.lockstore import Inotify, process_hub; "
    "print(process_hub().push_available, Inotify.open() is not None)"
)


def _probe(**switches: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name != "LOCKYARD_NO_INOTIFY"}
    env.update(switches)
    return subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )


@pytest.mark.skipif(not inotify_available(), reason="no inotify here")
@pytest.mark.parametrize(
    "switches",
    [{}, {"LOCKYARD_NO_INOTIFY": "0"}, {"LOCKYARD_NO_INOTIFY": "false"}],
)
def test_without_the_switch_waiters_and_watchers_use_inotify(switches: dict[str, str]) -> None:
    assert _probe(**switches).stdout.split() == ["True", "True"]


@pytest.mark.parametrize(
    "switches",
    [
        {"LOCKYARD_NO_INOTIFY": "1"},
        {"LOCKYARD_NO_INOTIFY": "yes"},
        {"LOCKYARD_NO_INOTIFY": "true"},
    ],
)
def test_the_switch_turns_inotify_off_for_waiters_and_watchers(
    switches: dict[str, str],
) -> None:
    assert _probe(**switches).stdout.split() == ["False", "False"]
