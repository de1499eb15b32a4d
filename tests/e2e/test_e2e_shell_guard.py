"""The shell guard inside the real Claude CLI: a Bash write to an unlocked file is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from claude_agent_sdk import ClaudeAgentOptions
from cli_agents import AgentRun, offline_options, run_agent
from fake_messages_api import FakeMessagesApi, call, say

from lockyard.infra.agent_runtime import LockCoordinator
from lockyard.infra.lockstore import LockStore

pytestmark = pytest.mark.anyio

ACQUIRE = "mcp__lockyard__lock_acquire"
RELEASE = "mcp__lockyard__lock_release"


async def test_a_bash_sed_on_an_unlocked_file_is_denied_then_runs_after_lock_acquire(
    fake_api: FakeMessagesApi, tmp_path: Path
) -> None:
    agent = "agent-sed"
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    target = repo / "src" / "app.py"
    target.write_text("value = 1\n")
    store = LockStore(repo, tmp_path / "locks")
    # Not idempotent: every run that got through appends one more marker.
    sed = {"command": "cd src && sed -i 's/$/ # edited/' app.py", "description": "edit"}
    bash = ClaudeAgentOptions(tools=["Bash"], allowed_tools=["Bash"])
    async with (
        LockCoordinator(repo, store=store) as coordinator,
        coordinator.runtime(agent, base_options=bash) as runtime,
    ):
        fake_api.script(
            agent,
            [
                call("Bash", sed),
                call(ACQUIRE, {"filepaths": ["src/app.py"], "timeout_seconds": 0}),
                call("Bash", sed),
                call(RELEASE, {"all": True}),
                say("done"),
            ],
        )
        run = AgentRun(agent)
        options = offline_options(fake_api, agent, tmp_path / "home", runtime.options, run)
        await run_agent(options, "Change the value.", run)
        assert run.result is not None, run.stderr

    denied, acquired, edited, _released = fake_api.outcomes(agent)
    assert denied.is_error
    assert f"{store.canonicalize('src/app.py')} (not locked)" in denied.text
    assert ACQUIRE in denied.text
    assert acquired.json["all_acquired"] is True
    assert not edited.is_error, edited.text
    assert target.read_text() == "value = 1 # edited\n"  # the denied run changed nothing
    assert store.holder("src/app.py") is None
