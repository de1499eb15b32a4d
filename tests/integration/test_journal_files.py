"""The lock directory's journal on disk: bounded segments, readers that skip what is torn
or hostile, filters, figures, and followers woken by the writes themselves."""

from __future__ import annotations

import json
import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from lockyard.infra.lockstore import FileJournal, JournalQuery, open_journal
from lockyard.infra.lockstore.journal.files import (
    ACTIVE,
    JournalFiles,
    JournalSettingError,
    append_once,
    journal_dir,
    max_bytes_from_env,
    sealed_segments,
)
from lockyard.infra.lockstore.journal.record import (
    GRANTED,
    TIMED_OUT,
    CycleStep,
    JournalRecord,
    deadlock_record,
    encode,
)
from lockyard.infra.lockstore.journal.summary import summary_path
from polling_support import wait_until

T0 = 1_764_245_100.0


def rec(i: int, kind: str = "grant", **changes: object) -> JournalRecord:
    fields: dict[str, object] = {
        "time": T0 + i, "kind": kind, "namespace": "ns", "agent": f"agent-{i % 3}",
        "file": f"src/f{i % 5}.py", "session": "1.2", "pid": 1, "host": "h",
    }  # fmt: skip
    fields.update(changes)
    return JournalRecord(**fields)  # type: ignore[arg-type]


@pytest.fixture
def writer(lock_dir: Path) -> Iterator[JournalFiles]:
    lock_dir.mkdir()
    files = JournalFiles(journal_dir(lock_dir), max_bytes=1 << 20)  # segments of 64 KiB
    yield files
    files.close()


def journal_bytes(lock_dir: Path) -> int:
    return sum(p.stat().st_size for p in journal_dir(lock_dir).iterdir() if p.is_file())


def test_the_journal_stays_within_its_bound_and_keeps_the_newest_records(
    writer: JournalFiles, lock_dir: Path
) -> None:
    for i in range(20_000):  # about 3 MB of records for a 1 MiB journal
        assert writer.append(rec(i))
    assert journal_bytes(lock_dir) <= writer.max_bytes + writer.segment_bytes
    assert len(sealed_segments(journal_dir(lock_dir))) >= 10
    records = list(FileJournal(lock_dir).records())
    assert records[-1].time == T0 + 19_999
    assert [r.time for r in records] == sorted(r.time for r in records)
    assert len(records) == records[-1].time - records[0].time + 1  # none lost in between


def test_a_torn_record_is_skipped_and_the_next_is_read(
    writer: JournalFiles, lock_dir: Path
) -> None:
    writer.append(rec(1))
    with open(journal_dir(lock_dir) / ACTIVE, "ab") as raw:
        raw.write(b'{"t":1764245102.0,"kind":"grant","ns":"n')  # cut short: no newline
    writer.append(rec(3))
    assert [r.time - T0 for r in FileJournal(lock_dir).records()] == [1, 3]
    assert [r.time - T0 for r in FileJournal(lock_dir).latest(limit=5)] == [1, 3]


def test_hostile_lines_are_skipped_without_being_held_in_memory(
    writer: JournalFiles, lock_dir: Path
) -> None:
    writer.append(rec(1))
    with open(journal_dir(lock_dir) / ACTIVE, "ab") as raw:
        raw.write(b"x" * (3 << 20))  # three megabytes without a newline
        raw.write(b"\n\xff\xfe<script>alert(1)</script>\n{}\n[]\n")
        raw.write(b'{"t":1,"kind":"grant","ns":"n","agent":[],"file":"f"}\n')
    writer.append(rec(2, agent="<img src=x onerror=alert(1)>"))
    journal = FileJournal(lock_dir)
    records = list(journal.records())
    assert [r.time - T0 for r in records] == [1, 2]
    assert records[1].agent == "<img src=x onerror=alert(1)>"  # text, shown as text
    assert [r.time - T0 for r in journal.latest(limit=10)] == [1, 2]


def test_queries_pick_records_by_agent_file_glob_kind_and_window(
    writer: JournalFiles, lock_dir: Path
) -> None:
    for i in range(3000):
        writer.append(rec(i, kind="grant" if i % 2 else "wait-begin"))
    writer.append(a_deadlock(4000))
    journal = FileJournal(lock_dir)

    def times(query: JournalQuery) -> list[float]:
        return [r.time - T0 for r in journal.records(query)]

    # A window alone is judged by each segment's own first and last times: no summary is
    # parsed (nor made), as a picked agent, file, kind or namespace needs one.
    assert times(JournalQuery.of(since=T0 + 100, until=T0 + 103)) == [100, 101, 102]
    assert [r.time - T0 for r in journal.latest(JournalQuery.of(until=T0 + 50), 2)] == [48, 49]
    assert not any(summary_path(p).exists() for p in sealed_segments(journal_dir(lock_dir)))
    assert times(JournalQuery.of(agents=["agent-1"], since=T0 + 100, until=T0 + 110)) == [
        100, 103, 106, 109
    ]  # fmt: skip
    assert times(JournalQuery.of(files=["src/f[12].py"], kinds=["grant"], until=T0 + 12)) == [
        1, 7, 11
    ]  # fmt: skip
    # A deadlock matches any agent and any file of its cycle.
    assert times(JournalQuery.of(agents=["a1"])) == [4000]
    assert times(JournalQuery.of(files=["*y.py"])) == [4000]
    assert len(times(JournalQuery.of(namespaces=["elsewhere"]))) == 0
    latest = journal.latest(JournalQuery.of(kinds=["wait-begin"], files=["src/f0.py"]), 3)
    assert [r.time - T0 for r in latest] == [2970, 2980, 2990]


def a_deadlock(i: int) -> JournalRecord:
    cycle = [CycleStep("a1", "x.py", "a2"), CycleStep("a2", "y.py", "a1")]
    return deadlock_record(
        time=T0 + i,
        namespace="ns",
        cycle=cycle,
        victim="a2",
        victim_waits_on="y.py",
        released=["x.py"],
        costs={"a1": 4.0, "a2": 6.0},
        session="9",
        pid=9,
        host="h",
    )


def test_stats_sum_holds_waits_and_deadlock_costs_the_same_from_summaries_or_records(
    writer: JournalFiles, lock_dir: Path
) -> None:
    for i in range(0, 6000, 3):
        writer.append(rec(i, file="hot.py"))
        writer.append(rec(i + 1, kind="wait-end", file="hot.py", waited=2.0,
                          outcome=GRANTED if i % 2 else TIMED_OUT))  # fmt: skip
        writer.append(rec(i + 2, kind="release", file="hot.py", held=0.5))
    writer.append(a_deadlock(7000))
    journal = FileJournal(lock_dir)
    whole = journal.stats()
    segments = sealed_segments(journal_dir(lock_dir))
    assert all(summary_path(p).exists() for p in segments)  # cached by the first read
    hot = whole.files["hot.py"]
    assert (hot.holds, hot.waits, hot.waits_granted) == (2000, 2000, 1000)
    assert hot.held == pytest.approx(1000.0)
    assert hot.waited == pytest.approx(4000.0)
    assert hot.contention == pytest.approx(0.5)
    assert hot.timeouts == 1000
    assert whole.deadlock_cost == pytest.approx(10.0)
    assert whole.agents["a2"].victim == 1
    # The same figures from the records themselves (a filter reads every record).
    by_records = journal.stats(JournalQuery.of(files=["*"]))
    assert by_records.files["hot.py"] == hot
    assert whole.records == by_records.records + 0 == 6001
    # A window: only what falls inside it.
    window = journal.stats(JournalQuery.of(since=T0 + 3000, until=T0 + 3030))
    assert window.records == 30


def test_stats_of_a_window_open_the_summaries_of_the_segments_it_takes_whole_only(
    writer: JournalFiles, lock_dir: Path
) -> None:
    for i in range(3000):
        writer.append(rec(i, kind="release", held=1.0))
    segments = sealed_segments(journal_dir(lock_dir))
    assert len(segments) >= 6
    journal = FileJournal(lock_dir)
    since, until = T0 + 700, T0 + 2300
    window = journal.stats(JournalQuery.of(since=since, until=until))
    assert window.records == 1600
    assert sum(a.held for a in window.agents.values()) == pytest.approx(1600.0)
    summarised = [summary_path(p).exists() for p in segments]
    # Made (a reader caches what it parses) for exactly the segments inside the window:
    # neither those it misses nor the two it cuts, which are read record by record.
    inside = []
    for segment in segments:
        times = [json.loads(line)["t"] for line in segment.read_bytes().splitlines()]
        inside.append(since + 2.0 <= min(times) and max(times) < until - 2.0)
    assert summarised == inside
    assert 0 < sum(inside) < len(segments) - 2


def test_a_sealed_segment_that_grew_after_its_summary_is_summed_whole(
    writer: JournalFiles, lock_dir: Path
) -> None:
    for i in range(1000):
        writer.append(rec(i, kind="release", held=1.0))
    assert FileJournal(lock_dir).stats().records == 1000  # summaries cached
    oldest = sealed_segments(journal_dir(lock_dir))[0]
    with open(oldest, "ab") as late:  # a writer that had not noticed the sealing
        late.write(rec(5000, kind="release", held=1.0).to_json().encode() + b"\n")
    stats = FileJournal(lock_dir).stats()
    assert stats.records == 1001
    assert stats.last == T0 + 5000


def test_a_follower_gets_its_backlog_then_every_record_however_many_sealings_it_slept_through(
    writer: JournalFiles, lock_dir: Path
) -> None:
    for i in range(10):
        writer.append(rec(i))
    journal = FileJournal(lock_dir)
    stop = threading.Event()
    follower = journal.follow(JournalQuery.of(agents=["agent-0"]), backlog=2, stop=stop)
    got = [next(follower).time - T0, next(follower).time - T0]  # the backlog
    assert got == [6, 9]
    # The follower sleeps (a suspended generator) while the writers seal segment after
    # segment (64 KiB each): on waking it reads every one of them, then the current one.
    for i in range(10, 2000):
        writer.append(rec(i))
    assert len(sealed_segments(journal_dir(lock_dir))) >= 3
    wanted = list(range(12, 2000, 3))
    while len(got) < 2 + len(wanted):
        got.append(next(follower).time - T0)
    stop.set()
    follower.close()
    assert got[2:] == wanted


def test_a_follower_in_another_thread_is_woken_by_each_write(
    writer: JournalFiles, lock_dir: Path
) -> None:
    writer.append(rec(0))
    journal = FileJournal(lock_dir)
    got: list[float] = []
    stop = threading.Event()

    def follow() -> None:
        for record in journal.follow(backlog=1, stop=stop):
            got.append(record.time - T0)

    thread = threading.Thread(target=follow)
    thread.start()
    try:
        wait_until(lambda: got == [0])  # the backlog: the follower is reading
        for i in (1, 2):
            writer.append(rec(i))
            wait_until(lambda i=i: i in got)  # type: ignore[misc]
    finally:
        stop.set()
        thread.join()
    assert got == [0, 1, 2]


@pytest.mark.anyio
async def test_an_async_follower_is_woken_by_the_write(
    writer: JournalFiles, lock_dir: Path
) -> None:
    writer.append(rec(0))
    journal = open_journal(str(lock_dir))
    seen: list[JournalRecord] = []
    with anyio.fail_after(30):
        async for record in journal.follow_async(backlog=1):
            seen.append(record)
            if len(seen) == 1:
                writer.append(rec(1, kind="denied", guard="write", reason="not locked"))
            else:
                break
    assert [r.kind for r in seen] == ["grant", "denied"]


def test_an_unwritable_journal_drops_records_and_never_raises(lock_dir: Path) -> None:
    lock_dir.mkdir()
    journal_dir(lock_dir).write_text("a file where the journal's directory should be")
    files = JournalFiles(journal_dir(lock_dir))
    assert files.append(rec(1)) is False
    assert files.append(rec(2)) is False
    assert files.dropped == 2
    assert append_once(lock_dir, rec(3)) is False


def test_a_short_process_appends_with_one_call(lock_dir: Path) -> None:
    lock_dir.mkdir()
    assert append_once(lock_dir, rec(1, kind="denied", guard="write"))
    assert [r.kind for r in FileJournal(lock_dir).records()] == ["denied"]


def test_the_journal_switched_off_writes_nothing(
    lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKYARD_JOURNAL", "off")
    lock_dir.mkdir()
    assert append_once(lock_dir, rec(1)) is False
    assert not journal_dir(lock_dir).exists()


@pytest.mark.parametrize("value", ["0", "-3", "lots", "0.5"])
def test_a_bad_size_setting_is_refused_with_what_to_write(value: str) -> None:
    with pytest.raises(JournalSettingError, match="LOCKYARD_JOURNAL_MAX_MB"):
        max_bytes_from_env({"LOCKYARD_JOURNAL_MAX_MB": value})
    assert max_bytes_from_env({"LOCKYARD_JOURNAL_MAX_MB": "8"}) == 8 << 20
    assert max_bytes_from_env({}) == 64 << 20


def test_records_of_many_threads_are_written_whole(writer: JournalFiles, lock_dir: Path) -> None:
    def write(t: int) -> None:
        for i in range(500):
            writer.append(rec(i, agent=f"thread-{t}", reason="r" * (i % 300)))

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = list(FileJournal(lock_dir).records())
    assert len(records) == 2000
    assert os.path.exists(journal_dir(lock_dir) / ACTIVE)


def test_a_window_in_a_big_segment_is_read_from_its_end_and_misses_nothing(
    lock_dir: Path,
) -> None:
    """A window's records come from a bisection to its end, not a read of everything after
    it: bursts, gaps and writers a little out of order included, each window gives exactly
    the records a whole read gives."""
    chance = random.Random(27)
    times, t = [], T0
    for _ in range(30_000):  # about 4 MiB: many bisection steps
        t += chance.choice([0.0, 0.0, 0.01, 0.5, 3.0, 40.0])
        times.append(round(t + chance.uniform(-0.5, 0.5), 6))  # writers' order; as written
    directory = journal_dir(lock_dir)
    directory.mkdir(parents=True)
    line = encode(rec(0))
    after_time = line[line.index(b",") :]
    (directory / ACTIVE).write_bytes(b"".join(b'{"t":%.6f' % at + after_time for at in times))
    journal = FileJournal(lock_dir)
    last = times[-1]
    for since, until in [
        (T0 - 10, T0 + 1), (T0 + 5000, T0 + 5003), ((T0 + last) / 2, (T0 + last) / 2 + 600.0),
        (last - 60, last + 0.001), (last - 1, last + 10), (T0 + 1e6, T0 + 2e6),
        *((at, at + chance.choice([0.001, 1.0, 100.0])) for at in chance.sample(times, 6)),
    ]:  # fmt: skip
        query = JournalQuery.of(since=since, until=until)
        wanted = sorted(at for at in times if since <= at < until)
        got = journal.latest(query, limit=len(times))
        assert sorted(r.time for r in got) == wanted, (since, until)
        assert sorted(r.time for r in journal.records(query)) == wanted, (since, until)
