"""Sandboxed agents end to end: each sandbox is a separate process tree in its own mount and pid
namespace (`unshare`) that sees only its IPC folder at /ipc and its own checkout at /workspace;
the host runs `lockyard ipc-host` on its own checkout and lock directory. Agents speak MCP to
`lockyard serve --ipc` inside their sandbox; one of them is the real Claude CLI bundled in
claude-agent-sdk, scripted through the fake Messages API.

Checked: isolation, contention with FIFO handoff, a deadlock between sandboxes resolved
softly, an admin force-release told to the holder, the CLI agent waiting for and getting a
lock, and a SIGKILLed sandbox's locks reclaimed by the host. And the write guard inside a
sandbox: the Claude CLI set up by `lockyard init --ipc /ipc` is paused (every process of its
sandbox stopped, as `docker pause` does) while it holds a lock; the host reclaims it; its
next write is refused by its own hook, which asked the host through the folder.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream
from fake_messages_api import FakeMessagesApi, call, say

import lockyard
from lockyard.infra.lockstore.lockdir.store import LockStore
from polling_support import wait_until, wait_until_async

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("unshare") is None,
        reason="needs root and unshare(1) to make mount namespaces",
    ),
]

HERE = Path(__file__).parent
PYTHON = sys.executable
LOCKYARD = str(Path(sys.executable).parent / "lockyard")
ACQUIRE = "mcp__lockyard__lock_acquire"
RELEASE = "mcp__lockyard__lock_release"


def read_only_paths() -> list[str]:
    """What a sandbox needs of the host, read-only: Python, the environment, the package."""
    package = Path(lockyard.__file__).resolve().parent
    return [sys.base_prefix, sys.prefix, str(package), str(HERE / "sandbox_agent.py")]


def sandbox_command(ipc: Path, workspace: Path, mode: str, *, network: bool) -> list[str]:
    namespaces = ["--mount", "--pid", "--fork", "--kill-child"]
    if not network:
        namespaces.append("--net")
    binds = [arg for path in read_only_paths() for arg in ("--ro", path)]
    return [
        "unshare", *namespaces, "--", PYTHON, str(HERE / "sandbox_launcher.py"),
        "--ipc", str(ipc), "--workspace", str(workspace), *binds,
        "--", PYTHON, str(HERE / "sandbox_agent.py"), mode,
    ]  # fmt: skip


class Sandbox:
    """A scripted agent in its container: send it tool calls, read its results by tag."""

    def __init__(self, name: str, process: Process) -> None:
        self.name = name
        self.process = process
        self.lines: dict[str, dict[str, Any]] = {}
        self.arrived = anyio.Event()

    async def read(self) -> None:
        assert self.process.stdout is not None
        pending = ""
        async for chunk in TextReceiveStream(self.process.stdout):
            pending += chunk
            *lines, pending = pending.split("\n")
            for line in lines:
                message = json.loads(line)
                self.lines[message["tag"]] = message
                self.arrived.set()
                self.arrived = anyio.Event()

    async def send(self, tag: str, tool: str, **arguments: Any) -> None:
        assert self.process.stdin is not None
        line = {"tag": tag, "tool": tool, "arguments": arguments}
        await self.process.stdin.send((json.dumps(line) + "\n").encode())

    async def look(self, tag: str, paths: list[str]) -> dict[str, Any]:
        assert self.process.stdin is not None
        await self.process.stdin.send((json.dumps({"tag": tag, "look": paths}) + "\n").encode())
        return await self.result(tag)

    async def result(self, tag: str) -> dict[str, Any]:
        with anyio.fail_after(60):
            while tag not in self.lines:
                await self.arrived.wait()
        return self.lines[tag]

    async def payload(self, tag: str) -> dict[str, Any]:
        result = await self.result(tag)
        assert not result["is_error"], result["text"]
        data: dict[str, Any] = json.loads(result["text"])
        return data

    async def call(self, tag: str, tool: str, **arguments: Any) -> dict[str, Any]:
        await self.send(tag, tool, **arguments)
        return await self.payload(tag)


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    repo = tmp_path / "host-checkout"
    repo.mkdir()
    root = tmp_path / "ipc"
    root.mkdir()
    return {"repo": repo, "root": root, "locks": tmp_path / "locks", "tmp": tmp_path}


def checkout(world: dict[str, Path], name: str) -> Path:
    """The sandbox's own checkout (a copy: it shares nothing with the host's)."""
    path = world["tmp"] / f"checkout-{name}"
    path.mkdir()
    for file in ("a.py", "c.py", "f.py", "k.py", "x.py", "y.py"):
        (path / file).write_text(f"# {file}\n")
    return path


@asynccontextmanager
async def started_sandbox(
    world: dict[str, Path], name: str, group: Any, mode: str = "mcp", **env: str
) -> AsyncIterator[Sandbox]:
    folder = world["root"] / name
    folder.mkdir()
    process = await anyio.open_process(
        sandbox_command(folder, checkout(world, name), mode, network=mode.startswith("cli")),
        env={**os.environ, **env},
        stderr=None,
    )
    sandbox = Sandbox(name, process)
    group.start_soon(sandbox.read)
    try:
        yield sandbox
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.move_on_after(20):
            await process.wait()


@pytest.mark.timeout(300)  # five sandboxes and a CLI start on a loaded 2-core machine
async def test_sandboxed_agents_share_locks_through_their_ipc_folders(
    world: dict[str, Path], fake_api: FakeMessagesApi
) -> None:
    store = LockStore(world["repo"], world["locks"])
    key = store.canonicalize

    def waits(agent: str, name: str) -> Callable[[], bool]:
        return lambda: (agent, key(name)) in store.snapshot().waits

    host = await anyio.open_process(
        [LOCKYARD, "ipc-host", "--root", str(world["root"]), "--repo", str(world["repo"]),
         "--lock-dir", str(world["locks"]), "--admin", "ops", "--stale-after", "3"],
        stdout=None, stderr=None,
    )  # fmt: skip
    fake_api.script(
        "claude",
        [
            call(ACQUIRE, {"filepaths": ["/workspace/c.py"], "timeout_seconds": 120}),
            call(RELEASE, {"all": True}),
            say("claude done"),
        ],
    )
    try:
        async with AsyncExitStack() as stack:
            group = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(group.cancel_scope.cancel)
            boxes = {
                name: await stack.enter_async_context(started_sandbox(world, name, group))
                for name in ("alice", "bob", "carol", "ops")
            }
            alice, bob, carol, ops = boxes.values()
            for box in boxes.values():
                ready = await box.result("ready")
                assert "lock_acquire" in ready["tools"]
            assert "lock_force_release" in (await ops.result("ready"))["tools"]
            assert "lock_force_release" not in (await bob.result("ready"))["tools"]

            # Isolation: no lock directory, no host checkout, no other sandbox, no network.
            probes = [str(world["locks"]), str(world["repo"]), str(world["root"] / "bob")]
            seen = await alice.look("look", probes)
            assert seen["exists"] == dict.fromkeys(probes, False)
            assert seen["network"] is False
            assert set(seen["ipc"]) <= {"requests", "responses", "heartbeat", "host.json"}

            # Contention and FIFO handoff between three sandboxes.
            assert (await alice.call("a1", "lock_acquire", filepaths=["a.py"]))["all_acquired"]
            await bob.send("b1", "lock_acquire", filepaths=["/workspace/a.py"], timeout_seconds=120)
            await wait_until_async(waits("bob", "a.py"), "bob waiting for a.py", within=60)
            await carol.send("c1", "lock_acquire", filepaths=["a.py"], timeout_seconds=120)
            await wait_until_async(waits("carol", "a.py"), "carol waiting for a.py", within=60)
            await alice.call("a2", "lock_release", filepaths=["a.py"])
            got_b = await bob.payload("b1")
            assert got_b["results"] == [
                {"filepath": key("a.py"), "acquired": True, "holder": "bob"}
            ]
            assert "c1" not in carol.lines
            assert store.holder("a.py") == "bob"
            await bob.call("b2", "lock_release", all=True)
            assert (await carol.payload("c1"))["all_acquired"] is True
            await carol.call("c2", "lock_release", all=True)

            # A deadlock between two sandboxes, resolved softly by the host's monitor.
            await alice.call("a3", "lock_acquire", filepaths=["x.py"])
            await bob.call("b3", "lock_acquire", filepaths=["y.py"])
            await alice.send("a4", "lock_acquire", filepaths=["y.py"], timeout_seconds=120)
            await wait_until_async(waits("alice", "y.py"), "alice waiting for y.py", within=60)
            await bob.send("b4", "lock_acquire", filepaths=["x.py"], timeout_seconds=120)
            outcomes = {"alice": await alice.payload("a4"), "bob": await bob.payload("b4")}
            victims = [agent for agent, result in outcomes.items() if "deadlock" in result]
            assert len(victims) == 1, outcomes
            survivor = "bob" if victims == ["alice"] else "alice"
            assert outcomes[survivor]["all_acquired"] is True
            await alice.call("a5", "lock_release", all=True)
            await bob.call("b5", "lock_release", all=True)

            # The admin sandbox force-releases a lock; its holder hears why.
            await bob.call("b6", "lock_acquire", filepaths=["f.py"])
            await carol.send("c3", "lock_force_release", filepath="f.py", reason="mine")
            assert (await carol.result("c3"))["is_error"] is True
            forced = await ops.call("o1", "lock_force_release", filepath="f.py", reason="blocks CI")
            assert forced["released"] is True
            told = await bob.call("b7", "lock_acquire", filepaths=["y.py"], timeout_seconds=0)
            assert told["notices"][0]["kind"] == "force_released"
            assert "blocks CI" in told["notices"][0]["message"]
            await bob.call("b8", "lock_release", all=True)

            # The real Claude CLI, in its own sandbox, waits for a lock alice holds.
            await alice.call("a6", "lock_acquire", filepaths=["c.py"])
            cli_env = fake_api.cli_env("claude", "/tmp")
            async with started_sandbox(
                world, "claude", group, "cli", SANDBOX_CLI_ENV=json.dumps(cli_env)
            ) as claude:
                await wait_until_async(
                    waits("claude", "c.py"), "claude waiting for c.py", within=60
                )
                await alice.call("a7", "lock_release", all=True)
                finished = await claude.result("result")
            assert finished["text"] == "claude done"
            first, released = fake_api.outcomes("claude")[:2]
            assert first.json["results"] == [
                {"filepath": key("c.py"), "acquired": True, "holder": "claude"}
            ]
            assert released.json == {"released": [key("c.py")], "count": 1}

            # A sandbox killed outright: the host reclaims its locks once it is silent.
            await carol.call("c4", "lock_acquire", filepaths=["k.py"])
            assert store.holder("k.py") == "carol"
            carol.process.send_signal(signal.SIGKILL)
            await carol.process.wait()
            await wait_until_async(lambda: store.holder("k.py") is None, within=60)
            await wait_until_async(lambda: store.list_locks() == [], within=60)
    finally:
        host.send_signal(signal.SIGTERM)
        with anyio.fail_after(20):
            assert await host.wait() == 0


def process_tree(root: int) -> list[int]:
    """`root` and every process below it, parents first."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry))
    order, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        order.append(pid)
        todo.extend(children.get(pid, []))
    return order


def stopped(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "Tt"
    except OSError:
        return True  # gone


def pause(root: int) -> None:
    """Stop every process of a sandbox (what `docker pause` does with a cgroup freezer)."""

    def all_stopped() -> bool:
        tree = process_tree(root)
        for pid in tree:
            if not stopped(pid):
                os.kill(pid, signal.SIGSTOP)
        return all(stopped(pid) for pid in tree)

    wait_until(all_stopped, "every process of the sandbox stopped")


def resume(root: int) -> None:
    for pid in process_tree(root):
        os.kill(pid, signal.SIGCONT)


@pytest.mark.timeout(300)
async def test_a_sandboxed_cli_paused_past_its_reclaim_is_refused_its_next_write(
    world: dict[str, Path],
) -> None:
    store = LockStore(world["repo"], world["locks"])
    at_the_write, resumed = threading.Event(), threading.Event()

    def after_the_pause() -> bool:
        at_the_write.set()  # the CLI waits for this turn's answer: time to pause it
        return resumed.is_set()

    host = await anyio.open_process(
        [LOCKYARD, "ipc-host", "--root", str(world["root"]), "--repo", str(world["repo"]),
         "--lock-dir", str(world["locks"]), "--stale-after", "2"],
        stdout=None, stderr=None,
    )  # fmt: skip
    # A gate waits for the test to pause the sandbox and the host to reclaim: generous.
    with FakeMessagesApi(gate_timeout=120.0) as api:
        api.script(
            "paused",
            [
                call(ACQUIRE, {"filepaths": ["a.py"], "timeout_seconds": 0}),
                call("Read", {"file_path": "/workspace/a.py"}),
                call(
                    "Write",
                    {"file_path": "/workspace/a.py", "content": "unlocked edit\n"},
                    gate=after_the_pause,
                ),
                say("paused done"),
            ],
        )
        try:
            async with anyio.create_task_group() as group:
                env = {"SANDBOX_CLI_ENV": json.dumps(api.cli_env("paused", "/tmp"))}
                async with started_sandbox(world, "paused", group, "cli-init", **env) as box:
                    await wait_until_async(
                        at_the_write.is_set, "the CLI asking for its next turn after the read",
                        within=120,
                    )  # fmt: skip
                    assert store.holder("a.py") == "paused"
                    pause(box.process.pid)
                    await wait_until_async(lambda: store.holder("a.py") is None, within=60)
                    resume(box.process.pid)
                    resumed.set()
                    finished = await box.result("result")
                    group.cancel_scope.cancel()
        finally:
            host.send_signal(signal.SIGTERM)
            with anyio.fail_after(20):
                await host.wait()
        api.raise_errors()
        outcomes = api.outcomes("paused")
    assert finished["code"] == 0, finished["stderr"]
    acquired, _read, write = outcomes[:3]
    assert acquired.json["all_acquired"] is True
    assert write.name == "Write"
    assert write.is_error is True
    assert "a.py is not locked by you" in write.text, write.text
    assert "mcp__lockyard__lock_acquire" in write.text
    assert (world["tmp"] / "checkout-paused" / "a.py").read_text() == "# a.py\n"
