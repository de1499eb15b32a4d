"""Run the explorer of the line (tests/unit/line_explorer.py) on more agents and locks than
the test suite does, and print how many states it visited.

    python3 scripts/uv run scripts/explore_line.py [--locks 1|2] [--deaths 1] [--ticks 1]
        [--timeouts 1] [--backstops all|lost|none] [--no-symmetry]

Three agents: on one lock each takes and releases it; on two locks, the first takes L then
M, the second M then L (each may time out, so no wait lasts for ever), the third L. Every
interleaving of their operations is run, with the given number of deaths, turns' lengths of
time and timed-out waits; it stops at the first broken invariant and prints the steps that
led there. Identical agents (the three on one lock) are interchangeable: a state and the same
state with those agents' names exchanged are explored once (--no-symmetry: each of them).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from line_explorer import BrokenInvariantError, Explorer, locks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locks", type=int, choices=(1, 2), default=1)
    parser.add_argument("--deaths", type=int, default=1)
    parser.add_argument("--ticks", type=int, default=1)
    parser.add_argument("--timeouts", type=int, default=1)
    parser.add_argument("--backstops", choices=("all", "lost", "none"), default="lost")
    parser.add_argument("--no-symmetry", action="store_true")
    args = parser.parse_args()
    scripts = (
        (locks("L"), locks("L"), locks("L"))
        if args.locks == 1
        else (locks("L", "M"), locks("M", "L"), locks("L"))
    )
    explorer = Explorer(
        scripts,
        deaths=args.deaths,
        ticks=args.ticks,
        timeouts=args.timeouts,
        backstops=args.backstops,
        symmetry=not args.no_symmetry,
    )
    started = time.perf_counter()
    try:
        states = explorer.run()
    except BrokenInvariantError as broken:
        print(f"BROKEN after {explorer.states} states:\n{broken}")
        return 1
    print(
        f"three agents, {args.locks} lock(s), {args.deaths} death(s), {args.ticks} tick(s), "
        f"{args.timeouts} timeout(s): {states} states, {explorer.transitions} transitions, "
        f"no invariant broken ({time.perf_counter() - started:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
