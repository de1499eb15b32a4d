"""Run the explorer of the line (tests/unit/line_explorer.py) on more agents and locks than
the test suite does, and print how many states it visited.

    python3 scripts/uv run scripts/explore_line.py [--locks 1|2] [--deaths 1] [--ticks 1]
        [--timeouts 1] [--backstops all|lost|none] [--no-symmetry] [--agents 3]
        [--again] [--plant FUNCTION:N | --plants] [--depth N] [--order breadth|depth]
        [--unfused] [--fingerprints]

Three agents: on one lock each takes and releases it; on two locks, the first takes L then
M, the second M then L (each may time out, so no wait lasts for ever), the third L. Every
interleaving of their operations is run, with the given number of deaths, turns' lengths of
time and timed-out waits; it stops at the first broken invariant and prints the steps that
led there. Identical agents (the three on one lock) are interchangeable: a state and the same
state with those agents' names exchanged are explored once (--no-symmetry: each of them).
--agents 2 runs two of them; --again makes the first agent come back for a second round (as
a newcomer). --plant drop:2 swaps statements 2 and 3 of `line.drop` (statement 0 is the
docstring) before exploring, to show that the explorer finds that bug; it prints the states
visited until the first broken invariant, or "MISSED". --depth N explores only the states at
most N moves from the start (every interleaving of the first N moves; the suite's three-agent
tests are bounded so). --order depth explores the newest state first: the same states, fewer
of them kept waiting, and the end of an agent's script (where a planted bug that leaves
something behind shows) reached within a few moves. --unfused makes each of the explorer's
own marks a move of its own; --plants plants every swap of two statements of a recipe in
turn and explores with and without them, one line each, and says whether the verdicts agree.
--fingerprints remembers each state by a 64-bit hash of its key (as TLC does), for runs
whose keys do not fit in memory, and prints the chance that two states shared one.
A line every 100,000 states says how far it got (breadth first: within how many moves every
interleaving is checked so far); stopped (Ctrl-C, SIGTERM), it prints the same and exits 2.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from line_explorer import BrokenInvariantError, Explorer, Locks, locks
from planted_bug import every_swap, swapped

from lockyard.infra.lockstore.lockdir import line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locks", type=int, choices=(1, 2), default=1)
    parser.add_argument("--deaths", type=int, default=1)
    parser.add_argument("--ticks", type=int, default=1)
    parser.add_argument("--timeouts", type=int, default=1)
    parser.add_argument("--backstops", choices=("all", "lost", "none"), default="lost")
    parser.add_argument("--no-symmetry", action="store_true")
    parser.add_argument("--agents", type=int, choices=(2, 3), default=3)
    parser.add_argument("--again", action="store_true")
    parser.add_argument("--plant", metavar="FUNCTION:N")
    parser.add_argument("--depth", type=int, metavar="N")
    parser.add_argument("--plants", action="store_true")
    parser.add_argument("--order", choices=("breadth", "depth"), default="breadth")
    parser.add_argument("--unfused", action="store_true")
    parser.add_argument("--fingerprints", action="store_true")
    args = parser.parse_args()
    rounds = 2 if args.again else 1
    scripts = (
        (locks("L", rounds=rounds), locks("L"), locks("L"))
        if args.locks == 1
        else (locks("L", "M", rounds=rounds), locks("M", "L"), locks("L"))
    )[: args.agents]
    if args.order == "depth" and args.depth is not None:
        parser.error("--depth bounds a breadth-first search: leave out --order depth")
    if args.plants:
        return compare_plants(scripts, args)
    if args.plant:
        function, _, first = args.plant.partition(":")
        if not hasattr(line, function) or not first.isdigit():
            parser.error(f"--plant wants a recipe of line.py and a statement: not {args.plant!r}")
        setattr(line, function, swapped(function, int(first)))
    explorer = Explorer(
        scripts,
        deaths=args.deaths,
        ticks=args.ticks,
        timeouts=args.timeouts,
        backstops=args.backstops,
        symmetry=not args.no_symmetry,
        depth=args.depth,
        fused=not args.unfused,
        order=args.order,
        fingerprints=args.fingerprints,
        progress=lambda explorer: print(
            f"  {explorer.states:,} states, {time.process_time() - started:.0f} s CPU"
            + _bound(explorer),
            file=sys.stderr,
            flush=True,
        ),
    )
    what = (
        f"{args.agents} agents{' (one comes back)' if args.again else ''}, {args.locks} lock(s), "
        f"{args.deaths} death(s), {args.ticks} tick(s), {args.timeouts} timeout(s)"
        f"{f', {args.plant} planted' if args.plant else ''}"
        f"{f', depth {args.depth}' if args.depth is not None else ''}"
    )
    started = time.process_time()
    # Stopped (Ctrl-C, `kill`): say how far it got, and breadth first, what is checked.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        states = explorer.run()
    except KeyboardInterrupt:
        cpu = time.process_time() - started
        print(
            f"{what}: STOPPED after {explorer.states:,} states ({cpu:.1f} s CPU){_bound(explorer)}"
        )
        return 2
    except BrokenInvariantError as broken:
        cpu = time.process_time() - started
        print(f"{what}: BROKEN after {explorer.states} states ({cpu:.1f} s CPU):\n{broken}")
        return 1
    print(
        f"{what}: {states} states ({explorer.unexpanded} at the depth bound), "
        f"{explorer.transitions} transitions, "
        f"{'MISSED, ' if args.plant else ''}no invariant broken "
        f"({time.process_time() - started:.1f} s CPU)"
        + (
            f", chance of a fingerprint collision {explorer.collision_chance():.0e}"
            if args.fingerprints
            else ""
        )
    )
    return 1 if args.plant else 0


def _bound(explorer: Explorer) -> str:
    """Breadth first: the moves from the start within which every interleaving is checked."""
    if explorer.order != "breadth" or explorer.deepest < 2:
        return ""
    return f", every interleaving of up to {explorer.deepest - 1} moves checked"


def compare_plants(scripts: tuple[Locks, ...], args: argparse.Namespace) -> int:
    """Plant each bug of `every_swap` in turn and explore with the marks fused and not: one
    line each, the verdicts side by side; 1 when any two differ."""
    differ = 0
    for function, first in every_swap():
        original = getattr(line, function)
        setattr(line, function, swapped(function, first))
        verdicts = []
        for fused in (True, False):
            explorer = Explorer(
                scripts,
                deaths=args.deaths,
                ticks=args.ticks,
                timeouts=args.timeouts,
                backstops=args.backstops,
                symmetry=not args.no_symmetry,
                fused=fused,
            )
            try:
                explorer.run()
                verdicts.append(("passes", explorer.states))
            except BrokenInvariantError as broken:
                verdicts.append((str(broken).splitlines()[0], explorer.states))
            except Exception as error:  # a swap that breaks the recipe itself
                verdicts.append((f"raises {type(error).__name__}", explorer.states))
        setattr(line, function, original)
        (fused_verdict, fused_states), (unfused_verdict, unfused_states) = verdicts
        same = fused_verdict == unfused_verdict
        differ += not same
        print(
            f"{function}:{first}: {'same' if same else 'DIFFERENT'}, fused {fused_states} "
            f"states, unfused {unfused_states}: {fused_verdict}"
            + ("" if same else f" / unfused: {unfused_verdict}"),
            flush=True,
        )
    print(f"{len(every_swap())} plants, {differ} verdicts differ")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
