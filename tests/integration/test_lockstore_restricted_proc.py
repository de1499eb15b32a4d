"""A restricted /proc (hidepid, an LSM) gives no proof of death: the lock is kept, not broken,
and no PermissionError escapes. The restriction is real: in a private mount namespace the
holder's /proc/<pid>/stat is covered by an unreadable file, and the store runs as root without
the capabilities that bypass file permissions."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from lockstore_support import plant_holder

from lockyard.infra.lockstore import LockStore
from lockyard.infra.lockstore.liveness import read_proc_stat

CHILD = r"""
import json, sys
from lockyard.infra.lockstore import LockStore
repo, lock_dir = sys.argv[1:3]
store = LockStore(repo, lock_dir)
[info] = store.list_locks()
print(json.dumps({
    "try_lock": store.try_lock("a.py", "bob"),
    "acquire": store.acquire("a.py", "bob", timeout_seconds=0.05),
    "reclaimed": len(store.reclaim_stale()),
    "liveness": info.liveness,
    "reason": info.liveness_reason,
}))
"""


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen(["sleep", "600"])
    yield child
    child.kill()
    child.wait()


def test_a_holder_whose_proc_entry_cannot_be_read_keeps_its_lock(
    repo: Path, lock_dir: Path, tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    for tool in ("unshare", "setpriv", "mount"):
        assert shutil.which(tool), f"{tool} (util-linux) is needed to restrict /proc"
    stat = read_proc_stat(sleeper.pid)
    assert stat is not None
    store = LockStore(repo, lock_dir)
    plant_holder(store, "a.py", "alice", pid=sleeper.pid, start_time=stat[1])
    blocker = tmp_path / "unreadable"
    blocker.write_text("")
    blocker.chmod(0)
    no_bypass = "-dac_override,-dac_read_search"
    script = (
        f'mount --bind "$1" /proc/{sleeper.pid}/stat && exec setpriv '
        f'--bounding-set {no_bypass} --inh-caps {no_bypass} "$2" -c "$3" "$4" "$5"'
    )
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, "sh", str(blocker), sys.executable, CHILD,
         str(repo), str(lock_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["try_lock"] is False
    assert seen["acquire"] is False
    assert seen["reclaimed"] == 0
    assert seen["liveness"] == "unknown"
    assert seen["reason"] == f"cannot read /proc/{sleeper.pid}/stat (Permission denied)"
    assert store.holder("a.py") == "alice"
    assert store.waiters("a.py") == []
