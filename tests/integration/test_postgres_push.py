"""Hand-offs on PostgreSQL come by push alone: with the liveness re-check pushed far out of
reach, every queued waiter is still served, in arrival order, whatever the interleaving of
queueing, releasing and trying."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg

from lockyard.infra.lockstore.postgres import PgLockStore, graph_channel
from pg_support import PgServer
from polling_support import wait_until

NO_RECHECK = 3600.0
"""A liveness interval no test outlives: a waiter that needed a re-check would time out."""


def test_waiters_queueing_at_once_are_each_handed_the_lock_by_push_in_order(
    repo: Path, pg_backend: str
) -> None:
    agents = [f"agent-{n}" for n in range(6)]
    stores = [PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK) for _ in agents]
    holder = PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK)
    served: list[str] = []
    failures: list[str] = []
    start = threading.Barrier(len(agents) + 1)

    def wait(store: PgLockStore, agent: str) -> None:
        start.wait()
        if store.acquire("a.py", agent, timeout_seconds=60):
            served.append(agent)
            store.release("a.py", agent)
        else:
            failures.append(agent)

    try:
        assert holder.try_lock("a.py", "holder")
        threads = [
            threading.Thread(target=wait, args=(store, agent))
            for store, agent in zip(stores, agents, strict=True)
        ]
        for thread in threads:
            thread.start()
        start.wait()
        queued: list[str] = []
        while len(queued) < len(agents):
            queued = [waiter.agent_id for waiter in holder.waiters("a.py")]
        assert holder.release("a.py", "holder")
        for thread in threads:
            thread.join(120)
        assert failures == []
        assert served == queued, "served in the order they queued"
        assert holder.holder_record("a.py") is None
    finally:
        for store in (holder, *stores):
            store.close()


def test_a_try_between_release_and_grant_never_jumps_the_queue(repo: Path, pg_backend: str) -> None:
    with (
        PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK) as holder,
        PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK) as waiter,
        PgLockStore(repo, pg_backend) as bystander,
    ):
        for round_ in range(20):
            assert holder.try_lock("b.py", "holder")
            granted: list[bool] = []

            def wait(into: list[bool]) -> None:
                into.append(waiter.acquire("b.py", "waiter", 60))

            waiting = threading.Thread(target=wait, args=(granted,))
            waiting.start()
            while not holder.waiters("b.py"):
                pass
            trying = threading.Thread(target=lambda: bystander.try_lock("b.py", "bystander"))
            trying.start()
            holder.release("b.py", "holder")
            trying.join(60)
            waiting.join(60)
            assert granted == [True], f"round {round_}"
            record = holder.holder_record("b.py")
            assert record is not None
            assert record.agent_id == "waiter", f"round {round_}: the queue's head holds it"
            waiter.release("b.py", "waiter")


def test_a_late_wake_up_of_a_reused_waker_neither_ends_the_next_wait_nor_loses_its_push(
    repo: Path, pg_backend: str
) -> None:
    """Waits hand their waker on to the next wait of the store; a wake-up meant for the wait
    that ended (a push read after it returned) reaches the next one, which looks, finds no
    grant, and keeps waiting for its own push."""
    with (
        PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK) as holder,
        PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK) as waiter,
    ):
        assert holder.try_lock("a.py", "alice")
        assert not waiter.acquire("a.py", "bob", timeout_seconds=0.05), "timed out"
        (spare,) = waiter._spare_wakers
        spare.wake()  # late, for the wait that ended
        granted: list[bool] = []
        waiting = threading.Thread(
            target=lambda: granted.append(waiter.acquire("a.py", "bob", timeout_seconds=60))
        )
        waiting.start()
        wait_until(lambda: bool(holder.waiters("a.py")), "bob queued for a.py")
        assert not granted, "the stale wake-up did not end the wait"
        assert holder.release("a.py", "alice")
        waiting.join(60)
        assert granted == [True], "handed over by push"
        assert waiter._spare_wakers == [spare], "the same waker, back for the next wait"


def test_a_hand_off_tells_the_monitor_that_the_other_waiters_now_wait_on_the_new_holder(
    repo: Path, pg_server: PgServer, pg_backend: str
) -> None:
    """The graph channel hears of every hand-off: a cycle can close when a lock changes hands
    (its other waiters now wait on an agent that may itself wait on them)."""
    with (
        PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK) as holder,
        PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK) as bob,
        PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK) as carol,
        psycopg.connect(pg_server.dsn, autocommit=True) as monitor,
    ):
        monitor.execute(f'LISTEN "{graph_channel(holder.schema)}"')
        assert holder.try_lock("a.py", "alice")
        granted: dict[str, bool] = {}
        waits = [
            threading.Thread(
                target=lambda s=store, a=agent: granted.__setitem__(
                    a, s.acquire("a.py", a, timeout_seconds=60)
                )
            )
            for store, agent in ((bob, "bob"), (carol, "carol"))
        ]
        waits[0].start()
        wait_until(lambda: len(holder.waiters("a.py")) == 1, "bob queued")
        waits[1].start()
        wait_until(lambda: len(holder.waiters("a.py")) == 2, "carol queued behind bob")
        heard_of_queueing = list(monitor.notifies(timeout=5, stop_after=2))
        assert len(heard_of_queueing) == 2, "each wait that began was told"
        assert list(monitor.notifies(timeout=0.2)) == [], "nothing else to tell"

        assert holder.release("a.py", "alice")
        waits[0].join(60)
        assert granted == {"bob": True}
        assert len(list(monitor.notifies(timeout=5, stop_after=1))) == 1, "the hand-off"

        assert bob.release("a.py", "bob")
        waits[1].join(60)
        assert granted == {"bob": True, "carol": True}
        assert len(list(monitor.notifies(timeout=5, stop_after=1))) == 1, "the last hand-off"


def test_readers_and_the_writer_between_them_are_each_granted_by_push(
    repo: Path, pg_backend: str
) -> None:
    """A writer waiting for two readers is granted by the last one's release; the readers
    queued behind it (FIFO: it stopped them) are all granted by its release."""
    stores = {
        agent: PgLockStore(repo, pg_backend, liveness_interval=NO_RECHECK)
        for agent in ("r1", "r2", "writer", "r3", "r4")
    }
    granted: dict[str, threading.Event] = {agent: threading.Event() for agent in stores}

    def wait(agent: str, mode: str) -> None:
        if stores[agent].acquire("a.py", agent, 60, mode=mode):  # type: ignore[arg-type]
            granted[agent].set()

    try:
        look = stores["r1"]
        for agent in ("r1", "r2"):
            assert stores[agent].try_lock("a.py", agent, mode="shared")
        threads = [threading.Thread(target=wait, args=("writer", "exclusive"))]
        threads[0].start()
        wait_until(lambda: look.holder("a.py") == "writer")  # it holds the lock, waiting
        for agent in ("r3", "r4"):
            threads.append(threading.Thread(target=wait, args=(agent, "shared")))
            threads[-1].start()
            wait_until(lambda: agent in [w.agent_id for w in look.waiters("a.py")])  # noqa: B023
        assert not look.try_lock("a.py", "r5", mode="shared"), "the writer stops new readers"
        assert stores["r1"].release("a.py", "r1")
        assert not granted["writer"].is_set()
        assert look.readers("a.py") == ("r2",)
        assert stores["r2"].release("a.py", "r2")
        assert granted["writer"].wait(60), "the last reader's release pushed the grant"
        assert look.readers("a.py") == ()
        assert stores["writer"].release("a.py", "writer")
        assert granted["r3"].wait(60), "both readers, by push"
        assert granted["r4"].wait(60)
        assert sorted(look.readers("a.py")) == ["r3", "r4"]
        assert look.holder("a.py") is None
        assert look.waiters("a.py") == []
        for thread in threads:
            thread.join(60)
        for agent in ("r3", "r4"):
            assert stores[agent].release("a.py", agent)
        assert look.list_locks() == []
    finally:
        for store in stores.values():
            store.close()
