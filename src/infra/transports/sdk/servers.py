"""`get_mcp_servers`: the MCP servers an implementer agent needs, keyed as the CLI names them."""

from __future__ import annotations

import os
import secrets
import socket
from typing import TYPE_CHECKING

from ....core.ports import EmitLockEvent, VictimNotices
from ...tools.lock_tools import ToolStore
from ...tools.naming import DEFAULT_SERVER_KEY
from .server import create_locking_mcp_server

if TYPE_CHECKING:
    from claude_agent_sdk import McpSdkServerConfig


def new_agent_id(prefix: str = "agent") -> str:
    """A readable id unique across processes and hosts, e.g. `agent-myhost-4242-9f3c1a2b`."""
    host = socket.gethostname().split(".")[0] or "host"
    return f"{prefix}-{host}-{os.getpid()}-{secrets.token_hex(4)}"


def get_mcp_servers(
    repo_path: str | os.PathLike[str],
    agent_id: str | None = None,
    emit_lock_event: EmitLockEvent | None = None,
    *,
    store: ToolStore | None = None,
    lock_dir: str | os.PathLike[str] | None = None,
    backend: str | None = None,
    namespace: str | None = None,
    victim_notices: VictimNotices | None = None,
    server_key: str = DEFAULT_SERVER_KEY,
) -> dict[str, McpSdkServerConfig]:
    """`{server_key: <lock tools server>}` for `ClaudeAgentOptions.mcp_servers`.

    Without `agent_id` a fresh unique id is made up; pass one whenever you need to know it
    (for the monitor, `lockyard status`, or to release the agent's locks later). `backend`
    (`postgresql://...` or a lock directory; default `LOCKYARD_BACKEND`) picks where the
    locks live when no `store` is given. `namespace` names the repository explicitly, so that
    checkouts elsewhere (other hosts, containers) given the same name share locks; by default
    it is the name derived from the repository, shared by its git worktrees (or
    `LOCKYARD_NAMESPACE` when set).
    """
    server = create_locking_mcp_server(
        agent_id if agent_id is not None else new_agent_id(),
        repo_path,
        emit_lock_event,
        store=store,
        lock_dir=lock_dir,
        backend=backend,
        namespace=namespace,
        victim_notices=victim_notices,
        server_name=server_key,
    )
    return {server_key: server}
