"""Agent CLI sessions side by side, as their users run them: each CLI's own executable in a
repository set up by `lockyard init <cli>`, scripted through a fake of its model API on
127.0.0.1. Nothing tells a session its agent id: its lockyard server and its hooks find it
from the CLI process.

One pair of sessions per CLI plays every scenario in turn (a CLI session costs seconds to
start; its checks share it). alice and bob, each its own CLI process:

1. contention and hand-over: alice locks shared.py and writes it; bob's early write is refused
   naming alice; bob waits in lock_acquire; alice's shell write of a file she has not locked
   and her `git commit` of unlocked files are refused; she releases and bob gets the file;
2. a deadlock: alice holds a.py and waits for b.py, bob holds b.py and waits for a.py; no
   `lockyard monitor` runs: the sessions' own servers elect the one that picks one victim,
   whose wait returns `deadlock`;
3. no lost edits (git turns are on: `lockyard init --git-turns`): alice locks shared.py again,
   and her whole-file write from what she last saw ("alice", before bob's write) is refused
   as stale, naming bob; she reads it and the same write goes through. Each session commits
   its own file from a line refused for want of git's turn, then prefixed as the refusal
   says: the first commit waits in the repository's pre-commit hook, holding the turn and
   .git/index.lock, until the other session's line has queued behind it; both land;
4. a killed session: alice locks k.py and idles (nobody can take it from her while she lives);
   the test SIGKILLs her whole process group, and bob's wait for k.py reclaims it.

The module-scoped `played` fixture runs this once per CLI (the CLI's tests share an xdist
group, so one worker plays it); each test asserts on one part of what was recorded.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from agent_cli_drivers import DRIVERS, CliDriver
from cli_sessions import CliSession, init_repo
from fake_messages_api import FakeMessagesApi, Reply, Step, ToolOutcome, ToolUse, Turn, call, say
from npm_clis import install_all

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.records import LockInfo
from lockyard.infra.session.process_tree import ancestors
from lockyard.infra.session.registry import SessionRecord, SessionRegistry
from polling_support import wait_until

SESSION_SECONDS = 400.0
# Two CLI sessions (and their MCP servers) play three scenarios: on a loaded 2-core machine
# that can take minutes, so the folder's default 120 s pytest timeout is raised here (a
# backstop only; the first test of a CLI also pays for the whole play in its set-up).
pytestmark = pytest.mark.timeout(900)

# The costliest plays first (in a loaded gate Kilo's ~65 s, OpenCode's ~35 s; the others
# 8-25 s): xdist hands these equal-sized groups out in this order, so a long play never starts
# last.
NAMES = ["kilo", "opencode", *sorted(set(DRIVERS) - {"kilo", "opencode"})]


@pytest.fixture(scope="module")
def npm_clis() -> dict[str, object]:
    """Every npm CLI of the module installed at once (npm mostly waits on the network)."""
    return dict(install_all(name for name in NAMES if DRIVERS[name].npm))


@pytest.fixture(
    scope="module",
    params=[pytest.param(name, marks=pytest.mark.xdist_group(f"cli-{name}")) for name in NAMES],
)
def driver(request: pytest.FixtureRequest, npm_clis: dict[str, object]) -> CliDriver:
    chosen = DRIVERS[request.param]
    unavailable = npm_clis.get(chosen.cli)
    if isinstance(unavailable, Exception):
        pytest.skip(f"{chosen.cli} cannot be installed here: {unavailable}")
    return chosen


class Sessions:
    """The sessions of one play, started by name. A session's agent id is read from the
    session registry: the CLI process that started lockyard's server is the started process
    itself or, for a CLI whose launcher runs the real program as a child (Codex's node
    wrapper), a descendant of it."""

    def __init__(self, driver: CliDriver, api: FakeMessagesApi, repo: Path, tmp: Path,
                 lock_dir: Path) -> None:  # fmt: skip
        self.driver, self.api, self.repo, self.tmp = driver, api, repo, tmp
        self.registry = SessionRegistry(lock_dir)
        self.processes: dict[str, CliSession] = {}
        self._records: dict[str, SessionRecord] = {}

    def start(self, name: str, steps: list[Step]) -> CliSession:
        self.api.script(name, steps)
        session = self.driver.start(name, self.api, self.repo, self.tmp)
        self.processes[name] = session
        return session

    def record(self, name: str) -> SessionRecord | None:
        if name not in self._records and name in self.processes:
            root = self.processes[name].pid
            for record, _alive in self.registry.sessions():
                chain = [record.anchor_pid, *(ref.pid for ref in ancestors(record.anchor_pid))]
                if root in chain and record.cli == self.driver.cli:
                    self._records[name] = record
        return self._records.get(name)

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

    def kill_all(self) -> None:
        for session in self.processes.values():
            session.kill()


class Script:
    """A session's steps, each named, so a test reads the result of a step by its name."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.names: list[str] = []

    def add(self, name: str, step: Step) -> None:
        self.steps.append(step)
        self.names.append(name)

    def results(self, seen: tuple[ToolOutcome, ...]) -> dict[str, ToolOutcome]:
        tools = [name for name, step in zip(self.names, self.steps, strict=True)
                 if not isinstance(step.action, Reply)]  # fmt: skip
        return dict(zip(tools, seen, strict=False))


@dataclass
class Played:
    """What one play of the scenarios left behind, for the tests to look at."""

    driver: CliDriver
    repo: Path
    ids: dict[str, str]
    alice: dict[str, ToolOutcome]
    bob: dict[str, ToolOutcome]
    shared_text: str
    commits: list[list[str]]
    """`git log` oldest first: each commit's subject, then the files it changed."""
    left_at_exit: list[LockInfo]
    kill: dict[str, object] = field(default_factory=dict)
    reclaimed_after_exit: bool = True
    seconds: float = 0.0
    made_tmp_git: bool = False
    """Whether /tmp/.git appeared during the play (a sandbox's mount point for a protected
    `<writable root>/.git`, Codex's in workspace-write: other tests then find a repository
    above their temporary directories)."""


def write_step(driver: CliDriver, path: Path, content: str, **gate: object) -> Step:
    written = driver.write(path, content)
    if callable(written):
        return Step(written, **gate)  # type: ignore[arg-type]
    tool, tool_input = written
    return call(tool, tool_input, **gate)  # type: ignore[arg-type]


def in_turn(driver: CliDriver, command: str) -> Step:
    """A step that runs `command` behind the prefix git's turn refusal gave the agent (the
    latest one it saw), as a model that read the refusal would."""

    def prefixed(turn: Turn) -> ToolUse:
        said = [o.text for o in turn.outcomes if "That is: " in o.text]
        assert said, "no refusal gave the git-turn prefix"
        found = re.search(r"That is: (\S+ git-turn --agent \S+ && )", said[-1])
        assert found is not None, said[-1]
        return ToolUse(*driver.run(found[1] + command))

    return Step(prefixed, label=f"in turn: {command}")


FIRST_COMMIT = "play-first-commit"
"""Made in the git dir by the pre-commit hook of the play's first commit."""

# No gate of the fake's holds either session back (a CLI gives up on a model request that
# waits long): whichever commits first waits in its shell call instead.
PRE_COMMIT = f"""#!{sys.executable}
# The play's first commit (either session's) waits here, holding git's turn and
# .git/index.lock, until the other session's line has taken its ticket behind it: the two
# commits are at once.
import os, select, sys, time
from lockyard.infra.lockstore.inotify import Inotify

GIT_DIR = os.environ.get("GIT_DIR", ".git")  # a hook runs at the top of the worktree
try:
    os.mkdir(os.path.join(GIT_DIR, "{FIRST_COMMIT}"))
except FileExistsError:
    sys.exit(0)  # not the first commit
tickets = os.path.join(GIT_DIR, "lockyard", "git-turns", "tickets")
deadline = time.monotonic() + 120
with Inotify.open() as watch:
    watch.add_watch(tickets)
    while len([n for n in os.listdir(tickets) if n.isdigit()]) < 2:
        if time.monotonic() > deadline:
            sys.exit("pre-commit: the other session's git line never queued behind this one")
        select.select([watch.fd], [], [], 1.0)
        watch.read_pending()
"""


def prepare_commits(repo: Path) -> None:
    """Who commits (a session's HOME is its own, without a git identity), and the hook that
    holds the first commit until the second has queued."""
    for key, value in (("user.name", "agent"), ("user.email", "agent@example.com")):
        subprocess.run(["git", "-C", str(repo), "config", key, value], check=True)
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(PRE_COMMIT)
    hook.chmod(0o755)


def scripts(driver: CliDriver, clis: Sessions, store: LockStore, repo: Path,
            killed: threading.Event) -> tuple[Script, Script]:  # fmt: skip
    shared = repo / "shared.py"
    alice, bob = Script(), Script()
    wip = "git add -A && git commit -qm wip"
    # 1. contention and hand-over; a write, a shell write and a commit refused
    alice.add("acquire shared", call(driver.acquire, {"filepaths": ["shared.py"],
                                                      "timeout_seconds": 0}))  # fmt: skip
    alice.add("write shared", write_step(driver, shared, "alice\n"))
    alice.add("shell write", call(*driver.run("printf x > notes.txt"),
                                  gate=lambda: clis.waits(store, "bob", "shared.py")))  # fmt: skip
    alice.add("commit", call(*driver.run(wip)))  # refused: git's turn first
    alice.add("commit in turn", in_turn(driver, wip))  # refused: unlocked files
    alice.add("release shared", call(driver.release, {"all": True}))
    # (gated on bob's own server being up: a write before that is refused too, for want of
    # a session, which is not what this step is about)
    alice_has_written = lambda: (  # noqa: E731
        clis.holds(store, "alice", "shared.py") and clis.record("bob") is not None
        and shared.exists() and shared.read_text() == "alice\n"
    )  # fmt: skip
    # A CLI that refuses to overwrite a file it has not read (Claude Code and OpenCode check
    # this before any hook runs) reads alice's file first, so the refusal seen is lockyard's.
    read = driver.read(shared)
    if read is not None:
        bob.add("read shared", call(*read, gate=alice_has_written))
    bob.add("early write", write_step(driver, shared, "bob too early\n", gate=alice_has_written))
    bob.add("wait for shared", call(driver.acquire, {"filepaths": ["shared.py"],
                                                     "timeout_seconds": 120}))  # fmt: skip
    if read is not None:
        bob.add("read shared again", call(*read))
    bob.add("write shared", write_step(driver, shared, "bob\n"))
    bob.add("release shared", call(driver.release, {"all": True}))
    # 2. a deadlock between the two sessions
    alice.add("acquire a", call(driver.acquire, {"filepaths": ["a.py"], "timeout_seconds": 0}))
    alice.add("wait for b", call(driver.acquire, {"filepaths": ["b.py"], "timeout_seconds": 120},
                                 gate=lambda: clis.holds(store, "bob", "b.py")))  # fmt: skip
    alice.add("release a b", call(driver.release, {"all": True}))
    bob.add("acquire b", call(driver.acquire, {"filepaths": ["b.py"], "timeout_seconds": 0},
                              gate=lambda: clis.holds(store, "alice", "a.py")))  # fmt: skip
    bob.add("wait for a", call(driver.acquire, {"filepaths": ["a.py"], "timeout_seconds": 120},
                               gate=lambda: clis.waits(store, "alice", "b.py")))  # fmt: skip
    bob.add("release a b", call(driver.release, {"all": True}))
    # 3. a stale whole-file write refused, then allowed after a read; commits at once
    stale = (
        call(*driver.run(f"printf 'alice again\\n' > {shared}"))
        if driver.refuses_stale_writes
        else write_step(driver, shared, "alice again\n")
    )
    alice.add("acquire shared again", call(driver.acquire, {"filepaths": ["shared.py", "alice.txt"],
                                                            "timeout_seconds": 60}))  # fmt: skip
    alice.add("stale write", stale)
    alice.add("read shared", call(*driver.view(shared)))
    alice.add("write after read", stale)
    alice.add("write own", write_step(driver, repo / "alice.txt", "alice\n"))
    alice.add(
        "commit own", in_turn(driver, "git add alice.txt && git commit -qm alice -- alice.txt")
    )
    alice.add("release own", call(driver.release, {"all": True}))
    bob_commit = "git add bob.txt && git commit -qm bob -- bob.txt"
    bob.add("acquire own", call(driver.acquire, {"filepaths": ["bob.txt"], "timeout_seconds": 0}))
    bob.add("write own", write_step(driver, repo / "bob.txt", "bob\n"))
    bob.add("commit own", call(*driver.run(bob_commit)))  # refused: git's turn first
    bob.add("commit in turn", in_turn(driver, bob_commit))
    bob.add("release own", call(driver.release, {"all": True}))
    # 4. alice idles holding k.py until she is killed; bob's wait reclaims it
    alice.add("acquire k", call(driver.acquire, {"filepaths": ["k.py"], "timeout_seconds": 0}))
    alice.add("idle", say("never heard", gate=killed.is_set))
    bob.add("wait for k", call(driver.acquire, {"filepaths": ["k.py"], "timeout_seconds": 90},
                               gate=killed.is_set))  # fmt: skip
    bob.add("done", say("bob done"))
    return alice, bob


@pytest.fixture(scope="module")
def played(driver: CliDriver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Played]:
    tmp = tmp_path_factory.mktemp(f"play-{driver.cli}")
    lock_dir, repo = tmp / "locks", tmp / "repo"
    init_repo(repo, driver.cli, lock_dir=lock_dir, git_turns=True)
    prepare_commits(repo)
    killed = threading.Event()
    began = time.monotonic()
    tmp_git = Path(tempfile.gettempdir()) / ".git"
    tmp_git_before = tmp_git.exists()
    with driver.api() as api, LockStore(repo, lock_dir) as store:
        clis = Sessions(driver, api, repo, tmp, lock_dir)
        # No monitor runs: the sessions' own servers elect the one that resolves deadlocks.
        try:
            alice_script, bob_script = scripts(driver, clis, store, repo, killed)
            alice = clis.start("alice", alice_script.steps)
            bob = clis.start("bob", bob_script.steps)
            wait_until(lambda: clis.holds(store, "alice", "k.py"), "alice's lock on k.py",
                       within=SESSION_SECONDS)  # fmt: skip
            kill = observe_idle_holder(clis, store)
            alice.kill()  # the CLI, its server and its hooks at once: nothing gets to clean up
            killed.set()
            assert bob.wait(SESSION_SECONDS) == 0, bob.logs()
        except BaseException:
            clis.kill_all()
            for session in clis.processes.values():
                print(session.logs())
            raise
        finally:
            clis.kill_all()
        api.raise_errors()
        left = store.list_locks()
        reclaimable = all(
            lock.liveness == "dead" and store.try_lock(lock.lock_path, "after-the-sessions")
            for lock in left
        )
        log = subprocess.run(
            ["git", "-C", str(repo), "log", "--reverse", "--format=%x00%s", "--name-only"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        commits = [entry.split() for entry in log.stdout.split("\0") if entry.strip()]
        yield Played(
            driver, repo, clis.ids,
            alice_script.results(api.outcomes("alice")), bob_script.results(api.outcomes("bob")),
            (repo / "shared.py").read_text(), commits, left, kill,
            reclaimable, time.monotonic() - began, not tmp_git_before and tmp_git.exists(),
        )  # fmt: skip


def observe_idle_holder(clis: Sessions, store: LockStore) -> dict[str, object]:
    record = store.holder_record("k.py")
    session = clis.record("alice")
    assert record is not None
    assert session is not None
    return {
        "lock pid": record.pid,
        "anchor pid": session.anchor_pid,
        "server pid": session.server_pid,
        "taken from a live idle session": store.try_lock("k.py", "intruder"),
    }


def test_contention_hands_the_file_over_after_refusing_the_early_write(played: Played) -> None:
    alice, bob, ids = played.alice, played.bob, played.ids
    assert alice["acquire shared"].json["results"][0]["holder"] == ids["alice"]
    assert not alice["write shared"].is_error, alice["write shared"].text
    denied = bob["early write"]
    assert denied.is_error, denied.text
    shared = played.repo / "shared.py"
    assert "shared.py" in denied.text.replace(str(shared), "")  # named by its key, not path
    assert f"locked by {ids['alice']}" in denied.text.replace("locked by agent", "locked by")
    assert played.driver.acquire in denied.text
    waited = bob["wait for shared"].json
    assert waited["all_acquired"] is True
    assert waited["results"][0]["holder"] == ids["bob"]
    assert not bob["write shared"].is_error, bob["write shared"].text
    assert "bob" in played.alice["read shared"].text  # what alice read later: bob's write


def test_a_shell_write_of_an_unlocked_file_is_refused(played: Played) -> None:
    refused = played.alice["shell write"]
    assert refused.is_error, refused.text
    assert "This command writes files you have not locked: notes.txt" in refused.text
    assert played.driver.acquire in refused.text
    assert not (played.repo / "notes.txt").exists()


def test_a_commit_of_unlocked_files_is_refused(played: Played) -> None:
    refused = played.alice["commit in turn"]
    assert refused.is_error, refused.text
    assert "This git commit would include files you have not locked" in refused.text
    assert ["wip"] not in [commit[:1] for commit in played.commits]  # it never happened


def test_a_stale_whole_file_write_is_refused_and_allowed_after_a_read(played: Played) -> None:
    stale = played.alice["stale write"]
    assert stale.is_error, stale.text
    assert "shared.py changed since you" in stale.text  # read it / wrote it (her own write)
    assert f"agent {played.ids['bob']} wrote it" in stale.text
    assert "Read shared.py again" in stale.text
    assert not played.alice["read shared"].is_error, played.alice["read shared"].text
    after = played.alice["write after read"]
    assert not after.is_error, after.text
    assert played.shared_text == "alice again\n"


def test_two_sessions_commits_at_once_both_land_in_turn(played: Played) -> None:
    """One session's commit line queued while the other's commit held git's turn (the first
    commit's pre-commit hook waited for it), and both landed, each with its own file."""
    for name, said in (("alice", played.alice), ("bob", played.bob)):
        assert not said["commit own" if name == "alice" else "commit in turn"].is_error, said
    # (a refusal that names no lock tool is not told from a result by every CLI's fake)
    refused = played.bob["commit own"].text
    assert "takes git's repository locks" in refused
    assert f"git-turn --agent {played.ids['bob']} && git add bob.txt" in refused
    lines = played.alice["commit own"].text, played.bob["commit in turn"].text
    assert sorted(played.commits) == [["alice", "alice.txt"], ["bob", "bob.txt"]], lines


def test_a_deadlock_between_the_sessions_is_resolved(played: Played) -> None:
    told = {"alice": played.alice["wait for b"].json, "bob": played.bob["wait for a"].json}
    victims = [name for name, result in told.items() if "deadlock" in result]
    assert len(victims) == 1, told
    [victim] = victims
    survivor = "bob" if victim == "alice" else "alice"
    assert told[victim]["deadlock"]["victim"] == played.ids[victim]
    cycle_agents = {step["agent"] for step in told[victim]["deadlock"]["cycle"]}
    assert cycle_agents == set(played.ids.values())
    assert told[survivor]["all_acquired"] is True


def test_a_killed_sessions_lock_is_reclaimed_and_a_live_idle_one_kept(played: Played) -> None:
    kill = played.kill
    assert kill["lock pid"] == kill["anchor pid"]  # the lock names the CLI, not its server
    assert kill["anchor pid"] != kill["server pid"]
    assert kill["taken from a live idle session"] is False
    taken = played.bob["wait for k"].json
    assert taken["all_acquired"] is True
    assert taken["results"][0]["holder"] == played.ids["bob"]


def test_what_a_session_held_is_given_back_when_its_cli_exits(played: Played) -> None:
    """bob's server gave back what he held when his CLI exited. A CLI that SIGKILLs its
    servers at exit can cut that short; what is left then names a dead process, and the
    next agent that asks takes it at once."""
    if not played.driver.kills_its_mcp_servers:
        assert played.left_at_exit == []
    assert played.reclaimed_after_exit, played.left_at_exit


def test_the_play_leaves_no_git_directory_in_tmp(played: Played) -> None:
    assert not played.made_tmp_git
