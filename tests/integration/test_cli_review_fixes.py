"""Review fixes of the CLI, through the real `lockyard` entry point on real lock directories
with locks held and awaited by real processes: status and monitor agree on deadlocks and
victims (literal keys of two repos are two locks), a blank --lock-dir is a usage error, and
no `--help` shows `<bool>`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lockyard.infra.tools.locking import LockStore

LOCKYARD = str(Path(sys.executable).parent / "lockyard")

# An agent process: takes `holds`, says so, waits for a line on stdin, then blocks on `waits`
# one by one, then stays alive until stdin closes. Locks are `repo=name` (name in that repo).
AGENT = """
import sys
from lockyard.infra.tools.locking import LockStore
lock_dir, agent, holds, waits = sys.argv[1:5]
def each(spec):
    for item in filter(None, spec.split(",")):
        repo, name = item.split("=")
        yield LockStore(repo, lock_dir), name
for store, name in each(holds):
    assert store.try_lock(name, agent), name
print("holding", flush=True)
sys.stdin.readline()
for store, name in each(waits):
    store.acquire(name, agent, timeout_seconds=60)
sys.stdin.read()
"""


class Agents:
    def __init__(self, lock_dir: Path) -> None:
        self.lock_dir = lock_dir
        self.processes: list[subprocess.Popen[str]] = []

    def start(self, agent: str, holds: str = "", waits: str = "") -> None:
        process = subprocess.Popen(
            [sys.executable, "-c", AGENT, str(self.lock_dir), agent, holds, waits],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.processes.append(process)
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "holding"

    def go(self) -> None:
        for process in self.processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()

    def close(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait(timeout=10)
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    stream.close()


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


def lockyard(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean_env = {key: value for key, value in os.environ.items() if key != "LOCKYARD_LOCK_DIR"}
    return subprocess.run(
        [LOCKYARD, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env | {"COLUMNS": "300"} | (env or {}),  # no wrapped lines
        cwd=Path(__file__).parent,  # a directory with files: a scan of "." would show them
    )


def json_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(done.stdout)
    return payload


def wait_for_waits(lock_dir: Path, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(LockStore(None, lock_dir).snapshot().waits) < count:
        assert time.monotonic() < deadline, "the agents did not start waiting"
        time.sleep(0.02)


# --- 2: literal keys of two repositories sharing a lock dir are two locks


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


# --- 3: status and monitor name the same victim


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


# --- 8: a blank --lock-dir is a usage error, never the current directory


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["clean", "--all", "--yes"],
        ["monitor", "--once"],
        ["serve", "--agent-id", "a", "--repo", "."],
    ],
    ids=["status", "clean", "monitor", "serve"],
)
@pytest.mark.parametrize("blank", ["", "  "], ids=["empty", "spaces"])
def test_a_blank_lock_dir_is_a_usage_error(command: list[str], blank: str) -> None:
    done = lockyard(*command, "--lock-dir", blank)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "lock directory must not be empty" in done.stderr
    assert done.stdout == ""
    assert "test_" not in done.stderr  # "." was not scanned


@pytest.mark.parametrize("command", [["status"], ["monitor", "--once"]], ids=["status", "monitor"])
def test_a_blank_lock_dir_variable_is_a_usage_error(command: list[str]) -> None:
    done = lockyard(*command, env={"LOCKYARD_LOCK_DIR": "   "})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "LOCKYARD_LOCK_DIR" in done.stderr


# --- 10: no `--help <bool>`


@pytest.mark.parametrize("command", [[], ["status"], ["clean"], ["serve"], ["monitor"], ["demo"]])
def test_help_shows_no_bool_metavar(command: list[str]) -> None:
    done = lockyard(*command, "--help")
    assert done.returncode == 0, done.stderr
    assert "--help" in done.stdout
    assert "<bool>" not in done.stdout
