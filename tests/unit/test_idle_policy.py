"""The idle limit's decision: which holders lose their locks (pure logic, no lock store)."""

from __future__ import annotations

from lockyard.infra.crossproc.idle_policy import duration_text, find_stalls
from lockyard.infra.crossproc.state import Hold, Wait, WaitForSnapshot

NOW = 100_000.0
LIMIT = 600.0


def snapshot(
    holds: dict[str, tuple[str, float]], waits: list[tuple[str, str, float]]
) -> WaitForSnapshot:
    """`holds`: lock -> (holder, granted at); `waits`: (agent, lock, since)."""
    return WaitForSnapshot(
        holds={lock: Hold(lock, agent, at) for lock, (agent, at) in holds.items()},
        waits=tuple(Wait(agent, lock, f"t-{agent}-{lock}", since) for agent, lock, since in waits),
    )


def stamps(**ago: float) -> dict[str, float]:
    return {agent: NOW - seconds for agent, seconds in ago.items()}


def test_a_holder_idle_past_the_limit_while_another_waits_is_the_one_revoked() -> None:
    state = snapshot(
        {"ns::a.py": ("stuck", NOW - 5000), "ns::b.py": ("busy", NOW - 5000)},
        [("carol", "ns::a.py", NOW - 30), ("dave", "ns::b.py", NOW - 30)],
    )
    active = stamps(stuck=720, busy=5)
    [stall] = find_stalls(state, active.get, LIMIT, NOW)
    assert (stall.agent_id, stall.waited_for, stall.waiters) == ("stuck", ("ns::a.py",), ("carol",))
    assert stall.reason(LIMIT, "the lock directory's") == (
        "idle 12m past the lock directory's limit of 10m while carol waited"
    )


def test_a_holder_nobody_waits_for_keeps_its_locks_however_idle() -> None:
    state = snapshot({"ns::a.py": ("stuck", NOW - 90_000)}, [])
    assert find_stalls(state, stamps(stuck=90_000).get, LIMIT, NOW) == []


def test_a_holder_that_never_stamped_counts_from_its_newest_grant() -> None:
    state = snapshot(
        {
            "ns::old.py": ("quiet", NOW - 5000),
            "ns::new.py": ("quiet", NOW - 60),
            "ns::c.py": ("gone-quiet", NOW - 5000),
        },
        [("carol", "ns::old.py", NOW - 10), ("carol", "ns::c.py", NOW - 10)],
    )
    asked: list[str] = []

    def never_stamped(agent: str) -> float | None:
        asked.append(agent)
        return None

    [stall] = find_stalls(state, never_stamped, LIMIT, NOW)
    assert stall.agent_id == "gone-quiet"  # quiet took a lock a minute ago: not idle
    assert sorted(asked) == ["gone-quiet", "quiet"]  # only holders someone waits for


def test_a_holder_that_waits_itself_is_blocked_not_stalled() -> None:
    state = snapshot(
        {"ns::a.py": ("middle", NOW - 5000), "ns::b.py": ("stuck", NOW - 5000)},
        [("carol", "ns::a.py", NOW - 10), ("middle", "ns::b.py", NOW - 4000)],
    )
    active = stamps(middle=4000, stuck=4000)
    assert [stall.agent_id for stall in find_stalls(state, active.get, LIMIT, NOW)] == ["stuck"]


def test_waiters_are_named_in_arrival_order_and_only_among_the_agents_asked_about() -> None:
    state = snapshot(
        {"ns::a.py": ("stuck", NOW - 5000), "ns::b.py": ("stuck", NOW - 5000),
         "ns::c.py": ("other", NOW - 5000)},
        [("erin", "ns::b.py", NOW - 5), ("dave", "ns::a.py", NOW - 50),
         ("carol", "ns::b.py", NOW - 20), ("frank", "ns::c.py", NOW - 5)],
    )  # fmt: skip
    active = stamps(stuck=3600, other=3600)
    [stall] = find_stalls(state, active.get, LIMIT, NOW, among={"stuck"})
    assert stall.waiters == ("dave", "carol", "erin")
    assert stall.waited_for == ("ns::a.py", "ns::b.py")
    assert stall.reason(LIMIT, "its coordinator's").endswith(
        "limit of 10m while dave, carol, erin waited"
    )


def test_a_holder_just_under_the_limit_is_left_alone() -> None:
    state = snapshot({"ns::a.py": ("slow", NOW - 5000)}, [("carol", "ns::a.py", NOW - 10)])
    assert find_stalls(state, stamps(slow=LIMIT - 1).get, LIMIT, NOW) == []


def test_durations_read_as_people_write_them() -> None:
    assert [duration_text(s) for s in (45, 600, 750, 3600, 3900)] == [
        "45s", "10m", "12m30s", "1h", "1h05m",
    ]  # fmt: skip
