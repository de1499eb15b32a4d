"""The long-lived guard's kept holders (`HolderWatch`) against a fresh read, with real processes.

Another process changes the locks (takes, releases, drops a grant without freeing its entry,
removes a card by hand, dies holding a lock) and says "done" only after its change returned.
Right after each "done", the guard's kept answer must equal a fresh read's, and the write
guard's decision must be the same through both readers: the window between a change and its
notification is exactly where a stale answer would show.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockyard.infra.agentcli.holder_watch import HolderWatch
from lockyard.infra.agentcli.lockdir_reader import LockDirReader, ReaderCache
from lockyard.infra.hooks.write_guard.decide import write_denial
from lockyard.infra.lockstore import LockDir, LockStore, inotify_available, lock_name

pytestmark = pytest.mark.skipif(not inotify_available(), reason="needs inotify")

FILES = ("a.py", "b.py", "c.py")
AGENTS = ("alice", "bob")

CHANGER = textwrap.dedent(
    """
    import os, sys
    from lockyard.infra.lockstore import LockDir, LockStore, lock_name
    repo, lock_dir = sys.argv[1], sys.argv[2]
    store = LockStore(repo, lock_dir)
    directory = LockDir(lock_dir)

    def change(verb, path, agent):
        if verb == "lock":
            store.try_lock(path, agent)
        elif verb == "release":
            store.release(path, agent)
        elif verb == "drop":  # the grant goes, its entry stays: free, inside the entry
            name = lock_name(store.namespace, store.canonicalize(path))
            token = directory.grant_token(name)
            if token is not None:
                directory.drop_grant(name, token)
        elif verb == "uncard":  # a card removed by hand: the record is unreadable
            for entry in os.listdir(lock_dir):
                if entry.endswith(".card"):
                    os.unlink(os.path.join(lock_dir, entry))

    for line in sys.stdin:
        verb, path, agent = line.split()
        try:
            change(verb, path, agent)
        except Exception:  # an unreadable lock refuses some changes: that is fine here
            pass
        print("done", flush=True)
    """
)


class Changer:
    """A process of its own that changes the locks, one change per request."""

    def __init__(self, repo: Path, lock_dir: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHANGER, str(repo), str(lock_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def do(self, verb: str, path: str = "-", agent: str = "-") -> None:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(f"{verb} {path} {agent}\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "done"

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def files(repo: Path) -> Path:
    for name in FILES:
        (repo / name).write_text("")
    return repo


@pytest.fixture
def readers(files: Path, lock_dir: Path) -> Iterator[tuple[LockDirReader, LockDirReader]]:
    """(the guard's reader with kept holders, a reader that reads afresh)."""
    LockDir(lock_dir).close()
    cache = ReaderCache(lock_dir)
    assert cache.watch is not None
    fresh = LockDirReader(files, lock_dir)
    yield cache.get(str(files)), fresh
    fresh.close()
    cache.watch.close()


def _outcome(reader: LockDirReader, path: str) -> str | None:
    try:
        return reader.holder(path)
    except Exception as exc:  # an unreadable record must raise the same way through both
        return f"raised {type(exc).__name__}"


def _same_everywhere(kept: LockDirReader, fresh: LockDirReader, files: Path) -> None:
    for path in FILES:
        assert _outcome(kept, path) == _outcome(fresh, path), path
        for agent in AGENTS:
            absolute = str(files / path)
            assert write_denial(kept, agent, absolute, None, "lock") == write_denial(
                fresh, agent, absolute, None, "lock"
            ), (path, agent)


def test_a_kept_holder_follows_every_change_another_process_makes(
    readers: tuple[LockDirReader, LockDirReader], files: Path, lock_dir: Path
) -> None:
    kept, fresh = readers
    changer = Changer(files, lock_dir)
    steps = random.Random(30)
    verbs = ["lock"] * 4 + ["release"] * 3 + ["drop"] * 2 + ["uncard"]
    seen = set()
    try:
        for _step in range(160):
            verb, path = steps.choice(verbs), steps.choice(FILES)
            changer.do(verb, path, steps.choice(AGENTS))
            _same_everywhere(kept, fresh, files)
            seen.add(_outcome(fresh, path))
    finally:
        changer.kill()
    # The walk met free, held and unreadable locks alike.
    assert {None, "alice", "bob", "raised CorruptRecordError"} <= seen


def test_a_kept_holder_is_nobody_once_its_process_is_killed(
    readers: tuple[LockDirReader, LockDirReader], files: Path, lock_dir: Path
) -> None:
    kept, fresh = readers
    changer = Changer(files, lock_dir)
    changer.do("lock", "a.py", "alice")
    assert kept.holder("a.py") == "alice"  # now kept, its process followed by a pidfd
    os.kill(changer.process.pid, signal.SIGKILL)
    changer.process.wait()
    assert kept.holder("a.py") is None
    assert fresh.holder("a.py") is None
    assert write_denial(kept, "alice", str(files / "a.py"), None, "lock") == write_denial(
        fresh, "alice", str(files / "a.py"), None, "lock"
    )


def test_a_lock_taken_in_this_process_is_seen_at_once(
    readers: tuple[LockDirReader, LockDirReader], files: Path, lock_dir: Path
) -> None:
    kept, _fresh = readers
    store = LockStore(files, lock_dir)
    for _round in range(20):
        assert kept.holder("b.py") is None
        assert store.try_lock("b.py", "bob")
        assert kept.holder("b.py") == "bob"
        assert store.release("b.py", "bob")


def test_no_watch_without_inotify(
    files: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKYARD_NO_INOTIFY", "1")
    assert HolderWatch.open(lock_dir) is None
    cache = ReaderCache(lock_dir)
    assert cache.watch is None
    store = LockStore(files, lock_dir)
    assert store.try_lock("c.py", "alice")
    assert cache.get(str(files)).holder("c.py") == "alice"


def test_the_watch_keeps_an_answer_until_a_change(
    readers: tuple[LockDirReader, LockDirReader], files: Path, lock_dir: Path
) -> None:
    """The point of it: an unchanged lock is answered without reading its entry again."""
    kept, _fresh = readers
    store = LockStore(files, lock_dir)
    assert store.try_lock("a.py", "alice")
    name = lock_name(store.namespace, "a.py")
    watch = kept._watch
    assert watch is not None
    reads = 0
    real_read = watch.directory.read_lock

    def counted(entry: str) -> tuple[str, str] | None:
        nonlocal reads
        reads += 1
        return real_read(entry)

    watch.directory.read_lock = counted  # type: ignore[method-assign]
    for _call in range(5):
        assert watch.holder(name) == "alice"
    assert reads == 1
    assert store.release("a.py", "alice")
    assert watch.holder(name) is None
    assert reads == 2


def test_a_moved_lock_directory_is_read_as_before_it_was_watched(
    readers: tuple[LockDirReader, LockDirReader], files: Path, lock_dir: Path
) -> None:
    kept, fresh = readers
    store = LockStore(files, lock_dir)
    assert store.try_lock("a.py", "alice")
    assert kept.holder("a.py") == "alice"
    os.rename(lock_dir, lock_dir.with_name("moved"))
    store.release("a.py", "alice")  # the store's open directory moved with it
    assert kept.holder("a.py") is None
    assert fresh.holder("a.py") is None
    assert kept._watch is None  # no longer watched: read as the fresh reader reads
