"""An agent on a host of the network-namespace test: one PgLockStore, the real LockTools and
write guard, driven by JSON commands on stdin, answering one JSON line each.

Commands: {"op": "acquire", "paths": [...], "timeout": s}, {"op": "release", "paths": [...]},
{"op": "guard", "path": p} (the write guard's verdict on editing p),
{"op": "rounds", "path": p, "rounds": n, "ledger": file} (lock, append to the ledger, release,
n times), {"op": "host"}. Run as: netns_agent.py REPO BACKEND AGENT_ID.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

import anyio

from lockyard.infra.crossproc.sources import victim_notices_for
from lockyard.infra.hooks.write_guard.hook import make_write_guard_hook
from lockyard.infra.lockstore.postgres import PgLockStore
from lockyard.infra.tools.lock_tools import LockTools


def append(ledger: str, line: str) -> None:
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


async def handle(store: PgLockStore, tools: LockTools, command: dict[str, Any]) -> Any:
    op = command["op"]
    agent = tools.agent_id
    if op == "host":
        return {"host": socket.gethostname()}
    if op == "acquire":
        arguments = {"filepaths": command["paths"], "timeout_seconds": command.get("timeout", 0)}
        return (await tools.acquire(arguments)).data
    if op == "release":
        return (await tools.release({"filepaths": command["paths"]})).data
    if op == "guard":
        guard = make_write_guard_hook(store, agent)
        path = os.path.join(store.namespace, command["path"])
        verdict = await guard({"tool_name": "Write", "tool_input": {"file_path": path}}, None, {})
        return {"allowed": verdict == {}, "verdict": verdict}
    if op == "rounds":
        for _ in range(command["rounds"]):
            assert await store.acquire_async(command["path"], agent, timeout_seconds=120)
            fence = store.grant_fence(command["path"], agent)
            append(command["ledger"], f"take {agent} {fence}")
            append(command["ledger"], f"give {agent} {fence}")
            assert store.release(command["path"], agent)
        return {"done": command["rounds"]}
    raise ValueError(f"unknown op {op}")


def main() -> None:
    repo, backend, agent = sys.argv[1:4]
    store = PgLockStore(repo, backend)
    tools = LockTools(store, agent, victim_notices=victim_notices_for(store))
    print(json.dumps({"ready": socket.gethostname()}), flush=True)
    for line in sys.stdin:
        result = anyio.run(handle, store, tools, json.loads(line))
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
