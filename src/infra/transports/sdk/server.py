"""The lock tools (`lock_acquire`, `lock_release`, `lock_status`) as an in-process SDK MCP
server (a thin adapter).

The behaviour lives in `lock_tools.LockTools`; this module only wraps the shared MCP server
in the `McpSdkServerConfig` that `ClaudeAgentOptions.mcp_servers` takes. The model sees the
tools as `mcp__<key in mcp_servers>__lock_acquire`: the dict key, not the server name.
The server is an mcp `Server`: mcp comes with `lockyard[sdk]`, and is imported only when a
server is made (the coordinator's store and monitor, which the demo uses, work without it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ....core.extras import MCP, require
from ....core.ports import EmitLockEvent, VictimNotices
from ...lockstore import open_backend
from ...tools.lock_tools import LockTools, ToolStore
from ...tools.naming import DEFAULT_SERVER_KEY, check_server_key

if TYPE_CHECKING:
    # A TypedDict: the config is a plain dict, so the server needs mcp but not the SDK.
    from claude_agent_sdk import McpSdkServerConfig

USE = "create_locking_mcp_server (the lock tools' in-process MCP server)"


def create_locking_mcp_server(
    agent_id: str,
    repo_namespace: str | os.PathLike[str] | None = None,
    emit_lock_event: EmitLockEvent | None = None,
    *,
    store: ToolStore | None = None,
    lock_dir: str | os.PathLike[str] | None = None,
    backend: str | None = None,
    namespace: str | None = None,
    victim_notices: VictimNotices | None = None,
    server_name: str = DEFAULT_SERVER_KEY,
) -> McpSdkServerConfig:
    """The SDK MCP server through which `agent_id` locks files of the repo `repo_namespace`.

    Every hold and wait goes to `emit_lock_event` as it happens (usually
    `DeadlockMonitor.handle_event`). Pass `store` to share one `LockStore` between agents
    (then `repo_namespace`, if given, must be the store's repo, and `lock_dir` must be omitted);
    otherwise one is opened on `backend` (`postgresql://...`, default `LOCKYARD_BACKEND`) or
    on `lock_dir` (default: `LOCKYARD_LOCK_DIR`, else a per-user runtime directory), for the
    repository `namespace` (default: the name derived from the repository, see `LockStore`).
    `victim_notices` (usually the monitor) lets a waiting call return the deadlock result
    when this agent is chosen as a victim.
    """
    require(MCP, USE)  # before a store is opened for nothing
    tools = LockTools(
        _resolve_store(store, repo_namespace, lock_dir, backend, namespace),
        agent_id,
        emit_lock_event=emit_lock_event,
        victim_notices=victim_notices,
    )
    return lock_tools_server_config(tools, server_name)


def lock_tools_server_config(
    tools: LockTools, server_name: str = DEFAULT_SERVER_KEY
) -> McpSdkServerConfig:
    """Wrap ready `LockTools` as an SDK MCP server config."""
    check_server_key(server_name)
    require(MCP, USE)
    from ...tools.mcp_server import build_lock_tools_server  # imports mcp

    config: McpSdkServerConfig = {
        "type": "sdk",
        "name": server_name,
        "instance": build_lock_tools_server(tools, server_name),
    }
    return config


def _resolve_store(
    store: ToolStore | None,
    repo_namespace: str | os.PathLike[str] | None,
    lock_dir: str | os.PathLike[str] | None,
    backend: str | None = None,
    namespace: str | None = None,
) -> ToolStore:
    if store is None:
        return open_backend(repo_namespace, backend, lock_dir=lock_dir, namespace=namespace)
    if lock_dir is not None or backend is not None:
        raise ValueError(
            "pass either store= or lock_dir=/backend=, not both: the store has its backend"
        )
    if namespace is not None and namespace != getattr(store, "namespace", namespace):
        raise ValueError(
            f"namespace {namespace!r} is not the store's namespace "
            f"{getattr(store, 'namespace', None)!r}: pass either store= or namespace="
        )
    root = getattr(store, "root", None)
    if repo_namespace is not None and isinstance(root, str):
        given = Path(repo_namespace).resolve()
        if given != Path(root) and Path(root) not in given.parents:
            raise ValueError(
                f"repo_namespace {os.fspath(repo_namespace)!r} is not in the store's checkout "
                f"{root!r}: pass the same repo, or omit repo_namespace"
            )
    return store
