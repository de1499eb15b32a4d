"""How often the most unlucky agent gives way, with this checkout's victim policy and another's.

    python3 scripts/uv run python benchmarks/victim_counts.py --other /work/base \\
        [--agents 32 100] [--files 60] [--seeds 1 2 3]

For each agent count and seed it runs `lockyard demo` (the real lock tools over MCP, the
deadlock monitor, one lock directory) with this checkout and with the checkout `--other`
(each with its own environment), one after the other, and prints per run: the deadlocks, the
most deadlocks one agent gave way in, the five highest counts (one starved agent stands out;
counts that fall off slowly mean many agents gave way about as often), how many agents gave way
at all, whether every edit landed, and (where the checkout's report says why each victim was
chosen) in how many deadlocks the victim had no choice: every other agent of the cycle kept
its turn, so aging could not decide. The demo refuses more than its maximum of agents; the
runs here lift that bound in the demo's own module, so an older checkout can be measured at
100 agents too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

RUN_ONE = """
import json, sys
import lockyard.cli.demo.scenario as scenario
scenario.MAX_AGENTS = 1000
from lockyard.cli.demo.runner import DemoOptions, run_demo
agents, files, seed = (int(x) for x in sys.argv[1:4])
report, _workspace = run_demo(DemoOptions(agents=agents, files=files, seed=seed), None)
print(json.dumps(report.to_dict()))
"""

HERE = Path(__file__).resolve().parent.parent


def run(checkout: Path, agents: int, files: int, seed: int) -> dict[str, Any]:
    python = checkout / ".venv" / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", RUN_ONE, str(agents), str(files), str(seed)],
        capture_output=True,
        text=True,
        check=False,
        cwd=checkout,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"{checkout}: the demo failed:\n{done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def no_choice(why: str) -> bool:
    """The victim kept no turn and every other agent of its cycle kept one."""
    if "keeps its turn" not in why and "keep their turns" not in why:
        return False
    victim = why.split(" gives way", 1)[0]
    figures = why.split("before): ", 1)[1].split("), ")
    mine = [f for f in figures if f.startswith(f"{victim} ")]
    others = [f for f in figures if not f.startswith(f"{victim} ")]
    return bool(mine) and "turn" not in mine[0] and all("turn" in f for f in others)


def figures(report: dict[str, Any]) -> tuple[int, list[int], str, int, str, str]:
    deadlocks = report["deadlocks"]
    counts = Counter(record["victim"] for record in deadlocks)
    top = sorted(counts.values(), reverse=True)[:5]
    most = top[0] if top else 0
    worst = ",".join(sorted(agent for agent, n in counts.items() if n == most)[:2])
    edits = f"{report['edits_done']}/{report['edits_expected']}"
    reasons = [record.get("why", "") for record in deadlocks]
    forced = f"{sum(map(no_choice, reasons))}" if all(reasons) and reasons else "-"
    return len(deadlocks), top, worst, len(counts), edits, forced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--other", type=Path, required=True, help="another lockyard checkout")
    parser.add_argument("--agents", type=int, nargs="+", default=[32, 100])
    parser.add_argument("--files", type=int, default=60)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    options = parser.parse_args()
    checkouts = {"this": HERE, "other": options.other.resolve()}
    print(f"this = {HERE}, other = {checkouts['other']}; --files {options.files}")
    header = (
        f"{'agents':>6} {'seed':>4}  {'run':<5} {'deadlocks':>9} {'no choice':>9} "
        f"{'top five counts':<19} {'victims':>7}  {'edits':>9}  worst"
    )
    print(header)
    for agents in options.agents:
        for seed in options.seeds:
            for name, checkout in checkouts.items():
                deadlocks, top, worst, victims, edits, forced = figures(
                    run(checkout, agents, options.files, seed)
                )
                counts = " ".join(map(str, top))
                print(
                    f"{agents:>6} {seed:>4}  {name:<5} {deadlocks:>9} {forced:>9} "
                    f"{counts:<19} {victims:>7}  {edits:>9}  {worst}",
                    flush=True,
                )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
