"""Claude Code's HTTP hook, as `lockyard init` writes it: the bundled Claude CLI posts each
write to the guard that its own `lockyard serve` answers. A write the session has not locked
is refused with the guard's reason, a locked one goes through, and with no guard to answer
the write is refused too (`onFailure: "block"`), never let through."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_cli_drivers import DRIVERS
from cli_sessions import CliSession, free_port, init_repo
from fake_messages_api import FakeMessagesApi, ToolOutcome, call, say

from lockyard.infra.session.registry import SessionRegistry

SESSION_SECONDS = 240.0
pytestmark = pytest.mark.timeout(600)
CLAUDE = DRIVERS["claude-code"]


@pytest.fixture
def api() -> Iterator[FakeMessagesApi]:
    with CLAUDE.api() as started:
        yield started
    started.raise_errors()


@pytest.fixture
def sessions() -> Iterator[list[CliSession]]:
    started: list[CliSession] = []
    yield started
    for session in started:
        session.kill()


def hook_of(repo: Path) -> dict[str, object]:
    settings = json.loads((repo / ".claude/settings.json").read_text())
    [group] = settings["hooks"]["PreToolUse"]
    [hook] = group["hooks"]
    assert isinstance(hook, dict)
    return hook


def answered(outcome: ToolOutcome) -> bool:
    """The lock tool ran. The CLI may ask the model before it has listed the lock tools of
    a server that is still starting ("No such tool available"): the model then asks again."""
    return outcome.json is not None


def test_a_write_is_refused_until_locked_then_allowed_through_the_http_hook(
    api: FakeMessagesApi, tmp_path: Path, lock_dir: Path, sessions: list[CliSession]
) -> None:
    repo = tmp_path / "repo"
    port = init_repo(repo, "claude-code", lock_dir=lock_dir)
    hook = hook_of(repo)
    assert hook["type"] == "http"
    assert hook["onFailure"] == "block"
    assert str(hook["url"]).startswith(f"http://127.0.0.1:{port}/")
    target = repo / "a.py"
    registry = SessionRegistry(lock_dir)
    # (gated on the session's server being up: a write before that is refused too, for want
    # of a guard or a session, which is not what this step is about)
    api.script("alice", [
        call("Write", {"file_path": str(target), "content": "too early\n"},
             gate=lambda: bool(registry.sessions())),
        call(CLAUDE.acquire, {"filepaths": ["a.py"], "timeout_seconds": 0}, until=answered),
        call("Write", {"file_path": str(target), "content": "locked\n"}),
        say("alice done"),
    ])  # fmt: skip
    alice = CLAUDE.start("alice", api, repo, tmp_path)
    sessions.append(alice)
    assert alice.wait(SESSION_SECONDS) == 0, alice.logs()

    denied, *_, acquired, written = api.outcomes("alice")
    assert denied.is_error
    assert "a.py is not locked by you" in denied.text
    assert CLAUDE.acquire in denied.text
    assert acquired.json["all_acquired"] is True
    # The session is the CLI process itself: it posted the hooks, and anchors the session.
    assert acquired.json["results"][0]["holder"] == alice.agent_id("claude-code")
    assert not written.is_error, written.text
    assert target.read_text() == "locked\n"


def test_with_no_guard_to_answer_a_write_is_refused(
    api: FakeMessagesApi, tmp_path: Path, lock_dir: Path, sessions: list[CliSession]
) -> None:
    # Another program holds the guard's port (bound, not listening): the session's server
    # cannot listen there, and a connection to it is refused.
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", free_port()))
    try:
        repo = tmp_path / "repo"
        init_repo(repo, "claude-code", lock_dir=lock_dir, guard_port=squatter.getsockname()[1])
        target = repo / "a.py"
        registry = SessionRegistry(lock_dir)
        api.script("bob", [
            call(CLAUDE.acquire, {"filepaths": ["a.py"], "timeout_seconds": 0},
                 gate=lambda: bool(registry.sessions()), until=answered),
            call("Write", {"file_path": str(target), "content": "unguarded\n"}),
            say("bob done"),
        ])  # fmt: skip
        bob = CLAUDE.start("bob", api, repo, tmp_path)
        sessions.append(bob)
        assert bob.wait(SESSION_SECONDS) == 0, bob.logs()
    finally:
        squatter.close()
    *_, acquired, refused = api.outcomes("bob")
    assert acquired.json["all_acquired"] is True  # the lock tools work; only the guard is gone
    assert refused.is_error
    assert 'onFailure is "block"' in refused.text
    assert not target.exists()
