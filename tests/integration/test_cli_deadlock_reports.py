"""`lockyard status` and `lockyard monitor` on one lock directory shared by two repositories,
through the real entry point, with locks held and awaited by real agent processes: the same
literal key in two repositories is two locks (no false deadlock, each named with its
repository), and both commands name the same cycle and the same victim."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import Agents, lockyard

from lockyard.infra.lockstore import LockStore
from polling_support import wait_until


@pytest.fixture
def repos(tmp_path: Path) -> tuple[Path, Path]:
    made = []
    for name in ("one", "two"):
        repo = tmp_path / name
        repo.mkdir()
        (repo / "f.py").write_text("x\n")
        made.append(repo.resolve())
    return made[0], made[1]


@pytest.fixture
def make_agents(tmp_path: Path) -> Iterator[Callable[[str], Agents]]:
    started: list[Agents] = []

    def make(name: str) -> Agents:
        lock_dir = tmp_path / name
        lock_dir.mkdir(mode=0o700)
        agents = Agents(lock_dir)
        started.append(agents)
        return agents

    yield make
    for agents in started:
        agents.close()


def json_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(done.stdout)
    return payload


def wait_for_waits(lock_dir: Path, count: int) -> None:
    wait_until(
        lambda: len(LockStore(None, lock_dir).snapshot().waits) >= count,
        f"{count} agents waiting",
    )


# --- the same literal key in two repositories is two locks


@pytest.mark.parametrize("flip", [False, True], ids=["one-two", "two-one"])
def test_literal_keys_of_two_repos_make_no_false_deadlock(
    repos: tuple[Path, Path], make_agents: Callable[[str], Agents], flip: bool
) -> None:
    """alice holds A's __db__, bob holds B's __db__ and waits on A's f.py (held by carol),
    carol waits on A's __db__. No cycle: bob -> carol -> alice. Keyed by the bare `__db__`,
    one of the two orders made it bob -> carol -> bob. Both orders are run."""
    a, b = reversed(repos) if flip else repos
    agents = make_agents("locks")
    agents.start("alice", holds=f"{a}=__db__")
    agents.start("bob", holds=f"{b}=__db__", waits=f"{a}=f.py")
    agents.start("carol", holds=f"{a}=f.py", waits=f"{a}=__db__")
    agents.go()
    wait_for_waits(agents.lock_dir, 2)

    status = lockyard("status", "--lock-dir", str(agents.lock_dir), "--json")
    monitor = lockyard("monitor", "--once", "--no-resolve", "--json", "--lock-dir",
                       str(agents.lock_dir))  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert json_of(status)["deadlocks"] == []
    assert monitor.returncode == 0, monitor.stdout
    nodes = {lock["node"] for lock in json_of(status)["locks"]}
    assert nodes == {f"{a}::__db__", f"{b}::__db__", f"{a}::f.py"}

    text = lockyard("status", "--lock-dir", str(agents.lock_dir))
    assert f"{a}::__db__" in text.stdout  # the table names each repo's key
    assert "deadlock" not in text.stdout


def test_a_real_cycle_on_literal_keys_names_each_repos_key(
    repos: tuple[Path, Path], make_agents: Callable[[str], Agents]
) -> None:
    a, b = repos
    agents = make_agents("locks")
    agents.start("alice", holds=f"{a}=__db__", waits=f"{b}=__db__")
    agents.start("bob", holds=f"{b}=__db__", waits=f"{a}=__db__")
    agents.go()
    wait_for_waits(agents.lock_dir, 2)
    [deadlock] = json_of(lockyard("status", "--lock-dir", str(agents.lock_dir), "--json"))[
        "deadlocks"
    ]
    assert {step["lock_path"] for step in deadlock["cycle"]} == {f"{a}::__db__", f"{b}::__db__"}


# --- status and monitor name the same victim


def test_status_and_monitor_name_the_same_victim(
    repos: tuple[Path, Path], make_agents: Callable[[str], Agents]
) -> None:
    """ann took her lock first, so she is the older agent; the policy (equal lock counts)
    spares the older one. A monitor without ages fell back to the smallest id: ann."""
    a, _b = repos
    agents = make_agents("locks")
    agents.start("ann", holds=f"{a}=__x__", waits=f"{a}=__y__")
    time.sleep(0.05)  # distinct grant times: the agents' ages
    agents.start("bea", holds=f"{a}=__y__", waits=f"{a}=__x__")
    agents.go()
    wait_for_waits(agents.lock_dir, 2)

    status = json_of(lockyard("status", "--lock-dir", str(agents.lock_dir), "--json"))
    done = lockyard("monitor", "--once", "--no-resolve", "--json", "--lock-dir",
                    str(agents.lock_dir))  # fmt: skip
    assert done.returncode == 6, done.stderr
    [from_monitor] = json_of(done)["deadlocks"]
    [from_status] = status["deadlocks"]
    assert from_status["victim"] == from_monitor["victim"] == "bea"
    assert from_status["cycle"] == from_monitor["deadlock"]["cycle"]
