"""`lockyard lock PATH... -- COMMAND`: a person's or a script's locks in the agents' queues.

Real `lockyard lock` processes on a real lock directory (and a real PostgreSQL server), real
agents beside them (lock stores in this process and other processes, `lockyard serve` over
MCP), SIGKILL, and `lockyard monitor` for the deadlock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import LOCKYARD, lockyard

from lockyard.infra.lockstore import LockBackend, LockStore, open_backend
from pg_support import PgServer
from polling_support import wait_until

TIMED_OUT = 9
STARTS = 120.0
"""How long a fresh `lockyard` process may take to get going on a loaded machine (a hang
beyond that fails the test; no figure is asserted)."""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for name in ("a.py", "b.py"):
        (repo / "src" / name).write_text("x = 1\n")
    return repo


@pytest.fixture
def lock_dir(tmp_path: Path) -> Path:
    path = tmp_path / "locks"
    path.mkdir(mode=0o700)
    return path


class Person:
    """`lockyard lock` processes, ended whatever the test does."""

    def __init__(self, repo: Path, location: list[str]) -> None:
        self.repo = repo
        self.location = location
        self.processes: list[subprocess.Popen[str]] = []

    def start(self, *args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [LOCKYARD, "lock", *self.location, *args],
            cwd=cwd or self.repo,
            env={k: v for k, v in os.environ.items() if k != "LOCKYARD_LOCK_DIR"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.processes.append(process)
        return process

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=30)


@pytest.fixture
def person(repo: Path, lock_dir: Path) -> Iterator[Person]:
    people = Person(repo, ["--lock-dir", str(lock_dir)])
    yield people
    people.close()


def finished(process: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = process.communicate(timeout=120)
    return process.returncode, err


def holder_of(store: LockBackend, key: str) -> str:
    return store.holder(key) or ""


def in_line(store: LockBackend, key: str) -> list[str]:
    return [waiter.agent_id for waiter in store.waiters(key)]


def test_the_command_runs_while_the_lock_is_held_and_its_exit_status_is_returned(
    repo: Path, lock_dir: Path, person: Person
) -> None:
    store = LockStore(str(repo), lock_dir)
    started, go = repo / "started", repo / "go"
    script = f"touch {started}; while [ ! -e {go} ]; do sleep 0.02; done; exit 3"
    # Relative paths are taken from the working directory, as a person types them.
    process = person.start("a.py", "--", "sh", "-c", script, cwd=repo / "src")
    wait_until(started.exists, "the command to start", within=STARTS)
    assert holder_of(store, "src/a.py").startswith("lock-")
    assert not store.try_lock("src/a.py", "agent")
    go.touch()
    code, err = finished(process)
    assert code == 3
    assert store.holder("src/a.py") is None
    assert "released src/a.py" in err


def test_a_person_waits_in_the_agents_queue_in_arrival_order(
    repo: Path, lock_dir: Path, person: Person
) -> None:
    store = LockStore(str(repo), lock_dir)
    assert store.try_lock("src/a.py", "first")
    ran = repo / "ran"
    process = person.start("src/a.py", "--", "sh", "-c", f"touch {ran}; sleep 0.3")
    wait_until(lambda: in_line(store, "src/a.py"), "lockyard lock to queue", within=STARTS)
    person_id = in_line(store, "src/a.py")[0]
    later: list[bool] = []
    waiter = threading.Thread(
        target=lambda: later.append(store.acquire("src/a.py", "later", timeout_seconds=60))
    )
    waiter.start()
    wait_until(lambda: len(in_line(store, "src/a.py")) == 2, "the later agent to queue")
    assert in_line(store, "src/a.py") == [person_id, "later"]
    assert store.release("src/a.py", "first")
    code, err = finished(process)
    waiter.join(timeout=60)
    assert code == 0
    assert later == [True]  # granted only after the person's command ended
    assert "src/a.py: held by first for" in err
    assert "nobody else waiting" in err
    assert holder_of(store, "src/a.py") == "later"


def test_a_sigkilled_lockyard_lock_loses_its_locks_and_its_command_stops(
    repo: Path, lock_dir: Path, person: Person
) -> None:
    store = LockStore(str(repo), lock_dir)
    pid_file = repo / "child.pid"
    process = person.start(
        "src/a.py", "src/b.py", "--", "sh", "-c", f"echo $$ > {pid_file}; exec sleep 600"
    )
    wait_until(
        lambda: pid_file.exists() and pid_file.read_text().strip(), "the command", within=STARTS
    )
    child = int(pid_file.read_text())
    assert holder_of(store, "src/b.py").startswith("lock-")
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    # The command is told to stop (it must not write on without the locks) ...
    wait_until(lambda: not _alive(child), "the command to end with lockyard lock", within=STARTS)
    # ... and the locks name a dead process: the next agent takes them over.
    assert store.acquire("src/a.py", "next", timeout_seconds=30)
    assert store.acquire("src/b.py", "next", timeout_seconds=30)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_without_a_command_the_locks_are_held_until_ctrl_c(
    repo: Path, lock_dir: Path, person: Person
) -> None:
    store = LockStore(str(repo), lock_dir)
    process = person.start("src/a.py")
    wait_until(lambda: holder_of(store, "src/a.py"), "the hold", within=STARTS)
    assert process.stderr is not None
    assert "Ctrl-C releases them" in process.stderr.readline()
    process.send_signal(signal.SIGINT)
    code, _ = finished(process)
    assert code == 0
    assert store.holder("src/a.py") is None


def test_a_timeout_gives_up_with_exit_8_holding_nothing_and_leaving_no_queue_entry(
    repo: Path, lock_dir: Path, person: Person
) -> None:
    store = LockStore(str(repo), lock_dir)
    assert store.try_lock("src/b.py", "agent")
    ran = repo / "ran"
    code, err = finished(
        person.start("--timeout", "0.5", "src/a.py", "src/b.py", "--", "touch", str(ran))
    )
    assert code == TIMED_OUT
    assert "still held by others: src/b.py" in err
    assert not ran.exists()
    assert store.holder("src/a.py") is None  # the lock it had taken is given back
    assert in_line(store, "src/b.py") == []


def test_shared_holds_beside_readers_and_keeps_writers_out_while_the_command_runs(
    repo: Path, lock_dir: Path, person: Person
) -> None:
    store = LockStore(str(repo), lock_dir)
    assert store.try_lock("src/a.py", "reader", mode="shared")
    assert finished(person.start("--timeout", "0", "src/a.py", "--", "true"))[0] == TIMED_OUT
    started, go = repo / "started", repo / "go"
    script = f"touch {started}; while [ ! -e {go} ]; do sleep 0.02; done"
    process = person.start("--shared", "--timeout", "0", "src/", "--", "sh", "-c", script)
    wait_until(started.exists, "the command to start", within=STARTS)
    assert not store.try_lock("src/b.py", "writer")  # under the shared directory lock
    go.touch()
    code, err = finished(process)
    assert code == 0, err
    assert "holding src/ shared as " in err
    assert store.readers("src/a.py") == ("reader",)  # the agent's read is untouched
    assert store.try_lock("src/b.py", "writer")


def test_ctrl_c_while_waiting_ends_the_wait_and_gives_back_what_was_taken(
    repo: Path, lock_dir: Path, person: Person
) -> None:
    store = LockStore(str(repo), lock_dir)
    assert store.try_lock("src/b.py", "agent")
    process = person.start("src/a.py", "src/b.py", "--", "true")
    wait_until(lambda: in_line(store, "src/b.py"), "lockyard lock to queue", within=STARTS)
    process.send_signal(signal.SIGINT)
    code, err = finished(process)
    assert code == 128 + signal.SIGINT
    assert "nothing is held" in err
    assert store.holder("src/a.py") is None
    assert in_line(store, "src/b.py") == []


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        ([], 2, "name at least one file to lock"),
        (["src/a.py", "--"], 2, "nothing after `--`"),
        (["src/a.py", "--", "no-such-program-here"], 127, "command not found on PATH"),
        (["src/a.py", "--", "./src/a.py"], 126, "not an executable file"),
        (["../outside.py", "--", "true"], 2, "outside the checkout"),
        (["src", "--", "true"], 2, "write it with a trailing slash"),
        (["--timeout", "-1", "src/a.py"], 2, "--timeout"),
    ],
)
def test_bad_input_is_one_line_that_says_what_to_do_and_locks_nothing(
    repo: Path, lock_dir: Path, person: Person, args: list[str], code: int, says: str
) -> None:
    returned, err = finished(person.start(*args))
    assert returned == code, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert says in lines[0]
    assert LockStore(str(repo), lock_dir).list_locks() == []


def test_a_deadlock_through_a_persons_lock_is_broken_by_the_monitor(
    repo: Path, lock_dir: Path, person: Person
) -> None:
    env = {**os.environ, "LOCKYARD_LOCK_DIR": str(lock_dir)}
    monitor = subprocess.Popen(
        [LOCKYARD, "monitor", "--json"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        agent = _McpAgent("bob", repo, env)
        try:
            assert agent.acquire(["src/b.py"])["all_acquired"]
            # The person takes src/a.py, then waits for src/b.py (bob's) ...
            process = person.start("src/a.py", "src/b.py", "--", "true")
            store = LockStore(str(repo), lock_dir)
            wait_until(lambda: in_line(store, "src/b.py"), "lockyard lock to wait", within=STARTS)
            # ... and bob waits for src/a.py: a cycle; one of the two gives way.
            result = agent.acquire(["src/a.py"], timeout=90)
        finally:
            agent.close()  # bob's session ends: his locks go, the person can finish
        code, err = finished(process)
    finally:
        monitor.send_signal(signal.SIGTERM)
        output, _ = monitor.communicate(timeout=30)
    assert code == 0, err
    found = [d for line in output.splitlines() for d in json.loads(line)["deadlocks"]]
    assert found, output
    agents = {step["agent_id"] for step in found[0]["deadlock"]["cycle"]}
    person_id = next(a for a in agents if a != "bob")
    assert person_id.startswith("lock-")
    if found[0]["victim"] == "bob":
        assert result["deadlock"]["victim"] == "bob"
    else:
        assert "gave way to break a deadlock" in err
        assert result["all_acquired"]


class _McpAgent:
    """`lockyard serve` driven over stdio MCP (JSON-RPC lines), one call at a time."""

    def __init__(self, agent: str, repo: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [LOCKYARD, "serve", "--agent-id", agent, "--repo", str(repo)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._id = 0
        self._request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "test", "version": "1"}})  # fmt: skip
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def acquire(self, files: list[str], timeout: float = 30) -> dict[str, Any]:
        reply = self._request(
            "tools/call",
            {"name": "lock_acquire", "arguments": {"filepaths": files, "timeout_seconds": timeout}},
        )
        data: dict[str, Any] = json.loads(reply["result"]["content"][0]["text"])
        return data

    def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._id += 1
        self._send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        assert self.process.stdout is not None
        while True:
            message: dict[str, Any] = json.loads(self.process.stdout.readline())
            if message.get("id") == self._id:
                return message

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        assert self.process.stdout is not None
        self.process.stdout.close()


def test_on_postgresql_a_person_queues_behind_an_agent_and_a_sigkill_frees_the_lock(
    repo: Path, pg_server: PgServer, pg_schema: str
) -> None:
    spec = pg_server.spec(pg_schema)
    store = open_backend(str(repo), spec)
    people = Person(repo, ["--backend", spec])
    try:
        assert store.try_lock("src/a.py", "agent")
        started = repo / "started"
        process = people.start("src/a.py", "--", "sh", "-c", f"touch {started}; exec sleep 600")
        wait_until(lambda: in_line(store, "src/a.py"), "lockyard lock to queue", within=STARTS)
        assert store.release("src/a.py", "agent")
        wait_until(started.exists, "the command to start once the agent released", within=STARTS)
        assert holder_of(store, "src/a.py").startswith("lock-")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        # Its database session died with it, and the lock with the session.
        assert store.acquire("src/a.py", "next", timeout_seconds=30)
        code, _ = finished(people.start("--timeout", "0", "src/a.py", "--", "true"))
        assert code == TIMED_OUT
    finally:
        people.close()
        store.close()


def test_help_names_the_flock_like_use_and_the_exit_codes() -> None:
    result = lockyard("lock", "--help")
    assert result.returncode == 0
    assert "flock(1)" in result.stdout
    assert "9 when --timeout passed first" in " ".join(result.stdout.split())
