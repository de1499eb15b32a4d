"""Every interleaving, checked, not sampled: the line's own recipes (`lockdir/line.py`) run on
a lock directory in memory one operation at a time, with a death at any step, a timed-out
wait, backstop re-checks and a stalled first waiter passed over (line_explorer.py says what
is checked in each state). Each test prints how many states it visited. A bug planted in a
decision (two of its statements swapped) is found, by two agents and by three.

The suite explores every interleaving of two agents to the end (identical agents explored
once: symmetry reduction), and of three agents, on one lock and on two, their first moves
only; `scripts/explore_line.py` runs the same explorer on three agents to the end (minutes:
docs/lock-store.md has the figures)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from line_explorer import BrokenInvariantError, Explorer, Places, State, locks
from planted_bug import FOUND_AT_TWO_AGENTS, swapped

from lockyard.infra.lockstore.lockdir import line


def explore(explorer: Explorer, what: str) -> int:
    started = time.perf_counter()
    states = explorer.run()
    print(
        f"{what}: {states} states, {explorer.transitions} transitions "
        f"({time.perf_counter() - started:.1f} s)"
    )
    return states


def test_two_agents_on_one_lock_with_a_death_a_timeout_and_a_stalled_turn() -> None:
    explorer = Explorer((locks("L"), locks("L")), deaths=1, ticks=1, timeouts=1)
    assert explore(explorer, "two agents, one lock") > 6_000


def test_three_agents_on_one_lock_and_on_two_every_interleaving_of_their_first_moves() -> None:
    # Every interleaving of three agents does not fit the suite (scripts/explore_line.py runs
    # it; docs/lock-store.md has its cost): here every interleaving of the first moves, with a
    # death, a timeout and a stalled turn among them, each state checked.
    one = Explorer((locks("L"), locks("L"), locks("L")), deaths=1, ticks=1, timeouts=1, depth=17)
    assert explore(one, "three agents, one lock, first 17 moves") > 4_000
    two = Explorer(
        (locks("L", "M"), locks("M", "L"), locks("L")), deaths=1, ticks=1, timeouts=1, depth=12
    )
    assert explore(two, "three agents, two locks, first 12 moves") > 3_000


@pytest.mark.parametrize("plant", FOUND_AT_TWO_AGENTS)
def test_a_planted_bug_is_found_by_the_fused_search_as_by_the_unfused_one(
    plant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two statements of a decision swapped (e.g. `_withdraw`'s: a waiter that leaves never
    # takes back the grant it staged). The explorer's marks run in the same move as their
    # operations (`Explorer.fused`): the search must find what the move-per-mark one finds.
    function, _, first = plant.partition(":")
    monkeypatch.setattr(line, function, swapped(function, int(first)))
    found = []
    for fused in (False, True):
        with pytest.raises(BrokenInvariantError) as broken:
            Explorer((locks("L"), locks("L")), fused=fused).run()
        found.append(str(broken.value).splitlines()[0])
    print(f"{plant} planted, found: {found[1]}")
    assert found[0] == found[1]


@pytest.mark.parametrize(
    ("plant", "lock_count"),
    [*((plant, 1) for plant in FOUND_AT_TWO_AGENTS), ("release:1", 2), ("wait:1", 2)],
)
def test_a_planted_bug_is_found_among_three_agents_depth_first(
    plant: str, lock_count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three agents to the end do not fit the suite; depth first, the search reaches an end
    # of the agents' scripts within a few moves, where a bug that leaves something behind
    # shows (and each agent that is done is checked at once, not only when all are).
    function, _, first = plant.partition(":")
    monkeypatch.setattr(line, function, swapped(function, int(first)))
    scripts = (
        (locks("L"), locks("L"), locks("L"))
        if lock_count == 1
        else (locks("L", "M"), locks("M", "L"), locks("L"))
    )
    explorer = Explorer(scripts, order="depth")
    with pytest.raises(BrokenInvariantError) as broken:
        explorer.run()
    print(
        f"{plant} planted, {lock_count} lock(s): found after {explorer.states} states: "
        f"{str(broken.value).splitlines()[0]}"
    )


def test_a_waiter_whose_predecessor_dies_leaving_is_rung_when_the_lock_goes_free() -> None:
    # Found by this explorer (depth first, three agents, a death and a timeout: "c sleeps
    # first in line at L, whose turn has come", after 15,412 states), in line.py as it was
    # before this test: b, the head, times out, stamps c's turn and dies before its entry
    # goes; c took every entry ahead for gone and slept as the head, and a's release rang
    # the dead entry and freed the lock: nobody rang c. Replayed to b's death, then every
    # interleaving from there (the old line.py breaks after 25 states).
    start = ["tick", "a", "b", "c", "a", *["b", "c"] * 6, *["c"] * 7, "c subscribes"]
    start += [*["c"] * 5, *["b"] * 11, "b subscribes", *["b"] * 7, "b times out"]
    start += [*["b"] * 4, "b dies"]
    explorer = Explorer((locks("L"), locks("L"), locks("L")), order="depth", start=start)
    explore(explorer, "three agents, one lock, from the death of a head leaving")


def test_a_head_whose_look_spent_the_ring_takes_the_lock_its_release_empties() -> None:
    # Found by this explorer (three agents with every fault, one lock, depth first: "b
    # sleeps first in line at L, whose turn has come", after 1,048,538 states) in line.py
    # as it was before this test. Replayed here up to the release, then every interleaving
    # from there. b, the head, sleeps on a's holding L. a drops its grant, and b's look
    # reads the lock empty (30); c, a newcomer that found no queue before b queued,
    # publishes onto the empty lock (31); a rings b before handing over (34), and b's next
    # look spends that ring while c holds. c drops its grant and dies before ringing; b
    # reads the lock empty again and slept, following nobody's exit, while a renamed b's
    # grant onto the lock with no ring left to tell it. A head now sleeps only on another
    # live agent's grant: an empty lock it takes (or accepts) itself.
    start = ["tick", "a", "b", "c", "a", *["b"] * 17, "b subscribes", *["b"] * 5]
    start += ["a", "b", "c", "a", "a", "a"]  # a drops; b reads L empty; c takes it; a rings b
    explorer = Explorer(
        (locks("L"), locks("L"), locks("L")), timeouts=0, order="depth", start=start
    )
    explore(explorer, "three agents, one lock, from a release that c barges into")


def test_a_waiter_queued_long_ago_is_not_passed_over_as_its_grant_arrives() -> None:
    # Found by this explorer (three agents with every fault, one lock, depth first: "c
    # passed b over at L before its turn lasted a turn's length", after 1,869,219 states)
    # in line.py as it was before this test. b queues behind a's long hold (a tick passes),
    # so its stamp is old; c, judging b, reads that its turn is over (24, 32), then the lock:
    # a releases meanwhile, stamps b and hands it b's grant; c saw b's grant on the lock and
    # passed b over on the stamp read before. `_turn_expired` now reads the turn again after
    # the lock. Replayed to a's hand-over, then every interleaving from there.
    # Without the death (none is needed), each look at a process joins the move before it.
    start = ["a", "b", "c", "a", *["b", "c"] * 4, "b", "tick", *["c"] * 9, "c subscribes"]
    start += [*["c"] * 5, *["b"] * 9, "b subscribes", *["b"] * 5, "b times out", *["a"] * 6]
    explorer = Explorer((locks("L"), locks("L"), locks("L")), deaths=0, order="depth", start=start)
    explore(explorer, "three agents, one lock, from a hand-over to a waiter queued long ago")


def test_a_head_that_takes_the_lock_itself_is_not_passed_over_before_accepting() -> None:
    # Found by this explorer once the test above passed (same run, 1,869,252 states): a
    # drops its grant and dies before stamping b's turn; b, woken by a's exit, renames its
    # staged grant onto the empty lock; c sees b's grant there and b's stamp still the old
    # one of its queueing, and passes b over before b accepts. A head now stamps its own
    # turn before it takes the lock itself, as a release does before handing over.
    start = ["a", "b", "c", "a", *["b", "c"] * 5, "b", "tick", *["c"] * 10, "c subscribes"]
    start += [*["c"] * 6, *["b"] * 11, "b subscribes", *["b"] * 7, "a", "a dies"]
    start += ["b is woken", *["b"] * 4]
    explorer = Explorer((locks("L"), locks("L"), locks("L")), order="depth", start=start)
    explore(explorer, "three agents, one lock, from a release that died before stamping")


def test_a_start_that_cannot_be_made_says_which_moves_can() -> None:
    explorer = Explorer((locks("L"), locks("L")), start=["a", "b subscribes"])
    with pytest.raises(ValueError, match=r"move 2 of the start, 'b subscribes'.*'a dies'"):
        explorer.run()


def test_a_newcomer_that_drops_a_dead_first_entry_drops_only_that_one() -> None:
    # `reserved` (a newcomer) drops a dead first entry. Between its read and its drop the
    # queue may empty and a new waiter take that ticket again: four agents show it. a holds
    # L; b queues (ticket 1) and dies; a releases; c, a newcomer, reads b dead; d, a
    # newcomer too, drops b's entry (the queue is gone) and takes L; a comes back, finds d
    # holding and queues, at ticket 1 again; c's drop must not remove a's entry. A removal
    # by the ticket alone did ("c passed a over at L before its turn lasted a turn's
    # length"); it matches the wait's token now. The replay checks that; the 200 states
    # after it a little more (four agents to the end are many).
    start = ["a", "a", *["b"] * 7, "b dies", "a", *["c"] * 6, *["d"] * 10]
    start += [*["a"] * 8, "c", "c"]
    explorer = Explorer(
        (locks("L", rounds=2), locks("L"), locks("L"), locks("L")),
        ticks=0,
        timeouts=0,
        order="depth",
        start=start,
        limit=200,
    )
    explorer.run()


def test_fingerprints_visit_the_same_states_and_trace_a_broken_invariant_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The script's big runs keep a 64-bit hash per state and find a trace's moves again by
    # replaying: the same count, and the same steps to a planted bug, as with whole keys.
    agents = (locks("L"), locks("L"))
    quiet = {"deaths": 0, "ticks": 0, "timeouts": 0}
    counts = {Explorer(agents, **quiet, fingerprints=f).run() for f in (False, True)}
    assert len(counts) == 1
    monkeypatch.setattr(line, "_withdraw", swapped("_withdraw", 1))
    traces = []
    for fingerprints in (False, True):
        explorer = Explorer((*agents, locks("L")), order="depth", fingerprints=fingerprints)
        with pytest.raises(BrokenInvariantError) as broken:
            explorer.run()
        traces.append(str(broken.value))
    assert traces[0] == traces[1]
    assert "  3. " in traces[1]


def test_states_are_told_apart_by_whether_a_waiter_would_see_its_turn_stamp_changed() -> None:
    # A waiter learns it is first from a changed turn stamp (`line._in_line`); the explorer
    # keeps no stamp's value, so two states that differ only there must have two keys.
    # Checked here against each waiter's own generator, not the explorer's bookkeeping.
    class Checked(Explorer):
        stamp_seen: dict[Any, tuple[bool | None, ...]]

        def _key(self, state: State) -> tuple[Any, ...]:
            key = super()._key(state)
            seen = tuple(_sees_stamp_unchanged(self, n, state) for n in range(len(state.agents)))
            assert self.stamp_seen.setdefault(key, seen) == seen
            return key

    explorer = Checked((locks("L"), locks("L")), deaths=0, ticks=0, timeouts=1, symmetry=False)
    explorer.stamp_seen = {}
    _read_stamps.clear()
    explore(explorer, "two agents, stamps checked")
    assert {False, True} <= {flag for flags in explorer.stamp_seen.values() for flag in flags}


def _sees_stamp_unchanged(explorer: Explorer, n: int, state: State) -> bool | None:
    agent = state.agents[n]
    places = explorer._places[n]
    if agent.dead or places.op[agent.node] == ("done",):
        return None
    read = _read_stamps.get((id(places), agent.node), ())
    if read == ():
        read = _read_stamps[(id(places), agent.node)] = _stamp_in_locals(places, agent.node)
    if read is None:
        return None
    name, entry, created = read
    found = state.world.queues.get(name, {}).get(entry)
    return found is not None and found.stamp == created


_read_stamps: dict[tuple[int, int], Any] = {}


def _stamp_in_locals(places: Places, node: int) -> tuple[str, str, int | None] | None:
    """(lock, entry, stamp read) of the wait in the recipes' local variables at `node`."""
    outermost = places.generator_at(node)  # held: dropped, it would close the whole chain
    generator: Any = outermost
    while generator is not None and generator.gi_frame is not None:
        for value in generator.gi_frame.f_locals.values():
            if isinstance(value, line.Place) and value.entry:
                return value.name, value.entry, value.created
        generator = generator.gi_yieldfrom
    return None
