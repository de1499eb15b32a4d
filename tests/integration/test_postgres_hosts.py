"""Agents on three hosts against one PostgreSQL server, the hosts built on this machine as
network namespaces (veth pairs, their own host names). Contention and a cross-host deadlock
are resolved; then one host's link is cut while it holds a lock: another host gets the lock
within the keepalive bound, and when the link is back the cut-off agent learns it lost the
lock and its write under the old fencing number is refused.

Needs root (network namespaces), as CI and this machine's developers have.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from lockyard.infra.crossproc.monitor_loop import CrossProcessMonitor
from lockyard.infra.crossproc.sources import monitor_source
from lockyard.infra.lockstore.postgres import PgLockStore
from lockyard.infra.lockstore.postgres.cluster import ThrowawayCluster
from polling_support import wait_until_async

AGENT = Path(__file__).with_name("netns_agent.py")
LIVENESS_SECONDS = 3
HOSTS = ("host-a", "host-b", "host-c")


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=60)


@dataclass
class Host:
    name: str
    netns: str
    outer_if: str
    server_ip: str


@dataclass
class Net:
    subnet: int
    hosts: list[Host] = field(default_factory=list)


@pytest.fixture
def net() -> Iterator[Net]:
    if os.geteuid() != 0:
        pytest.fail("the hosts test builds network namespaces and needs root (as CI has)")
    tag = secrets.token_hex(2)
    built = Net(subnet=64 + secrets.randbelow(150))
    try:
        for index, name in enumerate(HOSTS, start=1):
            netns, outer, inner = f"ly{tag}{index}", f"lyo{tag}{index}", f"lyi{tag}{index}"
            base = f"10.{built.subnet}.{index}"
            sh("ip", "netns", "add", netns)
            built.hosts.append(Host(name, netns, outer, f"{base}.1"))
            sh("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
            sh("ip", "link", "set", inner, "netns", netns)
            sh("ip", "addr", "add", f"{base}.1/24", "dev", outer)
            sh("ip", "link", "set", outer, "up")
            sh("ip", "netns", "exec", netns, "ip", "addr", "add", f"{base}.2/24", "dev", inner)
            sh("ip", "netns", "exec", netns, "ip", "link", "set", inner, "up")
            sh("ip", "netns", "exec", netns, "ip", "link", "set", "lo", "up")
        yield built
    finally:
        for host in built.hosts:
            with contextlib.suppress(subprocess.CalledProcessError):
                sh("ip", "link", "del", host.outer_if)
            with contextlib.suppress(subprocess.CalledProcessError):
                sh("ip", "netns", "del", host.netns)


@pytest.fixture
def server(net: Net) -> Iterator[ThrowawayCluster]:
    listen = ("127.0.0.1", *(host.server_ip for host in net.hosts))
    cluster = ThrowawayCluster(
        listen=listen, max_connections=40, allow_networks=(f"10.{net.subnet}.0.0/16",)
    )
    with cluster:
        yield cluster


class Agent:
    """One agent process on one host; `send` a command, `reply` reads its answer."""

    def __init__(self, host: Host, server: ThrowawayCluster, repo: Path, agent_id: str) -> None:
        dsn = server.dsn.replace("@127.0.0.1:", f"@{host.server_ip}:")
        env = {**os.environ, "LOCKYARD_PG_LIVENESS_SECONDS": str(LIVENESS_SECONDS)}
        self.process = subprocess.Popen(
            [
                "ip", "netns", "exec", host.netns, "unshare", "--uts", "--",
                "sh", "-c", 'hostname "$0" && exec "$@"', host.name,
                sys.executable, str(AGENT), str(repo), dsn, agent_id,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self.reply(60) == {"ready": host.name}

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, **command: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def reply(self, timeout: float = 120) -> Any:
        return json.loads(self.lines.get(timeout=timeout))

    def ask(self, **command: Any) -> Any:
        self.send(**command)
        return self.reply()

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def agents(net: Net, server: ThrowawayCluster, repo: Path) -> Iterator[list[Agent]]:
    started = [Agent(host, server, repo, f"agent-{host.name}") for host in net.hosts]
    yield started
    for agent in started:
        agent.stop()


def check_ledger(ledger: Path) -> int:
    """Take and give alternate, by the same agent under the same fence, fences growing."""
    lines = ledger.read_text().splitlines()
    last_fence = 0
    for take, give in zip(lines[::2], lines[1::2], strict=True):
        kind, agent, fence = take.split()
        assert kind == "take", lines
        assert give == f"give {agent} {fence}", lines
        assert int(fence) > last_fence, lines
        last_fence = int(fence)
    return len(lines) // 2


def test_three_hosts_share_locks_resolve_a_deadlock_and_survive_a_cut_link(
    net: Net, server: ThrowawayCluster, agents: list[Agent], repo: Path, tmp_path: Path
) -> None:
    a, b, c = agents
    ledger = tmp_path / "ledger"
    # 1. Contention: every host locks one file in turn; the ledger shows one holder at a time.
    for agent in agents:
        agent.send(op="rounds", path="hot.py", rounds=10, ledger=str(ledger))
    assert [agent.reply() for agent in agents] == [{"done": 10}] * 3
    assert check_ledger(ledger) == 30

    # 2. A deadlock across hosts, found by a monitor reading the database.
    assert a.ask(op="acquire", paths=["x.py"])["all_acquired"]
    assert b.ask(op="acquire", paths=["y.py"])["all_acquired"]
    a.send(op="acquire", paths=["y.py"], timeout=120)
    b.send(op="acquire", paths=["x.py"], timeout=120)
    with PgLockStore(repo, server.dsn) as watcher:
        monitor = CrossProcessMonitor(source=monitor_source(watcher))

        async def resolved() -> bool:
            return bool((await monitor.check_once()).resolutions)

        anyio.run(
            lambda: wait_until_async(resolved, "the monitor resolving the deadlock", within=60)
        )
        results = {"a": a.reply(), "b": b.reply()}
        victims = [name for name, result in results.items() if "deadlock" in result]
        assert len(victims) == 1, results
        survivor = "b" if victims == ["a"] else "a"
        assert results[survivor]["all_acquired"]
        holders = {
            info.lock_path: info.holder.agent_id for info in watcher.list_locks() if info.holder
        }
        assert holders == {  # repository-relative keys, the same on every host
            "x.py": f"agent-host-{survivor}",
            "y.py": f"agent-host-{survivor}",
        }
        assert {h.host for h in (i.holder for i in watcher.list_locks()) if h} == {
            f"host-{survivor}"
        }, "holder records name the agent's own host"
        for agent in (a, b):
            agent.ask(op="release", paths=["x.py", "y.py"])

        # 3. Host C holds z.py; its link is cut. Host A gets z.py within the bound.
        grant = c.ask(op="acquire", paths=["z.py"])
        old_fence = grant["results"][0]["fence"]
        assert c.ask(op="guard", path="z.py")["allowed"]
        host_c = net.hosts[2]
        sh("ip", "link", "set", host_c.outer_if, "down")
        try:
            cut = time.monotonic()
            taken = a.ask(op="acquire", paths=["z.py"], timeout=120)
            waited = time.monotonic() - cut
            assert taken["all_acquired"], taken
            assert taken["results"][0]["fence"] > old_fence
            print(f"z.py passed to host A {waited:.1f} s after host C's link was cut "
                  f"(keepalive bound {LIVENESS_SECONDS} s)")  # fmt: skip
        finally:
            sh("ip", "link", "set", host_c.outer_if, "up")

        # 4. Host C is back: its write under the old fence is refused, and it is told.
        verdict = c.ask(op="guard", path="z.py")
        assert not verdict["allowed"]
        reason = verdict["verdict"]["hookSpecificOutput"]["permissionDecisionReason"]
        assert f"fence {old_fence}" in reason
        told = c.ask(op="release", paths=["z.py"])
        assert [item["filepath"] for item in told["lost_locks"]] == ["z.py"]
        assert told["released"] == []
        assert watcher.holder("z.py") == "agent-host-a"
