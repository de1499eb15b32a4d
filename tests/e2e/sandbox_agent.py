"""An agent inside a sandbox (run there by sandbox_launcher.py). It talks MCP to
`lockyard serve --ipc /ipc --repo /workspace`, which it starts itself, like an agent CLI would.

Modes:
- `mcp`: a scripted agent. Each stdin line is a JSON command, run concurrently:
  {"tag": t, "tool": name, "arguments": {...}} -> one stdout line {"tag", "is_error", "text"};
  {"tag": t, "look": [paths]} -> {"tag", "root", "ipc", "exists": {path: bool}, "network"}.
- `cli`: the real Claude CLI bundled in claude-agent-sdk, pointed at the fake Messages API
  (env SANDBOX_CLI_ENV), with the same MCP server; prints {"tag": "result", "text"}.
- `cli-init`: `lockyard init claude-code --ipc /ipc` in /workspace (a git checkout), then
  `claude -p` there as its user runs it: the MCP server and the write guard's hook come from
  the project's configuration; prints {"tag": "result", "code", "stderr"}.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

LOCKYARD = str(Path(sys.executable).parent / "lockyard")
SERVE_ARGS = ["serve", "--ipc", "/ipc", "--repo", "/workspace", "--heartbeat-interval", "0.3"]


def emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def look(tag: str, paths: list[str]) -> dict[str, Any]:
    try:
        with socket.create_connection(("1.1.1.1", 53), timeout=0.5):
            network = True
    except OSError:
        network = False
    return {
        "tag": tag,
        "root": sorted(os.listdir("/")),
        "ipc": sorted(os.listdir("/ipc")),
        "exists": {path: os.path.exists(path) for path in paths},
        "network": network,
    }


async def scripted() -> None:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=LOCKYARD, args=SERVE_ARGS)
    async with Client(params) as client, anyio.create_task_group() as group:
        emit({"tag": "ready", "tools": [t.name for t in (await client.list_tools()).tools]})

        async def run(command: dict[str, Any]) -> None:
            if "look" in command:
                emit(look(command["tag"], command["look"]))
                return
            result = await client.call_tool(command["tool"], command.get("arguments", {}))
            text = result.content[0].text if result.content else ""
            emit({"tag": command["tag"], "is_error": bool(result.is_error), "text": text})

        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            if not line:
                break
            group.start_soon(run, json.loads(line))
        group.cancel_scope.cancel()


async def cli() -> None:
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage

    env = json.loads(os.environ["SANDBOX_CLI_ENV"])
    options = ClaudeAgentOptions(
        tools=[],
        mcp_servers={"lockyard": {"type": "stdio", "command": LOCKYARD, "args": SERVE_ARGS}},
        allowed_tools=["mcp__lockyard__lock_acquire", "mcp__lockyard__lock_release"],
        strict_mcp_config=True,
        env=env,
        model="claude-sonnet-4-5",
        cwd="/workspace",
        max_turns=20,
        stderr=lambda line: print(line, file=sys.stderr),
    )
    final = None
    async with ClaudeSDKClient(options) as client:
        await client.query("lock the file, then release it")
        async for message in client.receive_response():
            if isinstance(message, ResultMessage):
                final = message.result
    emit({"tag": "result", "text": final})


def cli_set_up_by_init() -> None:
    import claude_agent_sdk

    claude = str(Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude")
    subprocess.run(["git", "init", "-q", "/workspace"], check=True)
    subprocess.run(
        [LOCKYARD, "init", "claude-code", "--ipc", "/ipc", "--command", LOCKYARD],
        cwd="/workspace", check=True, capture_output=True,
    )  # fmt: skip
    env = json.loads(os.environ["SANDBOX_CLI_ENV"])
    # What accepting the trust dialog once records: project settings apply only then.
    trusted = {"projects": {"/workspace": {"hasTrustDialogAccepted": True}}}
    Path(env["HOME"], ".claude.json").write_text(json.dumps(trusted))
    done = subprocess.run(
        [claude, "-p", "go", "--output-format", "stream-json", "--verbose",
         "--model", "claude-sonnet-4-5", "--permission-mode", "acceptEdits"],
        cwd="/workspace", env={"PATH": os.environ["PATH"], **env}, capture_output=True,
        text=True, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    emit({"tag": "result", "code": done.returncode, "stderr": done.stderr[-3000:]})


if __name__ == "__main__":
    if sys.argv[1] == "cli-init":
        cli_set_up_by_init()
    else:
        anyio.run(scripted if sys.argv[1] == "mcp" else cli)
