"""The lock tools through IPC folders: an `IpcHost` in this process, `IpcClient`s as sandboxes,
a real lock directory. The agent id from the folder, matching by id, liveness, limits and the
operator tools."""

from __future__ import annotations

import json
import logging
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from ipc_support import answer, call_body, running_host, sandbox, write_request

from lockyard.infra.lockstore.lockdir.store import LockStore
from lockyard.infra.tools.lock_tools import TOOL_SPECS, LockTools
from lockyard.infra.transports.ipc.client import IpcClient
from lockyard.infra.transports.ipc.host import IpcHost
from polling_support import wait_until_async

pytestmark = pytest.mark.anyio


@pytest.fixture
def store(repo: Path, lock_dir: Path) -> LockStore:
    for name in ("a.py", "b.py", "c.py"):
        (repo / name).write_text(f"# {name}\n")
    return LockStore(repo, lock_dir)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "ipc"
    path.mkdir()
    return path


def payload(outcome: Any) -> dict[str, Any]:
    assert not outcome.is_error, outcome.text
    data: dict[str, Any] = json.loads(outcome.text)
    return data


async def holds(store: LockStore, name: str, agent: str | None) -> None:
    """Wait until `agent` holds `name` (None: until it is free); the store is the truth."""
    await wait_until_async(lambda: store.holder(name) == agent)


async def waits(store: LockStore, agent: str, name: str) -> None:
    key = store.canonicalize(name)
    await wait_until_async(lambda: (agent, key) in store.snapshot().waits)


CALLS: list[tuple[str, Any]] = [
    ("lock_acquire", {"filepaths": ["b.py", "a.py", "./a.py"], "timeout_seconds": 0}),
    ("lock_acquire", {"filepaths": ["c.py"], "timeout_seconds": 0}),
    ("lock_acquire", {"filepaths": []}),
    ("lock_acquire", {"filepaths": ["a.py"], "timeout_seconds": -1}),
    ("lock_acquire", {"filepaths": ["../outside.py"]}),
    ("lock_release", {"filepaths": ["a.py"], "all": True}),
    ("lock_release", {"agent": "x"}),
    ("lock_frobnicate", {}),
    ("lock_release", {"all": True}),
]


async def test_results_and_texts_are_the_tools_own_call_for_call(
    store: LockStore, root: Path, repo: Path
) -> None:
    store.try_lock("c.py", "other-agent")
    direct = LockTools(store, "direct")
    expected = []
    for tool, arguments in CALLS:
        outcome = await direct.call(tool, arguments)
        expected.append((outcome.text.replace("direct", "<agent>"), outcome.is_error))

    async with running_host(root, store), IpcClient(sandbox(root, "alice"), repo=repo) as client:
        seen = []
        for tool, arguments in CALLS:
            outcome = await client.call(tool, arguments)
            seen.append((outcome.text.replace("alice", "<agent>"), outcome.is_error))
    assert seen == expected
    assert [spec.name for spec in TOOL_SPECS] == ["lock_acquire", "lock_release", "lock_status"]


async def test_absolute_paths_inside_the_sandbox_checkout_name_the_hosts_file(
    store: LockStore, root: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"  # the sandbox's own checkout, elsewhere
    workspace.mkdir()
    async with (
        running_host(root, store),
        IpcClient(sandbox(root, "alice"), repo=workspace) as client,
    ):
        result = payload(
            await client.call(
                "lock_acquire", {"filepaths": [str(workspace / "a.py")], "timeout_seconds": 0}
            )
        )
    assert result["results"][0]["filepath"] == store.canonicalize("a.py")


async def test_the_agent_is_the_folder_and_a_request_cannot_claim_another(
    store: LockStore, root: Path
) -> None:
    mallory = sandbox(root, "mallory")
    sandbox(root, "alice")
    async with running_host(root, store):
        body = call_body("impersonate1", "lock_acquire", {"filepaths": ["a.py"]})
        write_request(mallory, "impersonate1", {**body, "agent_id": "alice"})
        refused = await answer(mallory, "impersonate1")
        write_request(
            mallory, "impersonate2", call_body("impersonate2", "lock_acquire",
                                                {"filepaths": ["a.py"], "agent_id": "alice"}),
        )  # fmt: skip
        in_arguments = await answer(mallory, "impersonate2")
        write_request(mallory, "plainrequest", call_body("plainrequest", "lock_acquire",
                                                          {"filepaths": ["b.py"]}))  # fmt: skip
        plain = await answer(mallory, "plainrequest")
    assert refused["ok"] is False
    assert refused["error"]["code"] == "bad_request"
    assert "folder" in refused["error"]["message"]
    assert in_arguments["result"]["is_error"] is True  # the tools refuse unknown arguments
    assert json.loads(plain["result"]["text"])["results"][0]["holder"] == "mallory"
    assert store.holder("a.py") is None


async def test_concurrent_calls_of_one_sandbox_each_get_their_own_answer(
    store: LockStore, root: Path, repo: Path
) -> None:
    names = [f"f{i}.py" for i in range(24)]
    results: dict[str, Any] = {}
    async with running_host(root, store), IpcClient(sandbox(root, "alice")) as client:

        async def lock(name: str) -> None:
            outcome = await client.call("lock_acquire", {"filepaths": [name], "timeout_seconds": 0})
            results[name] = payload(outcome)

        async with anyio.create_task_group() as group:
            for name in names:
                group.start_soon(lock, name)
    for name in names:
        assert [r["filepath"] for r in results[name]["results"]] == [store.canonicalize(name)]


async def test_a_blocked_acquire_waits_longer_than_the_host_timeout_while_the_host_lives(
    store: LockStore, root: Path
) -> None:
    async with (
        running_host(root, store, status_interval=0.1),
        IpcClient(sandbox(root, "alice")) as alice,
        IpcClient(sandbox(root, "bob"), host_timeout=1.0) as bob,
    ):
        assert payload(await alice.call("lock_acquire", {"filepaths": ["a.py"]}))["all_acquired"]
        async with anyio.create_task_group() as group:
            got: list[dict[str, Any]] = []

            async def wait_for_a() -> None:
                got.append(payload(await bob.call("lock_acquire", {"filepaths": ["a.py"]})))

            group.start_soon(wait_for_a)
            await waits(store, "bob", "a.py")
            await anyio.sleep(2.5)  # over twice the host timeout: only the host's liveness counts
            await alice.call("lock_release", {"all": True})
    assert got[0]["all_acquired"] is True
    assert store.holder("a.py") is None  # the host released bob's lock when it stopped


async def test_without_a_host_a_call_is_withdrawn_and_says_so(root: Path) -> None:
    folder = sandbox(root, "alice")
    async with IpcClient(folder, host_timeout=0.3) as client:
        outcome = await client.call("lock_acquire", {"filepaths": ["a.py"]})
    assert outcome.is_error
    assert "not answering" in outcome.text
    assert "nothing was done" in outcome.text
    assert list((folder / "requests").iterdir()) == []


async def test_a_fifo_handoff_between_three_sandboxes(store: LockStore, root: Path) -> None:
    order: list[str] = []
    async with running_host(root, store), AsyncExitStack() as stack:
        clients = {
            name: await stack.enter_async_context(IpcClient(sandbox(root, name)))
            for name in ("s0", "s1", "s2", "s3")
        }
        assert payload(await clients["s0"].call("lock_acquire", {"filepaths": ["a.py"]}))[
            "all_acquired"
        ]
        async with anyio.create_task_group() as group:

            async def wait_then_pass(name: str) -> None:
                result = payload(await clients[name].call("lock_acquire", {"filepaths": ["a.py"]}))
                assert result["all_acquired"]
                order.append(name)
                await clients[name].call("lock_release", {"all": True})

            for name in ("s1", "s2", "s3"):
                group.start_soon(wait_then_pass, name)
                await waits(store, name, "a.py")  # queued in this order
            await clients["s0"].call("lock_release", {"all": True})
    assert order == ["s1", "s2", "s3"]


async def test_a_deadlock_between_sandboxes_is_resolved_softly(
    store: LockStore, root: Path
) -> None:
    results: dict[str, dict[str, Any]] = {}
    async with (
        running_host(root, store),
        IpcClient(sandbox(root, "alice")) as alice,
        IpcClient(sandbox(root, "bob")) as bob,
    ):
        payload(await alice.call("lock_acquire", {"filepaths": ["a.py"]}))
        payload(await bob.call("lock_acquire", {"filepaths": ["b.py"]}))

        async def want(client: IpcClient, name: str, agent: str) -> None:
            results[agent] = payload(await client.call("lock_acquire", {"filepaths": [name]}))

        async with anyio.create_task_group() as group:
            group.start_soon(want, alice, "b.py", "alice")
            await waits(store, "alice", "b.py")
            group.start_soon(want, bob, "a.py", "bob")
    victims = [agent for agent, result in results.items() if "deadlock" in result]
    assert len(victims) == 1
    survivor = "bob" if victims == ["alice"] else "alice"
    assert results[survivor]["all_acquired"] is True
    assert {step["agent"] for step in results[victims[0]]["deadlock"]["cycle"]} == {"alice", "bob"}


async def test_a_silent_sandbox_loses_its_locks_and_is_told_a_live_slow_one_keeps_them(
    store: LockStore, root: Path
) -> None:
    async with running_host(root, store, stale_after=1.5, rescan_interval=0.1):
        slow = IpcClient(sandbox(root, "slow"), heartbeat_interval=0.1)
        async with slow:
            payload(await slow.call("lock_acquire", {"filepaths": ["b.py"]}))
            # The stopped sandbox: one request written by hand, then silence (no heartbeat).
            stopped = sandbox(root, "stopped")
            write_request(stopped, "takeafile", call_body("takeafile", "lock_acquire",
                                                          {"filepaths": ["a.py"]}))  # fmt: skip
            assert json.loads((await answer(stopped, "takeafile"))["result"]["text"])[
                "all_acquired"
            ]
            write_request(stopped, "waitforb1", call_body("waitforb1", "lock_acquire",
                                                          {"filepaths": ["b.py"]}))  # fmt: skip
            await holds(store, "a.py", None)  # reclaimed after 1.5 s of silence
            cancelled = await answer(stopped, "waitforb1")
            await anyio.sleep(2.0)  # the slow sandbox sent no request for longer than that
            assert store.holder("b.py") == "slow"
            # Back to life: the next call is told what happened.
            write_request(stopped, "aftermath", call_body("aftermath", "lock_release",
                                                          {"all": True}))  # fmt: skip
            told = json.loads((await answer(stopped, "aftermath"))["result"]["text"])
    assert cancelled["ok"] is False
    assert cancelled["error"]["code"] == "reclaimed"
    (notice,) = told["notices"]
    assert notice["kind"] == "reclaimed"
    assert notice["released"] == [store.canonicalize("a.py")]


async def test_operator_tools_only_for_the_admin_folder(
    store: LockStore, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "lockyard.ipc.host")
    async with (
        running_host(root, store, admin="main"),
        IpcClient(sandbox(root, "main")) as main,
        IpcClient(sandbox(root, "bob")) as bob,
    ):
        bob_tools = [tool["name"] for tool in await bob.list_tools()]
        main_tools = [tool["name"] for tool in await main.list_tools()]
        payload(await bob.call("lock_acquire", {"filepaths": ["a.py"]}))
        denied = await bob.call("lock_force_release", {"filepath": "a.py", "reason": "mine"})
        status = payload(await main.call("lock_overview", {}))
        bad = await main.call("lock_force_release", {"filepath": "a.py"})
        forced = payload(
            await main.call("lock_force_release", {"filepath": "a.py", "reason": "stuck for 1 h"})
        )
        told = payload(await bob.call("lock_acquire", {"filepaths": ["b.py"]}))
        again = payload(await bob.call("lock_acquire", {"filepaths": ["c.py"]}))
    assert bob_tools == ["lock_acquire", "lock_release", "lock_status"]
    assert main_tools == [
        "lock_acquire",
        "lock_release",
        "lock_status",
        "lock_overview",
        "lock_force_release",
    ]
    assert denied.is_error
    assert "only the admin sandbox" in denied.text
    assert [(lock["filepath"], lock["holder"]) for lock in status["locks"]] == [
        (store.canonicalize("a.py"), "bob")
    ]
    assert {s["name"] for s in status["sandboxes"]} == {"main", "bob"}
    assert bad.is_error
    assert "reason" in bad.text
    assert forced == {
        "released": True,
        "filepath": store.canonicalize("a.py"),
        "holder": "bob",
        "reason": "stuck for 1 h",
        "holder_told": True,
    }
    assert told["notices"][0]["kind"] == "force_released"
    assert "stuck for 1 h" in told["notices"][0]["message"]
    assert "notices" not in again  # told once
    assert "stuck for 1 h" in caplog.text


async def test_rate_and_in_flight_limits_refuse_with_a_clear_error(
    store: LockStore, root: Path
) -> None:
    folder = sandbox(root, "eager")
    ids = [f"burst{i:04d}" for i in range(12)]
    for request_id in ids:  # all written before the host starts: one burst
        write_request(folder, request_id, call_body(request_id, "lock_release", {"all": True}))
    async with running_host(root, store, rate=0.5, burst=4):
        answers = [await answer(folder, request_id) for request_id in ids]
    served = [a for a in answers if a["ok"]]
    refused = [a for a in answers if not a["ok"]]
    assert len(served) == 4
    assert {a["error"]["code"] for a in refused} == {"rate_limited"}
    assert all(a["error"]["retry_after"] > 0 for a in refused)
    assert "requests per second" in refused[0]["error"]["message"]

    busy = sandbox(root, "busy")
    store.try_lock("a.py", "holder")
    async with running_host(root, store, max_in_flight=2):
        for i in range(3):
            write_request(busy, f"waiting{i}", call_body(f"waiting{i}", "lock_acquire",
                                                         {"filepaths": ["a.py"]}))  # fmt: skip
            if i < 2:
                await waits(store, "busy", "a.py")
        third = await answer(busy, "waiting2")
        store.release("a.py", "holder")
        first = await answer(busy, "waiting0")
    assert third["error"]["code"] == "too_many_in_flight"
    assert json.loads(first["result"]["text"])["all_acquired"] is True


async def test_the_host_releases_every_sandbox_lock_when_it_stops(
    store: LockStore, root: Path
) -> None:
    async with running_host(root, store) as host:
        assert isinstance(host, IpcHost)
        async with IpcClient(sandbox(root, "alice")) as alice:
            payload(await alice.call("lock_acquire", {"filepaths": ["a.py"]}))
        # the client's exit released nothing by itself: the session did not end over MCP
        assert store.holder("a.py") == "alice"
    assert store.holder("a.py") is None


async def test_everything_works_by_polling_where_inotify_is_unavailable(
    store: LockStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKYARD_NO_INOTIFY", "1")
    async with (
        running_host(root, store, stale_after=1.5, rescan_interval=0.1),
        IpcClient(sandbox(root, "alice"), heartbeat_interval=0.1) as alice,
        IpcClient(sandbox(root, "bob"), heartbeat_interval=0.1) as bob,
    ):
        payload(await alice.call("lock_acquire", {"filepaths": ["a.py"]}))
        async with anyio.create_task_group() as group:
            got: list[dict[str, Any]] = []

            async def wait_for_a() -> None:
                got.append(payload(await bob.call("lock_acquire", {"filepaths": ["a.py"]})))

            group.start_soon(wait_for_a)
            await waits(store, "bob", "a.py")
            await alice.call("lock_release", {"all": True})
        await anyio.sleep(2.0)  # longer than stale_after: the heartbeats keep bob's lock
        assert store.holder("a.py") == "bob"
        stopped = sandbox(root, "stopped")
        write_request(stopped, "takeafile", call_body("takeafile", "lock_acquire",
                                                      {"filepaths": ["c.py"]}))  # fmt: skip
        await answer(stopped, "takeafile")
        await holds(store, "c.py", None)  # no heartbeat at all: reclaimed
    assert got[0]["all_acquired"] is True


async def test_the_mcp_session_lists_the_hosts_tools_and_releases_on_exit(
    store: LockStore, root: Path
) -> None:
    from lockyard.infra.transports.ipc.client import IpcServeSession

    async with (
        running_host(root, store, admin="main"),
        IpcClient(sandbox(root, "main")) as client,
    ):
        session = IpcServeSession(client, progress_interval=0.05)
        store.try_lock("b.py", "holder")
        progress: list[str] = []

        async def on_progress(waited: float, message: str) -> None:
            progress.append(message)

        tools = [tool["name"] for tool in await session.list_tools()]
        result = await session.call_tool("lock_acquire", {"filepaths": ["a.py"]}, None)
        assert result["isError"] is False
        async with anyio.create_task_group() as group:

            async def acquire_b() -> None:
                waited = await session.call_tool(
                    "lock_acquire", {"filepaths": ["b.py"]}, on_progress
                )
                assert json.loads(waited["content"][0]["text"])["all_acquired"]

            group.start_soon(acquire_b)
            await wait_until_async(lambda: len(progress) >= 2)  # the wait reports progress
            store.release("b.py", "holder")
        assert store.holder("a.py") == "main"
        released = await session.end_session()
        assert released == [store.canonicalize("a.py"), store.canonicalize("b.py")]
        assert all(message.startswith("waiting for locks") for message in progress)
        # The host's look names the file still waited for, its holder and the queue.
        assert any(
            "b.py: held by holder for" in message and "(you among them)" in message
            for message in progress
        ), progress
    assert tools == [
        "lock_acquire",
        "lock_release",
        "lock_status",
        "lock_overview",
        "lock_force_release",
    ]
    assert store.holder("a.py") is None


async def test_without_a_host_the_session_still_lists_the_lock_tools(root: Path) -> None:
    from lockyard.infra.transports.ipc.client import IpcServeSession

    async with IpcClient(sandbox(root, "alone"), host_timeout=0.2) as client:
        session = IpcServeSession(client)
        tools = [tool["name"] for tool in await session.list_tools()]
        result = await session.call_tool("lock_release", {"all": True}, None)
        assert await session.end_session() == []
    assert tools == [spec.name for spec in TOOL_SPECS]
    assert result["isError"] is True
    assert "not answering" in result["content"][0]["text"]


async def test_the_host_serves_sandboxes_on_the_postgresql_backend(
    repo: Path, root: Path, pg_backend: str
) -> None:
    from lockyard.infra.lockstore import open_backend

    pg_store = open_backend(str(repo), pg_backend)
    got: list[dict[str, Any]] = []
    try:
        async with (
            running_host(root, pg_store, admin="ops"),
            IpcClient(sandbox(root, "alice")) as alice,
            IpcClient(sandbox(root, "bob")) as bob,
            IpcClient(sandbox(root, "ops")) as ops,
        ):
            payload(await alice.call("lock_acquire", {"filepaths": ["a.py"]}))
            async with anyio.create_task_group() as group:

                async def wait_for_a() -> None:
                    got.append(payload(await bob.call("lock_acquire", {"filepaths": ["a.py"]})))

                group.start_soon(wait_for_a)
                await wait_until_async(lambda: bool(pg_store.waiters("a.py")))
                status = payload(await ops.call("lock_overview", {}))
                await alice.call("lock_release", {"all": True})
            forced = payload(
                await ops.call("lock_force_release", {"filepath": "a.py", "reason": "test"})
            )
        assert got[0]["all_acquired"] is True
        assert [(lock["holder"], lock["waiters"]) for lock in status["locks"]] == [
            ("alice", ["bob"])
        ]
        assert forced["holder"] == "bob"
        assert pg_store.list_locks() == []
    finally:
        pg_store.close()


async def test_the_shell_client_in_the_docs_speaks_the_protocol(
    store: LockStore, root: Path
) -> None:
    import re

    doc = (Path(__file__).parents[2] / "docs" / "sandboxes.md").read_text()
    (script,) = re.findall(r"fits in a shell script.*?```bash\n(.*?)```", doc, re.S)
    folder = sandbox(root, "shell")
    async with running_host(root, store):
        done = await anyio.run_process(
            ["bash", "-euc", script.replace("/ipc/", f"{folder}/")], check=False
        )
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert reply["ok"] is True
    assert json.loads(reply["result"]["text"])["results"] == [
        {"filepath": store.canonicalize("src/app.py"), "acquired": True, "holder": "shell"}
    ]
    assert list((folder / "responses").iterdir()) == []


async def test_a_call_the_agent_gives_up_on_is_cancelled_on_the_host_and_takes_nothing(
    store: LockStore, root: Path
) -> None:
    bob_folder = sandbox(root, "bob")
    async with (
        running_host(root, store),
        IpcClient(sandbox(root, "alice")) as alice,
        IpcClient(bob_folder) as bob,
    ):
        payload(await alice.call("lock_acquire", {"filepaths": ["a.py"]}))
        async with anyio.create_task_group() as group:
            group.start_soon(bob.call, "lock_acquire", {"filepaths": ["a.py", "b.py"]})
            await waits(store, "bob", "a.py")
            assert store.holder("b.py") == "bob"  # taken by the call, before it waited
            group.cancel_scope.cancel()  # the agent CLI's tool timeout, say
        await wait_until_async(lambda: not store.snapshot().waits)  # the host ended bob's wait
        await holds(store, "b.py", None)  # ... and gave back what the call took
        await alice.call("lock_release", {"all": True})
        await anyio.sleep(0.3)  # a cancelled call would have been granted a.py by now
        assert store.holder("a.py") is None
        assert list((bob_folder / "responses").iterdir()) == []  # nobody waits: no answer


async def test_with_cross_process_a_sandbox_heeds_lockyard_monitor_in_a_cycle_with_an_outsider(
    store: LockStore, root: Path, repo: Path
) -> None:
    from lockyard.infra.crossproc.monitor_loop import CrossProcessMonitor
    from lockyard.infra.crossproc.notices import FileVictimNotices
    from lockyard.infra.crossproc.state import WaitForReader

    outsider_store = LockStore(repo, store.lock_dir)  # an agent outside the sandboxes
    outsider = LockTools(
        outsider_store,
        "outsider",
        victim_notices=FileVictimNotices(
            outsider_store.lock_dir, WaitForReader(outsider_store).still_waiting
        ),
    )
    results: dict[str, dict[str, Any]] = {}
    monitor = CrossProcessMonitor(store.lock_dir)
    async with (
        running_host(root, store, cross_process=True),
        IpcClient(sandbox(root, "alice")) as alice,
        anyio.create_task_group() as group,
    ):
        group.start_soon(lambda: monitor.run(lambda _report: None))
        payload(await outsider.call("lock_acquire", {"filepaths": ["b.py"]}))
        payload(await alice.call("lock_acquire", {"filepaths": ["a.py"]}))  # alice: youngest

        async def alice_wants_b() -> None:
            results["alice"] = payload(await alice.call("lock_acquire", {"filepaths": ["b.py"]}))

        async with anyio.create_task_group() as calls:
            calls.start_soon(alice_wants_b)
            await waits(store, "alice", "b.py")
            results["outsider"] = payload(
                await outsider.call("lock_acquire", {"filepaths": ["a.py"]})
            )
        group.cancel_scope.cancel()
    victims = [agent for agent, result in results.items() if "deadlock" in result]
    assert victims == ["alice"], results  # the sandbox heard lockyard monitor's notice
    assert {s["agent"] for s in results["alice"]["deadlock"]["cycle"]} == {"alice", "outsider"}
    assert results["outsider"]["all_acquired"] is True
    outsider_store.cleanup_agent_locks("outsider")
