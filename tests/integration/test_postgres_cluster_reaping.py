"""A throwaway PostgreSQL cluster dies with the process that started it: a real SIGKILL of
its owner stops the server and removes its files (while running, and while it is still being
created); with its reaper killed too, the next cluster's creation reaps it; a live owner's
cluster is never touched."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from lockyard.infra.lockstore.postgres.cluster import reap_orphaned_clusters
from polling_support import wait_until

OWNER = r"""
import json, sys
from lockyard.infra.lockstore.postgres.cluster import ThrowawayCluster
cluster = ThrowawayCluster(max_connections=10).start()
server_pid = int((cluster.data_dir / "postmaster.pid").read_text().split()[0])
print(json.dumps({"root": str(cluster.root), "dsn": cluster.dsn, "server": server_pid,
                  "reaper": cluster._reaper.pid}), flush=True)
sys.stdin.read()  # holds the cluster until killed
"""


def gone(pid: int) -> bool:
    """No such process any more (or only its zombie, not yet collected)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except FileNotFoundError:
        return True


@pytest.fixture
def owner() -> Iterator[tuple[subprocess.Popen[str], dict[str, object]]]:
    """A process holding a running throwaway cluster, and what it says about the cluster."""
    child = subprocess.Popen(
        [sys.executable, "-c", OWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    facts = json.loads(child.stdout.readline())
    try:
        yield child, facts
    finally:
        child.kill()
        child.wait()
        wait_until(lambda: not Path(str(facts["root"])).exists(), "the cluster removed")


def accepts(dsn: str) -> bool:
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        return conn.execute("SELECT 1").fetchone() == (1,)


def test_a_sigkilled_owner_takes_its_running_cluster_with_it(
    owner: tuple[subprocess.Popen[str], dict[str, object]],
) -> None:
    child, facts = owner
    root, server = Path(str(facts["root"])), int(str(facts["server"]))
    assert accepts(str(facts["dsn"]))
    child.send_signal(signal.SIGKILL)
    child.wait()
    wait_until(lambda: gone(server), "the server stopped")
    wait_until(lambda: not root.exists(), "the cluster's directory removed")


def test_a_cluster_whose_reaper_died_too_is_reaped_when_the_next_one_is_made(
    owner: tuple[subprocess.Popen[str], dict[str, object]],
) -> None:
    child, facts = owner
    root, server = Path(str(facts["root"])), int(str(facts["server"]))
    assert root not in reap_orphaned_clusters(), "its owner is alive"
    assert accepts(str(facts["dsn"]))

    os.kill(int(str(facts["reaper"])), signal.SIGKILL)
    wait_until(lambda: gone(int(str(facts["reaper"]))), "the reaper gone")
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert accepts(str(facts["dsn"])), "nothing stopped it: the orphan is left running"

    assert root in reap_orphaned_clusters()
    assert gone(server)
    assert not root.exists()


FAKE_INITDB = """#!/bin/sh
echo "$$ $(pwd -P)" > "$(dirname "$0")/started.tmp" && mv "$(dirname "$0")/started.tmp" \\
    "$(dirname "$0")/started"
exec sleep 600
"""


@pytest.fixture
def hanging_initdb() -> Iterator[Path]:
    """A directory whose `initdb` announces itself in `started` (its pid and working
    directory, the new cluster's) and then hangs. Outside pytest's 0700 temporary tree, so
    the server's system user (under root) may run it."""
    bin_dir = Path(tempfile.mkdtemp(prefix="lockyard-fake-bin-"))
    bin_dir.chmod(0o777)
    (bin_dir / "initdb").write_text(FAKE_INITDB)
    (bin_dir / "initdb").chmod(0o755)
    try:
        yield bin_dir
    finally:
        started = bin_dir / "started"
        if started.exists():
            pid = int(started.read_text().split()[0])
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(bin_dir)


def test_a_cluster_whose_owner_is_killed_during_initdb_is_removed(
    hanging_initdb: Path,
) -> None:
    env = {**os.environ, "PATH": f"{hanging_initdb}{os.pathsep}{os.environ['PATH']}"}
    child = subprocess.Popen([sys.executable, "-c", OWNER], env=env, stdout=subprocess.PIPE)
    try:
        started = hanging_initdb / "started"
        wait_until(started.exists, "initdb started")
    finally:
        child.kill()
        child.wait()
    root = Path(started.read_text().split(maxsplit=1)[1].strip())
    assert root.name.startswith("lockyard-pg-")
    wait_until(lambda: not root.exists(), "the half-made cluster's directory removed")
