"""The journal on PostgreSQL: every lock change writes its record in its own transaction, with
how it happened, and the reader filters, sums and follows them like the lock directory's."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockyard.infra.lockstore import JournalQuery, JournalRecord, open_journal
from lockyard.infra.lockstore.journal.causes import mark_victim, operator_release, unmark_victim
from lockyard.infra.lockstore.journal.file_glob import BadGlobError, FileGlob
from lockyard.infra.lockstore.journal.record import CycleStep, deadlock_record
from lockyard.infra.lockstore.postgres import PgLockStore
from lockyard.infra.lockstore.postgres.journal import PgJournal, insert_params, insert_statement
from lockyard.infra.lockstore.postgres.journal_schema import (
    PRUNE_EVERY,
    RETENTION_ENV,
    SUM_BLOCK,
    RetentionSettingError,
    retention_from_env,
)
from pg_support import PgServer
from polling_support import wait_until

NO_RECHECK = 3600.0


@pytest.fixture
def stores(repo: Path, pg_backend: str) -> Iterator[list[PgLockStore]]:
    opened = [
        PgLockStore(repo, pg_backend, namespace="app", liveness_interval=NO_RECHECK)
        for _ in range(2)
    ]
    yield opened
    for store in opened:
        store.close()


@pytest.fixture
def journal(stores: list[PgLockStore]) -> Iterator[PgJournal]:
    reader = open_journal(stores[0])
    assert isinstance(reader, PgJournal)
    yield reader
    reader.close()


def kinds(journal: PgJournal, **query: object) -> list[tuple[str, str]]:
    return [(r.kind, r.agent) for r in journal.records(JournalQuery.of(**query))]  # type: ignore[arg-type]


def test_a_grant_a_wait_a_hand_over_and_a_release_are_recorded(
    stores: list[PgLockStore], journal: PgJournal
) -> None:
    one, two = stores
    assert one.try_lock("a.py", "alice")
    waiter = threading.Thread(target=lambda: two.acquire("a.py", "bob", timeout_seconds=60))
    waiter.start()
    wait_until(lambda: one.waiters("a.py"))
    assert one.release("a.py", "alice")
    waiter.join()
    assert two.release("a.py", "bob")
    records = list(journal.records())
    assert sorted((r.kind, r.agent) for r in records) == sorted([
        ("grant", "alice"), ("wait-begin", "bob"), ("release", "alice"),
        ("hand-over", "bob"), ("wait-end", "bob"), ("release", "bob"),
    ])  # fmt: skip
    by_kind = {r.kind: r for r in records if r.agent == "bob"}
    assert by_kind["hand-over"].other == "alice"
    assert (
        by_kind["hand-over"].fence == two.grant_fence("a.py", "bob") or by_kind["hand-over"].fence
    )
    assert by_kind["wait-end"].outcome == "granted"
    assert (by_kind["wait-end"].waited or 0) > 0
    grant = next(r for r in records if r.kind == "grant")
    assert grant.fence is not None
    assert grant.session == str(one.session_number)
    assert grant.namespace == "app"
    assert grant.file == "a.py"
    assert grant.pid > 0
    release = next(r for r in records if r.kind == "release" and r.agent == "alice")
    assert release.held is not None
    assert release.held > 0


def test_a_grant_through_a_directory_line_is_recorded_as_a_hand_over(
    stores: list[PgLockStore], journal: PgJournal
) -> None:
    """bob waits for src/a.py in the line of alice's directory lock src/: alice's release of
    src/ hands src/a.py over to him, a lock that had no holder (the record names the last
    one to release it)."""
    one, two = stores
    assert one.try_lock("src/a.py", "carol")
    assert one.release("src/a.py", "carol")
    assert one.try_lock("src/", "alice")
    waiter = threading.Thread(target=lambda: two.acquire("src/a.py", "bob", timeout_seconds=60))
    waiter.start()
    wait_until(lambda: one.waiters("src/"))
    assert one.release("src/", "alice")
    waiter.join()
    assert two.holder("src/a.py") == "bob"
    [handed] = [r for r in journal.records() if r.agent == "bob" and r.kind == "hand-over"]
    assert (handed.file, handed.other) == ("src/a.py", "carol")


def test_a_wait_that_times_out_or_is_cancelled_or_gives_way_says_so(
    stores: list[PgLockStore], journal: PgJournal
) -> None:
    one, two = stores
    assert one.try_lock("a.py", "alice")
    assert not two.acquire("a.py", "bob", timeout_seconds=0.2)

    async def cancelled(agent: str) -> None:
        with anyio.move_on_after(0.3):
            await two.acquire_async("a.py", agent, timeout_seconds=60)

    anyio.run(cancelled, "carol")
    mark_victim("dave")
    try:
        anyio.run(cancelled, "dave")
    finally:
        unmark_victim("dave")
    ended = {r.agent: r.outcome for r in journal.records(JournalQuery.of(kinds=["wait-end"]))}
    assert ended == {"bob": "timed-out", "carol": "cancelled", "dave": "victim"}


def test_a_dead_sessions_lock_taken_back_is_a_reclaim_with_its_proof(
    stores: list[PgLockStore], journal: PgJournal, pg_server: PgServer
) -> None:
    one, two = stores
    assert one.try_lock("a.py", "alice")
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND objid = %s AND granted",
            (one.session_number,),
        )
    wait_until(lambda: two.try_lock("a.py", "bob"))
    reclaim = journal.latest(JournalQuery.of(kinds=["reclaim"]), 1)
    assert [(r.agent, r.file, r.other) for r in reclaim] == [("alice", "a.py", "bob")]
    assert reclaim[0].reason is not None
    assert "session" in reclaim[0].reason


def test_an_operators_release_names_the_operator(
    stores: list[PgLockStore], journal: PgJournal
) -> None:
    one, two = stores
    assert one.try_lock("a.py", "alice")
    assert one.try_lock("b.py", "alice")
    with operator_release("lockyard clean --agent alice"):
        assert two.cleanup_agent_locks("alice", all_namespaces=True) == ["a.py", "b.py"]
    released = journal.records(JournalQuery.of(kinds=["operator-release"]))
    assert [(r.file, r.other) for r in released] == [
        ("a.py", "lockyard clean --agent alice"), ("b.py", "lockyard clean --agent alice")
    ]  # fmt: skip


def test_a_grant_rolled_back_leaves_no_record(
    stores: list[PgLockStore], journal: PgJournal, pg_server: PgServer, pg_schema: str
) -> None:
    one, _ = stores
    assert one.try_lock("warm.py", "alice")  # the schema exists
    with psycopg.connect(pg_server.dsn) as conn:  # a transaction, rolled back at the end
        conn.execute(
            f'INSERT INTO "{pg_schema}".holds (namespace, key, agent_id, session, token, fence, '
            "pid, host, acquired_at) VALUES ('app', 'ghost.py', 'ghost', 1, 't', 1, 1, 'h', 0)"
        )
        inside = conn.execute(
            f"SELECT count(*) FROM \"{pg_schema}\".journal WHERE agent = 'ghost'"
        ).fetchone()
        assert inside == (1,)
        conn.rollback()
    assert kinds(journal, agents=["ghost"]) == []


def test_records_no_lock_change_writes_are_written_and_read_back(
    stores: list[PgLockStore], journal: PgJournal
) -> None:
    one, _ = stores
    one.journal_write(
        deadlock_record(
            time=1_764_245_100.0, namespace="app",
            cycle=[CycleStep("a1", "x.py", "a2"), CycleStep("a2", "y.py", "a1")],
            victim="a2", victim_waits_on="y.py", released=["x.py"],
            costs={"a1": 1.0, "a2": 2.5}, session="m", pid=1, host="h",
        )
    )  # fmt: skip
    one.journal_write(
        JournalRecord(
            1_764_245_101.0,
            "denied",
            "app",
            "a1",
            "<b>x.py</b>",
            "s",
            1,
            "h",
            guard="write",
            reason="not locked",
        )
    )
    deadlock = journal.latest(JournalQuery.of(agents=["a1"], kinds=["deadlock"]), 5)
    assert len(deadlock) == 1
    assert deadlock[0].cycle[0] == CycleStep("a1", "x.py", "a2")
    assert deadlock[0].costs == {"a1": 1.0, "a2": 2.5}
    stats = journal.stats()
    assert stats.deadlock_cost == pytest.approx(3.5)
    assert stats.files["<b>x.py</b>"].denied == 1
    assert stats.agents["a2"].victim == 1


def test_stats_from_the_server_match_stats_from_the_records(
    stores: list[PgLockStore], journal: PgJournal
) -> None:
    one, two = stores
    for i in range(30):
        assert one.try_lock(f"f{i % 4}.py", "alice")
        assert not two.acquire(f"f{i % 4}.py", "bob", timeout_seconds=0.01)
        assert one.release(f"f{i % 4}.py", "alice")
    # A denial the guard could not pin on a file counts for its agent only.
    one.journal_write(JournalRecord(time.time(), "denied", "app", "bob", "", "s", 1, "h",
                                    guard="shell", reason="writes somewhere unknown"))  # fmt: skip
    summed = journal.stats()
    counted = journal.stats(JournalQuery.of(namespaces=["app"]))
    assert summed.files == counted.files
    assert summed.agents == counted.agents
    assert summed.files["f0.py"].holds == 8
    assert summed.files["f0.py"].timeouts == 8
    assert summed.agents["bob"].denied == 1
    assert "" not in summed.files
    assert summed.records == counted.records == 30 * 4 + 1  # grant, wait-begin, wait-end, release


def test_a_follower_is_pushed_each_record(stores: list[PgLockStore], journal: PgJournal) -> None:
    one, _ = stores
    assert one.try_lock("a.py", "alice")
    got: list[tuple[str, str]] = []
    stop = threading.Event()
    started = threading.Event()

    def follow() -> None:
        for record in journal.follow(JournalQuery.of(files=["a.py"]), backlog=1, stop=stop):
            got.append((record.kind, record.agent))
            started.set()

    thread = threading.Thread(target=follow)
    thread.start()
    try:
        wait_until(started.is_set)
        assert one.release("a.py", "alice")
        assert one.try_lock("b.py", "alice")
        assert one.try_lock("a.py", "bob")
        wait_until(lambda: len(got) >= 3)
    finally:
        stop.set()
        thread.join()
    assert got == [("grant", "alice"), ("release", "alice"), ("grant", "bob")]


@pytest.mark.anyio
async def test_an_async_follower_is_pushed_each_record(
    stores: list[PgLockStore], journal: PgJournal
) -> None:
    one, _ = stores
    assert one.try_lock("e.py", "erin")
    seen: list[str] = []
    with anyio.fail_after(60):
        async for record in journal.follow_async(JournalQuery.of(agents=["erin"]), backlog=1):
            seen.append(record.kind)
            if len(seen) == 2:
                break
            await anyio.to_thread.run_sync(one.release, "e.py", "erin")
    assert seen == ["grant", "release"]


def test_the_journal_switched_off_costs_no_record(
    repo: Path, pg_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKYARD_JOURNAL", "off")
    with PgLockStore(repo, pg_backend, namespace="app") as store:
        assert store.try_lock("a.py", "alice")
        assert store.release("a.py", "alice")
        reader = open_journal(store)
        try:
            assert list(reader.records()) == []
        finally:
            reader.close()


# The characters that mean something to a glob, to a regular expression or to PostgreSQL's
# bracket expressions ('[:', '[.', '[=', a leading '^'), and a non-ASCII one.
_GLOB_CHARS = "ab/*?[]!-^\\.:=(+é"


@settings(max_examples=60, deadline=None)
@given(
    globs=st.lists(st.text(_GLOB_CHARS, min_size=1, max_size=7), min_size=1, max_size=8),
    names=st.lists(st.text(_GLOB_CHARS.replace("*", ""), max_size=6), min_size=1, max_size=8),
)
def test_globs_mean_the_same_on_the_server(
    pg_server: PgServer, globs: list[str], names: list[str]
) -> None:
    checked = []
    for glob in globs:
        try:
            checked.append(FileGlob.parse(glob))
        except BadGlobError:
            continue
    with psycopg.connect(pg_server.dsn) as conn:
        for glob in checked:
            rows = conn.execute(
                "SELECT n, n ~ %s FROM unnest(%s::text[]) AS n", (f"^(?:{glob.regex})$", names)
            ).fetchall()
            here = glob.compiled()
            assert dict(rows) == {n: here.fullmatch(n) is not None for n in names}


def test_the_last_records_of_a_limit_beyond_any_number_are_all_of_them(
    stores: list[PgLockStore], journal: PgJournal
) -> None:
    one, _ = stores
    assert one.try_lock("a.py", "alice")
    assert one.release("a.py", "alice")
    assert [r.kind for r in journal.latest(JournalQuery.of(), 10**20)] == ["grant", "release"]


def test_a_journal_that_cannot_be_written_never_fails_a_grant(
    stores: list[PgLockStore], journal: PgJournal, pg_server: PgServer, pg_schema: str
) -> None:
    one, _ = stores
    assert one.try_lock("warm.py", "alice")
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(
            f'ALTER TABLE "{pg_schema}".journal ADD CONSTRAINT refuse_all CHECK (false) NOT VALID'
        )
    assert one.try_lock("a.py", "bob")
    assert one.release("a.py", "bob")
    assert one.holder("a.py") is None
    assert kinds(journal, agents=["bob"]) == []


def summed_blocks(pg_server: PgServer, schema: str) -> list[int]:
    with psycopg.connect(pg_server.dsn) as conn:
        rows = conn.execute(
            f'SELECT block FROM "{schema}".journal_blocks WHERE summed ORDER BY block'
        ).fetchall()
    return [row[0] for row in rows]


def test_stats_over_kept_block_sums_match_stats_from_the_records(
    stores: list[PgLockStore], journal: PgJournal, pg_server: PgServer, pg_schema: str
) -> None:
    one, two = stores
    one.connect()
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:  # ids near a block's end
        admin.execute(
            f'ALTER TABLE "{pg_schema}".journal ALTER COLUMN id RESTART WITH {2 * SUM_BLOCK - 40}'
        )
    for i in range(30):
        assert one.try_lock(f"f{i % 4}.py", "alice")
        assert not two.acquire(f"f{i % 4}.py", "bob", timeout_seconds=0.01)
        assert one.release(f"f{i % 4}.py", "alice")
        if i == 5:
            one.journal_write(deadlock_record(
                time=time.time(), namespace="app", session="m", pid=1, host="h",
                cycle=[CycleStep("alice", "f1.py", "bob"), CycleStep("bob", "f2.py", "alice")],
                victim="bob", victim_waits_on="f2.py", released=["f2.py"], costs={"bob": 2.0},
            ))  # fmt: skip
    # The writers named block 1 finished; the first stats sums it, once nothing can write in it.
    wait_until(lambda: journal.stats().records > 0 and summed_blocks(pg_server, pg_schema) == [1])
    records = list(journal.records())
    middle = records[len(records) // 2].time  # a window that cuts the summed block
    for window in ({}, {"since": middle}, {"until": middle}, {"since": records[0].time}):
        summed = journal.stats(JournalQuery.of(**window))  # type: ignore[arg-type]
        counted = journal.stats(JournalQuery.of(namespaces=["app"], **window))  # type: ignore[arg-type]
        assert (summed.records, summed.kinds) == (counted.records, counted.kinds)
        assert summed.files == counted.files
        assert summed.agents == counted.agents
        assert [r.time for r in summed.deadlocks] == [r.time for r in counted.deadlocks]
    assert journal.stats().records == 30 * 4 + 1


def test_pruning_drops_the_sums_of_the_records_it_drops(
    stores: list[PgLockStore], journal: PgJournal, pg_server: PgServer, pg_schema: str
) -> None:
    one, _ = stores
    one.connect()
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(
            f'ALTER TABLE "{pg_schema}".journal ALTER COLUMN id RESTART WITH {SUM_BLOCK - 4}'
        )
    for _ in range(4):
        assert one.try_lock("a.py", "alice")
        assert one.release("a.py", "alice")
    wait_until(lambda: journal.stats().records > 0 and summed_blocks(pg_server, pg_schema) == [0])
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:  # a retention of 0 s, later
        admin.execute(
            f'SELECT "{pg_schema}".journal_housekeeping(1, %s)', (time.time() + 1209600 + 60,)
        )
    assert summed_blocks(pg_server, pg_schema) == []
    assert journal.stats().records == 0


def test_the_retention_setting_bounds_the_journal(
    repo: Path, pg_backend: str, pg_server: PgServer, pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv(RETENTION_ENV, "90m")
    with PgLockStore(repo, pg_backend, namespace="app") as store:
        store.connect()
        for agent, age in (("old", 2 * 3600), ("recent", 3600)):
            store.journal_write(JournalRecord(time.time() - age, "denied", "app", agent, "a.py",
                                              "s", 1, "h", guard="write", reason="x"))  # fmt: skip
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            admin.execute(
                f'ALTER TABLE "{pg_schema}".journal ALTER COLUMN id RESTART WITH {PRUNE_EVERY}'
            )
        assert store.try_lock("a.py", "alice")  # record PRUNE_EVERY: the housekeeping step
        reader = open_journal(store)
        try:
            assert [r.agent for r in reader.records()] == ["recent", "alice"]
        finally:
            reader.close()


@pytest.mark.parametrize(
    ("setting", "seconds"), [("", 14 * 86400), ("36h", 129600), (" 90m ", 5400), ("1.5d", 129600)]
)
def test_the_retention_reads_a_duration(setting: str, seconds: int) -> None:
    assert retention_from_env({RETENTION_ENV: setting}) == seconds


@pytest.mark.parametrize("setting", ["forever", "0d", "-1h", "10 weeks"])
def test_a_retention_that_is_no_duration_says_how_to_write_one(setting: str) -> None:
    with pytest.raises(RetentionSettingError, match="write it as 14d, 36h, 90m or 600s"):
        retention_from_env({RETENTION_ENV: setting})


def test_the_writers_sum_a_finished_block_without_a_reader(
    stores: list[PgLockStore], pg_server: PgServer, pg_schema: str
) -> None:
    one, _ = stores
    one.connect()
    sequence = f'"{pg_schema}".journal ALTER COLUMN id RESTART WITH'

    def cycles(first_id: int) -> None:
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            admin.execute(f"ALTER TABLE {sequence} {first_id}")
        for _ in range(2):
            assert one.try_lock("a.py", "alice")
            assert one.release("a.py", "alice")

    # A transaction that began before the writer of id 2B names block 1 might still write
    # into it: the block waits.
    with psycopg.connect(pg_server.dsn) as older:
        older.execute("SELECT pg_current_xact_id()")
        cycles(2 * SUM_BLOCK - 2)
        assert summed_blocks(pg_server, pg_schema) == []
    cycles(2 * SUM_BLOCK + PRUNE_EVERY - 1)  # the next housekeeping step sums it
    assert summed_blocks(pg_server, pg_schema) == [1]
    cycles(3 * SUM_BLOCK - 2)  # nothing else runs: the writer of 3B sums block 2 at once
    assert summed_blocks(pg_server, pg_schema) == [1, 2]


def test_a_time_window_reads_the_records_a_full_scan_finds(
    stores: list[PgLockStore], journal: PgJournal, pg_server: PgServer, pg_schema: str
) -> None:
    stores[0].connect()
    table = f'"{pg_schema}".journal'
    # Three blocks of records a minute apart, block 1 holding one record far older than the
    # rest (a stepped-back clock): its span of times, not its place, says what it may hold.
    times = {0: [100.0, 160.0], 1: [220.0, 10.0, 280.0], 2: [340.0, 400.0], 3: [460.0]}
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        for block, stamps in times.items():
            admin.execute(
                f"ALTER TABLE {table} ALTER COLUMN id RESTART WITH {max(1, block * SUM_BLOCK)}"
            )
            for n, t in enumerate(stamps):
                record = JournalRecord(t, "grant", "app", f"agent-{n}", "a.py", "1", 1, "h")
                admin.execute(insert_statement(pg_schema), insert_params(record))
    journal.stats()  # names blocks 0-2
    journal.stats()  # sums them
    assert summed_blocks(pg_server, pg_schema) == [0, 1, 2]
    # Blocks 0 and 1 end before 300: a window from there reads block 2 on, not every id.
    assert journal._window_ranges(JournalQuery.of(since=300.0)) == [(2 * SUM_BLOCK, 2**63 - 1)]
    everything = list(journal.records())
    for since, until in [(150.0, 300.0), (None, 50.0), (300.0, None), (5.0, 15.0), (500.0, None)]:
        expected = [
            r.time for r in everything
            if (since is None or r.time >= since) and (until is None or r.time < until)
        ]  # fmt: skip
        window = JournalQuery.of(since=since, until=until)
        assert [r.time for r in journal.records(window)] == expected
        assert [r.time for r in journal.latest(window, 2)] == expected[-2:]
        assert [r.time for r in journal.latest(window, 100)] == expected
