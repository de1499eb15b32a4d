"""A small program that does what an agent CLI does for lockyard, and nothing else.

It starts `lockyard serve` as its own stdio MCP server (no agent id: the session is derived
from this process) and runs `lockyard hook` through a shell for each tool call it is told to
make, as Claude Code runs command hooks. Its executable is the Python interpreter: the tests
use it to show that sessions depend on the process tree, not on a CLI's name.

Commands arrive on stdin, one JSON object per line; each answer is one JSON line on stdout:

    {"op": "acquire", "files": [...], "timeout": 0}   -> the lock_acquire result
    {"op": "release"}                                  -> the lock_release {"all": true} result
    {"op": "hook", "payload": {...}, "cli": "claude-code"} -> {"stdout", "exit_code"}
    {"op": "exit"}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


async def main(cli: str, repo: str) -> None:
    params = StdioServerParameters(
        command=LOCKYARD,
        args=["serve", "--cli", cli, "--log-level", "WARNING"],
        env={
            key: value for key, value in os.environ.items() if key.startswith(("LOCKYARD", "COV"))
        },
        cwd=repo,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        print(json.dumps({"ready": True}), flush=True)
        stdin = anyio.wrap_file(sys.stdin)
        async for line in stdin:
            command = json.loads(line)
            answer = await _run(session, command, repo)
            if answer is None:
                return
            print(json.dumps(answer), flush=True)


async def _run(session: ClientSession, command: dict[str, Any], repo: str) -> Any:
    op = command["op"]
    if op == "acquire":
        arguments = {"filepaths": command["files"], "timeout_seconds": command.get("timeout", 0)}
        result = await session.call_tool("lock_acquire", arguments)
        return json.loads(result.content[0].text)  # type: ignore[union-attr]
    if op == "release":
        result = await session.call_tool("lock_release", {"all": True})
        return json.loads(result.content[0].text)  # type: ignore[union-attr]
    if op == "hook":
        hook = f"{LOCKYARD} hook pre-tool-use --cli {command.get('cli', 'claude-code')}"
        done = await anyio.to_thread.run_sync(
            lambda: subprocess.run(
                ["/bin/sh", "-c", hook],
                input=json.dumps(command["payload"]).encode(),
                capture_output=True,
                cwd=repo,
                check=False,
            )
        )
        return {"stdout": done.stdout.decode(), "exit_code": done.returncode}
    return None


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
