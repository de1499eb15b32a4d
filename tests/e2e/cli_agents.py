"""Run real Claude CLI agents (through ``ClaudeSDKClient``) against the fake Messages API."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    SystemMessage,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from fake_messages_api import FakeMessagesApi

MODEL = "claude-sonnet-4-5"


@dataclass
class AgentRun:
    """Everything one agent's session produced, as the SDK reported it."""

    agent: str
    messages: list[Any] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)

    @property
    def result(self) -> ResultMessage | None:
        found = [m for m in self.messages if isinstance(m, ResultMessage)]
        return found[-1] if found else None

    @property
    def final_text(self) -> str | None:
        """The text the session ended with (the last model turn's reply)."""
        return None if self.result is None else self.result.result

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [
            block
            for m in self.messages
            if isinstance(m, AssistantMessage)
            for block in m.content
            if isinstance(block, ToolUseBlock)
        ]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        return [
            block
            for m in self.messages
            if isinstance(m, UserMessage) and isinstance(m.content, list)
            for block in m.content
            if isinstance(block, ToolResultBlock)
        ]

    @property
    def init(self) -> dict[str, Any]:
        """The CLI's init message: its tools and MCP server statuses."""
        for m in self.messages:
            if isinstance(m, SystemMessage) and m.subtype == "init":
                return dict(m.data)
        return {}


def offline_options(
    api: FakeMessagesApi,
    agent: str,
    home: Path,
    options: ClaudeAgentOptions | None = None,
    run: AgentRun | None = None,
) -> ClaudeAgentOptions:
    """``options`` (or defaults) pointed at the fake API as ``agent``, with no network and no key.

    The CLI writes its state under HOME, so each agent gets its own. Its stderr is kept in
    ``run`` so a failing test shows why the CLI stopped.
    """
    base = options if options is not None else ClaudeAgentOptions(tools=[])
    home.mkdir(parents=True, exist_ok=True)
    env = {**base.env, **api.cli_env(agent, str(home))}
    sink = run.stderr.append if run is not None else None
    return dataclasses.replace(
        base,
        env=env,
        model=base.model or MODEL,
        cwd=base.cwd or home,
        max_turns=base.max_turns or 20,
        stderr=base.stderr or sink,
    )


async def run_agent(
    options: ClaudeAgentOptions, prompt: str, run: AgentRun, *, limit_seconds: float = 45.0
) -> AgentRun:
    """Run one session to its result message; a hang fails after ``limit_seconds``."""
    with anyio.fail_after(limit_seconds):
        async with ClaudeSDKClient(options) as client:
            await client.query(prompt)
            async for message in client.receive_response():
                run.messages.append(message)
    return run
