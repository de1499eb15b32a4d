"""System calls per uncontended lock cycle (try-lock + release), counted by strace.

    python3 scripts/uv run python benchmarks/count_syscalls.py [--cycles N] [--dir DIR] [--trace]

Each kind runs in a child Python under `strace -f -c`, once doing N cycles and once doing
none; the difference divided by N is what one cycle costs, start-up and imports cancelled
out. Kinds: the floor (raw mkdir + rmdir of one directory), `LockStore` (try_lock + release
of an existing file `src/module.py` of a checkout), and the contract API
(`lockyard.infra.tools.locking.try_lock` + `release_lock`, its cached default store).
`--trace` also prints the calls of one cycle of each in order, try-lock and release apart.
`--dir` is where the lock directory goes (default: /dev/shm; the counts do not depend on it).

Needs strace (`apt-get install strace`).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

KINDS = ("raw mkdir+rmdir", "LockStore", "contract API")
MARK = "/lockyard-count-syscalls-mark-"

CHILD = r"""
import os, sys
kind, cycles, base = sys.argv[1], int(sys.argv[2]), sys.argv[3]
repo, lock_dir = f"{base}/repo", f"{base}/locks"
os.environ["LOCKYARD_LOCK_DIR"] = lock_dir
from lockyard.infra.tools import locking
from lockyard.infra.lockstore import LockStore

def mark(label):
    os.access(MARK + label, os.F_OK)  # a call strace shows, to cut the trace at

if kind == "raw mkdir+rmdir":
    path = f"{base}/raw"
    def lock(): os.mkdir(path)
    def unlock(): os.rmdir(path)
elif kind == "LockStore":
    store = LockStore(repo, lock_dir)
    def lock(): assert store.try_lock("src/module.py", "agent")
    def unlock(): assert store.release("src/module.py", "agent")
else:
    def lock(): assert locking.try_lock("src/module.py", "agent", repo)
    def unlock(): assert locking.release_lock("src/module.py", "agent", repo)

for _ in range(3):  # warm: caches filled, lazy imports done
    lock(); unlock()
mark("start")
for _ in range(cycles):
    lock(); mark("release"); unlock(); mark("cycle")
""".replace("MARK", repr(MARK))

_SUMMARY_LINE = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:(\d+)\s+)?(\w+)\s*$")


def run_child(kind: str, cycles: int, base: str, strace_args: list[str]) -> str:
    """strace's output for the child doing `cycles` cycles of `kind`."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as output:
        child = [sys.executable, "-c", CHILD, kind, str(cycles), base]
        subprocess.run(["strace", "-f", *strace_args, "-o", output.name, *child], check=True)
        return output.read()


def counts(kind: str, cycles: int, base: str) -> Counter[str]:
    found: Counter[str] = Counter()
    for line in run_child(kind, cycles, base, ["-c"]).splitlines():
        match = _SUMMARY_LINE.match(line)
        if match and match.group(3) != "total":
            found[match.group(3)] += int(match.group(1))
    return found


def per_cycle(kind: str, cycles: int, base: str) -> dict[str, float]:
    """Each system call's count per cycle, the marks taken off (two per cycle)."""
    loaded, idle = counts(kind, cycles, base), counts(kind, 0, base)
    result = {name: (loaded[name] - idle[name]) / cycles for name in loaded}
    result["access"] = result.get("access", 0.0) - 2  # the marks
    return {name: value for name, value in result.items() if round(value, 2) != 0}


def one_cycle(kind: str, base: str) -> dict[str, list[str]]:
    """The calls of one cycle, in order: those of the try-lock, then those of the release."""
    trace = run_child(kind, 1, base, []).splitlines()
    phases: dict[str, list[str]] = {"try-lock": [], "release": []}
    phase = None
    for line in trace:
        call = line.split(None, 1)[1] if line.split(None, 1)[0].isdigit() else line
        if MARK in call:
            label = call.split(MARK, 1)[1].split('"', 1)[0]
            phase = {"start": "try-lock", "release": "release", "cycle": None}[label]
            continue
        if phase is not None:
            phases[phase].append(call if len(call) < 150 else call[:110] + " ... " + call[-30:])
    return phases


def prepared(directory: str) -> str:
    base = tempfile.mkdtemp(prefix="lockyard-syscalls-", dir=directory)
    os.makedirs(f"{base}/repo/src")
    open(f"{base}/repo/src/module.py", "w").close()  # agents lock files that exist
    return base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    parser.add_argument("--trace", action="store_true", help="print one cycle's calls in order")
    args = parser.parse_args()
    if shutil.which("strace") is None:
        sys.exit("strace is not installed: apt-get install strace")
    base = prepared(args.dir or tempfile.gettempdir())
    try:
        table = {kind: per_cycle(kind, args.cycles, base) for kind in KINDS}
        names = sorted({name for row in table.values() for name in row})
        print(f"system calls per try-lock + release cycle (strace -f -c, {args.cycles} cycles)")
        print(f"{'system call':<14}" + "".join(f"{kind:>18}" for kind in KINDS))
        for name in names:
            print(f"{name:<14}" + "".join(f"{table[k].get(name, 0.0):>18.2f}" for k in KINDS))
        print(f"{'total':<14}" + "".join(f"{sum(table[k].values()):>18.2f}" for k in KINDS))
        if args.trace:
            for kind in KINDS[1:]:
                for phase, calls in one_cycle(kind, base).items():
                    print(f"\n{kind}, {phase}:")
                    for call in calls:
                        print("   ", call)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
