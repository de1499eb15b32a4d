"""PostgreSQL's journal says what happened as the lock directory's does: one script of lock
calls, run on each backend, leaves the same records in the same order and the same `stats`
(holds and waits per file). A writer that waits for readers, an upgrade that waits for the
other readers and a directory that waits for the holds under it (to read it or to write it)
are waits, then hand-overs, never grants at once; a hand-over comes after the release it
follows; a request waiting in a directory's line is journalled for the file it asked for; a
waiter that takes the lock of a holder that died ends its wait with a hand-over too, whether
the lock is read or written (a grant is a request that never waited)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from lockyard.infra.lockstore import JournalQuery, open_backend, open_journal
from lockyard.infra.lockstore.backend import LockBackend
from lockyard.infra.lockstore.modes import LockMode
from polling_support import wait_until

Step = tuple[str, str, str, str | None]
"""A record's kind, agent, file and outcome (a reclaim's: the agent that took the lock back)."""

# A process that takes a lock on the backend named, says so, and stays until it is killed.
HOLDER = """
import sys, time
from pathlib import Path
from lockyard.infra.lockstore import open_backend
repo, spec, key, agent = sys.argv[1:5]
store = open_backend(Path(repo), spec)  # kept: a store let go closes, and releases
assert store.try_lock(key, agent)
print("holding", flush=True)
time.sleep(600)
"""


class Play:
    """What a script may ask for besides its two stores: `waits(agent)` returns once `agent`
    has begun one more wait (its journal says so); `holder_that_dies`."""

    def __init__(self, repo: Path, spec: str, waits: Callable[[str], None]) -> None:
        self.repo, self.spec, self.waits = repo, spec, waits

    def holder_that_dies(self, key: str, agent: str) -> Callable[[], None]:
        """`agent` holds `key` in a process of its own; the call returned SIGKILLs it."""
        process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(self.repo), self.spec, key, agent],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "holding"
        process.stdout.close()

        def kill() -> None:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)

        return kill


Script = Callable[[LockBackend, LockBackend, Play], None]


def in_thread(call: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=call)
    thread.start()
    return thread


def writer_waits_for_a_reader(one: LockBackend, two: LockBackend, play: Play) -> None:
    assert one.try_lock("a.py", "reader", mode="shared")
    writer = in_thread(lambda: two.acquire("a.py", "writer", timeout_seconds=60))
    play.waits("writer")
    assert one.release("a.py", "reader")
    writer.join()
    assert two.release("a.py", "writer")


def upgrade_waits_for_the_other_reader(one: LockBackend, two: LockBackend, play: Play) -> None:
    assert one.try_lock("a.py", "ann", mode="shared")
    assert two.try_lock("a.py", "bob", mode="shared")
    upgrade = in_thread(lambda: one.acquire("a.py", "ann", timeout_seconds=60))
    play.waits("ann")
    assert two.release("a.py", "bob")
    upgrade.join()
    assert one.release("a.py", "ann")


def upgrade_in_place(one: LockBackend, two: LockBackend, play: Play) -> None:
    assert one.try_lock("a.py", "ann", mode="shared")
    assert one.try_lock("a.py", "ann")
    assert one.release("a.py", "ann")


def hand_over_to_a_writer_and_to_a_reader(one: LockBackend, two: LockBackend, play: Play) -> None:
    modes: tuple[LockMode, ...] = ("exclusive", "shared")
    for mode in modes:
        assert one.try_lock("a.py", "alice")
        waiter = in_thread(lambda: two.acquire("a.py", "bob", timeout_seconds=60, mode=mode))  # noqa: B023
        play.waits("bob")
        assert one.release("a.py", "alice")
        waiter.join()
        assert two.release("a.py", "bob")


def a_file_waits_in_a_directorys_line(one: LockBackend, two: LockBackend, play: Play) -> None:
    assert one.try_lock("src/", "alice")
    waiter = in_thread(lambda: two.acquire("src/a.py", "bob", timeout_seconds=60))
    play.waits("bob")
    assert one.release("src/", "alice")
    waiter.join()
    assert two.release("src/a.py", "bob")


def a_directory_waits_for_the_holds_under_it(
    one: LockBackend, two: LockBackend, play: Play
) -> None:
    assert two.try_lock("src/a.py", "bob")
    waiter = in_thread(lambda: one.acquire("src/", "alice", timeout_seconds=60))
    play.waits("alice")
    assert two.release("src/a.py", "bob")
    waiter.join()
    assert one.release("src/", "alice")


def a_reader_of_a_directory_waits_for_the_writes_under_it(
    one: LockBackend, two: LockBackend, play: Play
) -> None:
    assert two.try_lock("src/a.py", "bob")
    waiter = in_thread(lambda: one.acquire("src/", "alice", timeout_seconds=60, mode="shared"))
    play.waits("alice")
    assert two.release("src/a.py", "bob")
    waiter.join()
    assert one.release("src/", "alice")


def a_reader_of_a_directory_waiting_for_a_write_under_it_gives_up(
    one: LockBackend, two: LockBackend, play: Play
) -> None:
    assert two.try_lock("src/a.py", "bob")
    assert not one.acquire("src/", "alice", timeout_seconds=0.3, mode="shared")
    assert two.release("src/a.py", "bob")


def a_writer_waiting_for_readers_gives_up(one: LockBackend, two: LockBackend, play: Play) -> None:
    assert one.try_lock("a.py", "reader", mode="shared")
    assert not two.acquire("a.py", "writer", timeout_seconds=0.3)
    assert one.release("a.py", "reader")


def a_writer_takes_the_lock_of_a_holder_that_died(
    one: LockBackend, two: LockBackend, play: Play
) -> None:
    kill = play.holder_that_dies("a.py", "ghost")
    writer = in_thread(lambda: two.acquire("a.py", "bob", timeout_seconds=60))
    play.waits("bob")
    kill()
    writer.join()
    assert two.release("a.py", "bob")


def a_reader_takes_the_lock_of_a_holder_that_died(
    one: LockBackend, two: LockBackend, play: Play
) -> None:
    kill = play.holder_that_dies("a.py", "ghost")
    reader = in_thread(lambda: two.acquire("a.py", "bob", timeout_seconds=60, mode="shared"))
    play.waits("bob")
    kill()
    reader.join()
    assert two.release("a.py", "bob")


SCRIPTS = [
    writer_waits_for_a_reader,
    upgrade_waits_for_the_other_reader,
    upgrade_in_place,
    hand_over_to_a_writer_and_to_a_reader,
    a_file_waits_in_a_directorys_line,
    a_directory_waits_for_the_holds_under_it,
    a_reader_of_a_directory_waits_for_the_writes_under_it,
    a_reader_of_a_directory_waiting_for_a_write_under_it_gives_up,
    a_writer_waiting_for_readers_gives_up,
    a_writer_takes_the_lock_of_a_holder_that_died,
    a_reader_takes_the_lock_of_a_holder_that_died,
]


@pytest.fixture
def backends(repo: Path, lock_dir: Path, pg_backend: str) -> list[str]:
    (repo / "src").mkdir()
    return [str(lock_dir), pg_backend]


def played(repo: Path, spec: str, script: Script) -> tuple[list[Step], dict[str, tuple[int, int]]]:
    """The records (kind, agent, file, outcome) of `script` run on the backend `spec`, and the
    `stats` per file (holds, waits)."""
    one, two = open_backend(repo, spec), open_backend(repo, spec)
    journal = open_journal(one)
    try:
        seen: dict[str, int] = {}

        def waits(agent: str) -> None:
            """Until `agent` has begun one more wait."""
            query = JournalQuery.of(agents=[agent], kinds=["wait-begin"])
            seen[agent] = seen.get(agent, 0) + 1
            wait_until(
                lambda: len(list(journal.records(query))) >= seen[agent],
                f"{agent}'s wait journalled",
            )

        script(one, two, Play(repo, spec, waits))
        steps = [
            (r.kind, r.agent, r.file, r.other if r.kind == "reclaim" else r.outcome)
            for r in journal.records(JournalQuery.of())
        ]
        stats = {name: (f.holds, f.waits) for name, f in journal.stats().files.items()}
    finally:
        journal.close()
        one.close()
        two.close()
    return steps, stats


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda script: script.__name__)
def test_postgres_journals_a_script_as_the_lock_directory_does(
    repo: Path, backends: list[str], script: Script
) -> None:
    """The same records and stats. (The order is compared below, on PostgreSQL: the lock
    directory may journal a reader's release after the hand-over it caused.)"""
    (lockdir, lockdir_stats), (postgres, postgres_stats) = (
        played(repo, spec, script) for spec in backends
    )
    assert sorted(postgres, key=str) == sorted(lockdir, key=str)
    assert postgres_stats == lockdir_stats


EXPECTED: dict[str, list[Step]] = {
    "writer_waits_for_a_reader": [
        ("grant", "reader", "a.py", "shared"), ("wait-begin", "writer", "a.py", None),
        ("release", "reader", "a.py", None), ("hand-over", "writer", "a.py", None),
        ("wait-end", "writer", "a.py", "granted"), ("release", "writer", "a.py", None),
    ],
    "upgrade_waits_for_the_other_reader": [
        ("grant", "ann", "a.py", "shared"), ("grant", "bob", "a.py", "shared"),
        ("wait-begin", "ann", "a.py", None), ("release", "bob", "a.py", None),
        ("hand-over", "ann", "a.py", "upgrade"), ("wait-end", "ann", "a.py", "granted"),
        ("release", "ann", "a.py", None),
    ],
    "upgrade_in_place": [
        ("grant", "ann", "a.py", "shared"), ("grant", "ann", "a.py", "upgrade"),
        ("release", "ann", "a.py", None),
    ],
    "hand_over_to_a_writer_and_to_a_reader": [
        ("grant", "alice", "a.py", None), ("wait-begin", "bob", "a.py", None),
        ("release", "alice", "a.py", None), ("hand-over", "bob", "a.py", None),
        ("wait-end", "bob", "a.py", "granted"), ("release", "bob", "a.py", None),
        ("grant", "alice", "a.py", None), ("wait-begin", "bob", "a.py", None),
        ("release", "alice", "a.py", None), ("hand-over", "bob", "a.py", "shared"),
        ("wait-end", "bob", "a.py", "granted"), ("release", "bob", "a.py", None),
    ],
    "a_file_waits_in_a_directorys_line": [
        ("grant", "alice", "src/", None), ("wait-begin", "bob", "src/a.py", None),
        ("release", "alice", "src/", None), ("hand-over", "bob", "src/a.py", None),
        ("wait-end", "bob", "src/a.py", "granted"), ("release", "bob", "src/a.py", None),
    ],
    "a_directory_waits_for_the_holds_under_it": [
        ("grant", "bob", "src/a.py", None), ("wait-begin", "alice", "src/", None),
        ("release", "bob", "src/a.py", None), ("hand-over", "alice", "src/", None),
        ("wait-end", "alice", "src/", "granted"), ("release", "alice", "src/", None),
    ],
    "a_reader_of_a_directory_waits_for_the_writes_under_it": [
        ("grant", "bob", "src/a.py", None), ("wait-begin", "alice", "src/", None),
        ("release", "bob", "src/a.py", None), ("hand-over", "alice", "src/", "shared"),
        ("wait-end", "alice", "src/", "granted"), ("release", "alice", "src/", None),
    ],
    "a_reader_of_a_directory_waiting_for_a_write_under_it_gives_up": [
        ("grant", "bob", "src/a.py", None), ("wait-begin", "alice", "src/", None),
        ("wait-end", "alice", "src/", "timed-out"), ("release", "bob", "src/a.py", None),
    ],
    "a_writer_waiting_for_readers_gives_up": [
        ("grant", "reader", "a.py", "shared"), ("wait-begin", "writer", "a.py", None),
        ("wait-end", "writer", "a.py", "timed-out"), ("release", "reader", "a.py", None),
    ],
    "a_writer_takes_the_lock_of_a_holder_that_died": [
        ("grant", "ghost", "a.py", None), ("wait-begin", "bob", "a.py", None),
        ("reclaim", "ghost", "a.py", "bob"), ("hand-over", "bob", "a.py", None),
        ("wait-end", "bob", "a.py", "granted"), ("release", "bob", "a.py", None),
    ],
    "a_reader_takes_the_lock_of_a_holder_that_died": [
        ("grant", "ghost", "a.py", None), ("wait-begin", "bob", "a.py", None),
        ("reclaim", "ghost", "a.py", "bob"), ("hand-over", "bob", "a.py", "shared"),
        ("wait-end", "bob", "a.py", "granted"), ("release", "bob", "a.py", None),
    ],
}  # fmt: skip


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda script: script.__name__)
def test_postgres_journals_each_change_in_its_order(
    repo: Path, pg_backend: str, script: Script
) -> None:
    """A hand-over after the release it follows, a wait's end after its hand-over."""
    (repo / "src").mkdir()
    assert played(repo, pg_backend, script)[0] == EXPECTED[script.__name__]


def test_an_upgrade_is_one_hold_held_from_its_read(repo: Path, pg_backend: str) -> None:
    store = open_backend(repo, pg_backend)
    journal = open_journal(store)
    try:
        upgrade_in_place(store, store, Play(repo, pg_backend, lambda agent: None))
        records = list(journal.records(JournalQuery.of()))
        stats = journal.stats()
    finally:
        journal.close()
        store.close()
    read, release = records[0], records[-1]
    assert (read.kind, release.kind) == ("grant", "release")
    # From the read's grant (its row's time, a moment before its record's, at a loaded
    # server tens of milliseconds), not from the upgrade's.
    assert release.time - read.time - 0.01 <= release.held <= release.time - read.time + 0.25
    assert stats.files["a.py"].holds == 1
    assert stats.files["a.py"].held == pytest.approx(release.held)
