"""Agent CLI sessions side by side, as their users run them: each CLI's own executable in a
repository set up by `lockyard init <cli>`, scripted through a fake of its model API on
127.0.0.1. Nothing tells a session its agent id: its lockyard server and its hooks find it
from the CLI process. The same scenarios run for every CLI in `agent_cli_drivers.DRIVERS`."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_cli_drivers import DRIVERS, CliDriver
from cli_sessions import LOCKYARD, CliSession, init_repo
from fake_messages_api import FakeMessagesApi, Step, call, say
from npm_clis import CliUnavailableError

from lockyard.infra.session.process_tree import ancestors
from lockyard.infra.session.registry import SessionRecord, SessionRegistry
from lockyard.infra.tools.locking import LockStore
from polling_support import wait_until

SESSION_SECONDS = 240.0
# Two CLI sessions (and their MCP servers) per test: on a loaded 2-core machine one test can
# take minutes, so the folder's default 120 s pytest timeout is raised here (a backstop only).
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(params=sorted(DRIVERS))
def driver(request: pytest.FixtureRequest) -> CliDriver:
    chosen = DRIVERS[request.param]
    if chosen.cli != "claude-code":
        try:
            from npm_clis import installed_cli

            installed_cli(chosen.cli)
        except CliUnavailableError as exc:
            pytest.skip(f"{chosen.cli} cannot be installed here: {exc}")
    return chosen


@pytest.fixture
def api(driver: CliDriver) -> Iterator[FakeMessagesApi]:
    with driver.api() as started:
        yield started
    started.raise_errors()


@pytest.fixture
def repo(tmp_path: Path, lock_dir: Path, driver: CliDriver) -> Path:
    root = tmp_path / "repo"
    init_repo(root, driver.cli, lock_dir=lock_dir)
    return root


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> Iterator[LockStore]:
    with LockStore(repo, lock_dir) as opened:
        yield opened


@pytest.fixture
def sessions() -> Iterator[list[CliSession]]:
    started: list[CliSession] = []
    yield started
    for session in started:
        session.kill()


class Sessions:
    """The sessions of one test, started by name. A session's agent id is read from the
    session registry: the CLI process that started lockyard's server is the started process
    itself or, for a CLI whose launcher runs the real program as a child (Codex's node
    wrapper), a descendant of it."""

    def __init__(self, driver: CliDriver, api: FakeMessagesApi, repo: Path, tmp: Path,
                 started: list[CliSession], lock_dir: Path) -> None:  # fmt: skip
        self.driver, self.api, self.repo, self.tmp, self.started = driver, api, repo, tmp, started
        self.registry = SessionRegistry(lock_dir)
        self.processes: dict[str, CliSession] = {}
        self._ids: dict[str, SessionRecord] = {}

    def start(self, name: str, steps: list[Step]) -> CliSession:
        self.api.script(name, steps)
        session = self.driver.start(name, self.api, self.repo, self.tmp)
        self.started.append(session)
        self.processes[name] = session
        # Known once its server registers (and remembered after the session ends).
        wait_until(
            lambda: self.record(name) is not None, f"{name}'s session", within=SESSION_SECONDS
        )
        return session

    def record(self, name: str) -> SessionRecord | None:
        if name not in self._ids and name in self.processes:
            root = self.processes[name].pid
            for record, _alive in self.registry.sessions():
                chain = [record.anchor_pid, *(ref.pid for ref in ancestors(record.anchor_pid))]
                if root in chain and record.cli == self.driver.cli:
                    self._ids[name] = record
        return self._ids.get(name)

    @property
    def ids(self) -> dict[str, str]:
        return {name: r.agent_id for name in self.processes if (r := self.record(name))}

    def holds(self, store: LockStore, name: str, path: str) -> bool:
        record = self.record(name)
        return record is not None and store.holder(path) == record.agent_id

    def waits(self, store: LockStore, name: str, path: str) -> bool:
        record = self.record(name)
        return record is not None and any(
            w.agent_id == record.agent_id for w in store.waiters(path)
        )


@pytest.fixture
def clis(driver: CliDriver, api: FakeMessagesApi, repo: Path, tmp_path: Path,
         sessions: list[CliSession], lock_dir: Path) -> Sessions:  # fmt: skip
    return Sessions(driver, api, repo, tmp_path, sessions, lock_dir)


def write_step(driver: CliDriver, path: Path, content: str, **gate: object) -> Step:
    tool, tool_input = driver.write(path, content)
    return call(tool, tool_input, **gate)  # type: ignore[arg-type]


def assert_given_back_at_exit(store: LockStore, driver: CliDriver) -> None:
    """Each session's server gave back what it held when its CLI exited. A CLI that SIGKILLs
    its servers at exit can cut that short; what is left then names a dead process, and the
    next agent that asks takes it at once."""
    left = store.list_locks()
    if not driver.kills_its_mcp_servers:
        assert left == []
        return
    for lock in left:
        assert lock.liveness == "dead", lock
        assert store.try_lock(lock.lock_path, "agent-after-the-sessions"), lock
        store.release(lock.lock_path, "agent-after-the-sessions")
    assert store.list_locks() == []


def test_two_sessions_contend_hand_a_file_over_and_unlocked_edits_and_commits_are_denied(
    clis: Sessions, driver: CliDriver, api: FakeMessagesApi, repo: Path, store: LockStore
) -> None:
    target = repo / "shared.py"
    read = driver.read(target)
    alice = clis.start("alice", [
        call(driver.acquire, {"filepaths": ["shared.py"], "timeout_seconds": 0}),
        write_step(driver, target, "alice\n"),
        call(*driver.run("git add -A && git commit -qm wip")),
        call(driver.release, {"all": True}, gate=lambda: clis.waits(store, "bob", "shared.py")),
        say("alice done"),
    ])  # fmt: skip
    # (gated on bob's own server being up: a write before that is denied too, for want of a
    # session, which is not what this step is about)
    alice_has_written = lambda: (  # noqa: E731
        clis.holds(store, "alice", "shared.py") and clis.record("bob") is not None
        and target.exists() and target.read_text() == "alice\n"
    )  # fmt: skip
    # A CLI that refuses to overwrite a file it has not read (Claude Code checks this before
    # any hook runs) reads alice's file first, so the refusal seen is the write guard's.
    first_read = [call(*read, gate=alice_has_written)] if read else []
    bob = clis.start("bob", [
        *first_read,
        write_step(driver, target, "bob too early\n", gate=alice_has_written),
        call(driver.acquire, {"filepaths": ["shared.py"], "timeout_seconds": 90}),
        *([call(*read)] if read else []),
        write_step(driver, target, "bob\n"),
        say("bob done"),
    ])  # fmt: skip
    assert alice.wait(SESSION_SECONDS) == 0, alice.logs()
    assert bob.wait(SESSION_SECONDS) == 0, bob.logs()

    acquired, written, commit, released = api.outcomes("alice")
    assert acquired.json["results"][0]["holder"] == clis.ids["alice"]
    assert not written.is_error, written.text
    assert commit.is_error
    assert "This git commit would include files you have not locked" in commit.text
    assert released.json["count"] == 1
    bob_seen = api.outcomes("bob")
    first = len(first_read)
    denied, waited, rewritten = bob_seen[first], bob_seen[first + 1], bob_seen[-1]
    assert denied.is_error
    assert "shared.py" in denied.text.replace(str(target), "")  # named by its key, not path
    assert f"locked by {clis.ids['alice']}" in denied.text.replace("locked by agent", "locked by")
    assert driver.acquire in denied.text
    assert waited.json["all_acquired"] is True
    assert waited.json["results"][0]["holder"] == clis.ids["bob"]
    assert not rewritten.is_error, rewritten.text
    assert target.read_text() == "bob\n"
    assert_given_back_at_exit(store, driver)
    log = subprocess.run(["git", "-C", str(repo), "log"], capture_output=True, check=False)
    assert log.returncode != 0  # the denied commit never happened


def test_a_deadlock_between_two_sessions_is_resolved_by_lockyard_monitor(
    clis: Sessions, driver: CliDriver, api: FakeMessagesApi, store: LockStore, lock_dir: Path
) -> None:
    monitor = subprocess.Popen(
        [LOCKYARD, "monitor", "--lock-dir", str(lock_dir), "--json"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        clis.start("alice", [
            call(driver.acquire, {"filepaths": ["a.py"], "timeout_seconds": 0}),
            call(driver.acquire, {"filepaths": ["b.py"], "timeout_seconds": 90},
                 gate=lambda: clis.holds(store, "bob", "b.py")),
            call(driver.release, {"all": True}),
            say("alice done"),
        ])  # fmt: skip
        clis.start("bob", [
            call(driver.acquire, {"filepaths": ["b.py"], "timeout_seconds": 0},
                 gate=lambda: clis.holds(store, "alice", "a.py")),
            call(driver.acquire, {"filepaths": ["a.py"], "timeout_seconds": 90},
                 gate=lambda: clis.waits(store, "alice", "b.py")),
            call(driver.release, {"all": True}),
            say("bob done"),
        ])  # fmt: skip
        for session in clis.started:
            assert session.wait(SESSION_SECONDS) == 0, session.logs()
    finally:
        monitor.terminate()
        reports, _ = monitor.communicate(timeout=30)
    told = {name: api.outcomes(name)[1].json for name in ("alice", "bob")}
    victims = [name for name, result in told.items() if "deadlock" in result]
    assert len(victims) == 1, told
    [victim] = victims
    survivor = "bob" if victim == "alice" else "alice"
    assert told[victim]["deadlock"]["victim"] == clis.ids[victim]
    cycle_agents = {step["agent"] for step in told[victim]["deadlock"]["cycle"]}
    assert cycle_agents == set(clis.ids.values())
    assert told[survivor]["all_acquired"] is True
    assert clis.ids[victim] in reports
    assert store.list_locks() == []


def test_a_killed_sessions_locks_are_reclaimed_and_a_live_idle_sessions_are_kept(
    clis: Sessions, driver: CliDriver, api: FakeMessagesApi, store: LockStore
) -> None:
    killed = threading.Event()
    alice = clis.start("alice", [
        call(driver.acquire, {"filepaths": ["a.py"], "timeout_seconds": 0}),
        say("never heard", gate=killed.is_set),  # alice idles holding a.py until killed
    ])  # fmt: skip
    wait_until(lambda: clis.holds(store, "alice", "a.py"), "alice's lock", within=SESSION_SECONDS)
    record = store.holder_record("a.py")
    session = clis.record("alice")
    assert record is not None
    assert session is not None
    assert record.pid == session.anchor_pid  # the lock names the CLI process, not its server
    assert session.anchor_pid != session.server_pid
    assert not store.try_lock("a.py", "intruder")  # a live, idle session keeps its lock
    alice.kill()  # the CLI, its server and its hooks at once: nothing gets to clean up
    killed.set()
    bob = clis.start("bob", [
        call(driver.acquire, {"filepaths": ["a.py"], "timeout_seconds": 60}),
        say("bob done"),
    ])  # fmt: skip
    assert bob.wait(SESSION_SECONDS) == 0, bob.logs()
    [taken] = api.outcomes("bob")
    assert taken.json["all_acquired"] is True
    assert taken.json["results"][0]["holder"] == clis.ids["bob"]
