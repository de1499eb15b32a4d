"""benchmarks/bench_peers.py keeps working: each section's measurement runs with tiny sizes on
a real lock directory with real processes. No timing is asserted, only what must hold
whatever the machine's load (a grant follows its release, counters match the grants)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    # Children are forked from a server that imports the script by name: it must be on the
    # path before that server starts.
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_peers

        yield bench_peers
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture
def place(bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    place = bench.Place(str(tmp_path)).prepare()
    # The contract API's locks find their directory through LOCKYARD_LOCK_DIR, which the
    # script sets; restored after the test so that no later test of this worker inherits it.
    monkeypatch.setenv("LOCKYARD_LOCK_DIR", place.locks)
    return place


def test_uncontended_cycle_of_every_lock_kind_is_measured(bench: ModuleType, place: object) -> None:
    for figures in bench.uncontended(place, 2, 3):  # wall-clock, then CPU time
        assert set(figures) == set(bench.UNCONTENDED_KINDS)
        assert all(value > 0 for value in figures.values())
        rows = bench.uncontended_rows("tmpfs /x", figures, "CPU time")
        assert all(bench.verdict(row.met) in ("MET", "MISSED") for row in rows if row.target)


@pytest.mark.parametrize("kind", ["flock", "lockyard sync", "contract async", "fasteners"])
def test_cross_process_handoff_grants_only_after_the_release(
    bench: ModuleType, place: object, kind: str
) -> None:
    latencies = bench.handoff_cross_process(place, kind, 3)
    assert len(latencies) == 3
    assert all(latency >= 0 for latency in latencies)


def test_in_process_handoff_is_measured_beside_an_event(bench: ModuleType, place: object) -> None:
    lockyard, event = bench.handoff_in_process(place, 3)
    assert len(lockyard) == len(event) == 3
    assert all(latency >= 0 for latency in lockyard + event)


def test_queues_drain_in_one_process_and_across_processes(bench: ModuleType, place: object) -> None:
    assert bench.drain_in_process(place, 3, 120) is not None
    assert bench.drain_processes(place, 4, 2, 120) is not None


def test_agents_waiting_on_many_files_are_all_granted(bench: ModuleType, place: object) -> None:
    result = bench.many_files(place, 4, 5, 0.1, 120)
    assert result.enqueue_seconds is not None
    assert result.quiet_cpu_fraction is not None
    assert result.drain_seconds is not None


@pytest.mark.parametrize("kind", ["lockyard", "filelock"])
def test_throughput_counters_equal_the_grants(bench: ModuleType, place: object, kind: str) -> None:
    figure = bench.throughput(place, kind, 2, 2, 0.3)
    assert figure.granted > 0
    assert figure.counted == figure.granted
    assert len(figure.per_process) == 2
