"""The SDK MCP server through the real MCP protocol (JSON-RPC in memory, as the CLI drives it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from lockyard.core.events import LockEvent, LockEventType
from lockyard.infra.lockstore import LockStore
from lockyard.infra.tools.lock_tools import TOOL_SPECS
from lockyard.infra.transports.sdk.server import create_locking_mcp_server
from lockyard.infra.transports.sdk.servers import get_mcp_servers, new_agent_id


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_text("")
    (root / "b.py").write_text("")
    return root


@pytest.mark.anyio
async def test_the_tools_are_listed_with_our_schemas_and_descriptions(
    repo: Path, lock_dir: Path
) -> None:
    config = create_locking_mcp_server("a1", repo, None, lock_dir=lock_dir)
    assert config["type"] == "sdk"
    assert config["name"] == "lockyard"
    async with Client(config["instance"], mode="legacy") as client:
        tools = (await client.list_tools()).tools
    assert [tool.name for tool in tools] == ["lock_acquire", "lock_release", "lock_status"]
    for tool, spec in zip(tools, TOOL_SPECS, strict=True):
        assert tool.description == spec.description
        assert tool.input_schema == dict(spec.input_schema)


@pytest.mark.anyio
async def test_results_are_one_json_text_block_and_events_flow(repo: Path, lock_dir: Path) -> None:
    seen: list[LockEvent] = []
    config = create_locking_mcp_server("a1", repo, seen.append, lock_dir=lock_dir)
    async with Client(config["instance"], mode="legacy") as client:
        acquired = await client.call_tool(
            "lock_acquire", {"filepaths": ["b.py", "a.py"], "timeout_seconds": 0}
        )
        released = await client.call_tool("lock_release", {"all": True})
    assert not acquired.is_error
    assert len(acquired.content) == 1
    assert acquired.content[0].type == "text"
    store = LockStore(repo, lock_dir)
    keys = [store.canonicalize(name) for name in ("a.py", "b.py")]
    assert json.loads(acquired.content[0].text) == {
        "results": [{"filepath": key, "acquired": True, "holder": "a1"} for key in keys],
        "all_acquired": True,
    }
    assert json.loads(released.content[0].text) == {"released": keys, "count": 2}
    assert [(e.event_type, e.lock_path) for e in seen] == [
        (LockEventType.ACQUIRED, keys[0]),
        (LockEventType.ACQUIRED, keys[1]),
        (LockEventType.RELEASED, keys[0]),
        (LockEventType.RELEASED, keys[1]),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("lock_acquire", {}, '"filepaths" is missing'),
        ("lock_acquire", {"filepaths": []}, '"filepaths" is empty'),
        ("lock_acquire", {"filepaths": "a.py"}, '"filepaths" must be a list'),
        ("lock_acquire", {"filepaths": ["a.py"], "timeout_seconds": -1}, "from 0 to 3600"),
        ("lock_acquire", {"filepaths": ["a.py"] * 257}, "more than 256 files"),
        ("lock_acquire", {"filepaths": ["a.py"], "wait": True}, 'unknown argument "wait"'),
        ("lock_acquire", {"filepaths": ["/etc/passwd"]}, "'/etc/passwd'"),
        ("lock_release", {}, 'give either "filepaths"'),
        ("lock_release", {"all": True, "filepaths": ["a.py"]}, "not both"),
        ("lock_teleport", {}, "Unknown tool 'lock_teleport'"),
    ],
)
async def test_bad_calls_are_error_results_with_our_text_never_protocol_errors(
    repo: Path, lock_dir: Path, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    config = create_locking_mcp_server("a1", repo, None, lock_dir=lock_dir)
    async with Client(config["instance"], mode="legacy") as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error
    assert expected in result.content[0].text
    assert LockStore(repo, lock_dir).holder("a.py") is None


@pytest.mark.anyio
async def test_get_mcp_servers_keys_the_server_and_makes_up_an_agent_id(
    repo: Path, lock_dir: Path
) -> None:
    servers = get_mcp_servers(repo, lock_dir=lock_dir)
    assert list(servers) == ["lockyard"]
    async with Client(servers["lockyard"]["instance"], mode="legacy") as client:
        result = await client.call_tool("lock_acquire", {"filepaths": ["a.py"]})
    holder = json.loads(result.content[0].text)["results"][0]["holder"]
    assert holder.startswith("agent-")
    assert LockStore(repo, lock_dir).holder("a.py") == holder

    named = get_mcp_servers(repo, "a7", lock_dir=lock_dir, server_key="locks-2")
    assert list(named) == ["locks-2"]
    assert named["locks-2"]["name"] == "locks-2"


def test_agent_ids_are_unique() -> None:
    assert len({new_agent_id() for _ in range(50)}) == 50


def test_store_and_its_settings_must_agree(repo: Path, lock_dir: Path, tmp_path: Path) -> None:
    store = LockStore(repo, lock_dir)
    create_locking_mcp_server("a1", repo, None, store=store)  # same repo: fine
    with pytest.raises(ValueError, match="not in the store's checkout"):
        create_locking_mcp_server("a1", tmp_path, None, store=store)
    with pytest.raises(ValueError, match="not both"):
        create_locking_mcp_server("a1", None, None, store=store, lock_dir=lock_dir)
    with pytest.raises(ValueError, match="server key"):
        create_locking_mcp_server("a1", repo, None, store=store, server_name="lock.yard")


def test_the_default_lock_dir_comes_from_the_environment(
    repo: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKYARD_LOCK_DIR", str(lock_dir))
    create_locking_mcp_server("a1", repo, None)
    assert lock_dir.is_dir()


@pytest.mark.anyio
async def test_the_sdk_bridge_serves_the_tools_as_the_cli_calls_them(
    repo: Path, lock_dir: Path
) -> None:
    """The exact path of the CLI's `mcp_message` control requests (internal SDK API)."""
    from claude_agent_sdk._internal.sdk_mcp_bridge import SdkMcpBridge

    config = create_locking_mcp_server("a1", repo, None, lock_dir=lock_dir)
    bridge = SdkMcpBridge("lockyard", config["instance"])
    try:
        init = await bridge.handle(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "claude-code", "version": "2.1.330"},
                },
            }
        )
        assert init["result"]["serverInfo"]["name"] == "lockyard"
        await bridge.handle({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = await bridge.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        schema = listed["result"]["tools"][0]["inputSchema"]
        assert schema["required"] == ["filepaths"]
        called = await bridge.handle(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "lock_acquire",
                    "arguments": {"filepaths": ["a.py"]},
                    "_meta": {"claudecode/toolUseId": "toolu_1", "progressToken": 2},
                },
            }
        )
    finally:
        await bridge.aclose()
    text = called["result"]["content"][0]["text"]
    assert json.loads(text)["all_acquired"] is True
    assert called["result"].get("isError", False) is False
