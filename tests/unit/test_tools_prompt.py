"""The implementer prompt: rendered for one agent, and saying what the tools do."""

from __future__ import annotations

import re

import pytest

from lockyard.prompts.loader import implementer_prompt_template, render_implementer_prompt


@pytest.fixture
def prompt() -> str:
    return render_implementer_prompt(
        agent_id="agent-7",
        repo="/work/repo",
        lock_dir="/run/user/1000/lockyard",
        acquire_tool="mcp__locks__lock_acquire",
        release_tool="mcp__locks__lock_release",
    )


def test_it_names_the_agent_the_repo_the_lock_dir_and_the_tools(prompt: str) -> None:
    assert "You are agent `agent-7`" in prompt
    assert "`/work/repo`" in prompt
    assert "`/run/user/1000/lockyard`" in prompt
    assert "mcp__locks__lock_acquire" in prompt
    assert "mcp__locks__lock_release" in prompt
    assert "$" not in prompt  # every placeholder filled


def test_it_teaches_the_locking_protocol(prompt: str) -> None:
    assert "all in one call" in prompt
    assert '"timeout_seconds": 0' in prompt
    assert "missing" in prompt  # what to do with a partial result
    assert "returns as soon as **any** one" in prompt
    assert "On a timeout you keep what you got" in prompt


def test_it_says_a_victims_locks_were_released_for_it(prompt: str) -> None:
    assert "**All your locks were released for you**" in prompt
    assert "deadlock.released" in prompt
    assert "call `mcp__locks__lock_acquire` again" in prompt.replace("Call", "call")


def test_it_says_when_to_release(prompt: str) -> None:
    assert '`{"all": true}`' in prompt
    assert "as soon as you are done" in prompt


def test_it_is_tool_documentation_only(prompt: str) -> None:
    assert not re.search(r"```(bash|sh|shell|console)", prompt)
    assert "#!/" not in prompt


def test_every_placeholder_is_required() -> None:
    assert set(re.findall(r"\$(\w+)", implementer_prompt_template().template)) == {
        "agent_id",
        "repo",
        "lock_dir",
        "acquire_tool",
        "release_tool",
    }
    with pytest.raises(TypeError):
        render_implementer_prompt(agent_id="a")  # type: ignore[call-arg]


def test_the_default_tool_names_are_the_default_server_keys() -> None:
    text = render_implementer_prompt(agent_id="a", repo="/r", lock_dir="/l")
    assert "mcp__lockyard__lock_acquire" in text


def test_it_says_git_commands_take_turns_and_that_a_waiting_line_is_no_error(prompt: str) -> None:
    assert "`lockyard git-turn --agent" in prompt
    assert "waiting for git's turn" in prompt
    assert "not an error" in prompt
    assert "never in the background" in prompt
