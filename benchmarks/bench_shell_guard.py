"""How long the shell guard takes to decide a typical command, against baselines of the same run.

For each command: the median and p99 time of `decide_shell_command` (parse, expand, find the
write targets, read their locks), and two baselines measured in the same run:
- `parse`: tree-sitter parsing the command alone (the floor any real parser sets);
- `Edit`: the write guard deciding one Edit of one file (what a PreToolUse hook already costs).
The target is a decision under 1 ms after start-up. Commands that ask git (`git checkout --`)
are shown apart: they start a git process.

With `--baseline DIR` the same commands are also decided by the checkout in DIR (its own
virtual environment, in a process of its own), in alternating rounds, and each line shows the
ratio of the two medians: today's cost against that commit's. With `--sizes` it also times the
real hook process (`lockyard hook pre-tool-use`) on very large commands: 1M and 10M words, and
commands just under the size the guard reads, built to cost it the most.

    python3 scripts/uv run python benchmarks/bench_shell_guard.py            # full run (~15 s)
    python3 scripts/uv run python benchmarks/bench_shell_guard.py --quick
    python3 scripts/uv run python benchmarks/bench_shell_guard.py --quick --baseline /work/base
    python3 scripts/uv run python benchmarks/bench_shell_guard.py --sizes
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import tree_sitter_bash
from tree_sitter import Language, Parser

from lockyard.infra.hooks.shell_guard.decide import MAX_COMMAND_CHARS, decide_shell_command
from lockyard.infra.hooks.write_guard.hook import make_write_guard_hook
from lockyard.infra.lockstore import LockStore

AGENT = "alice"
TYPICAL = [
    "pytest -q tests/",
    "ls -la src",
    "git status && git diff --stat",
    "grep -rn TODO src | head -20",
    "cd src && python -m pytest -q 2>&1 | tail -20",
    "sed -i 's/old/new/g' src/app.py",
    "echo 'x = 1' >> src/app.py",
    "cat > src/new.py <<'EOF'\nimport os\nprint(os.getcwd())\nEOF",
    "python3 -c \"open('src/app.py', 'w').write('x = 2')\"",
    "for f in src/*.py; do sed -i 's/a/b/' \"$f\"; done",
    "mv src/old.py src/new.py && rm -f src/tmp.py",
]
WITH_GIT = ["git checkout -- src/app.py"]


def sample(step: Callable[[], object], repeat: int) -> list[float]:
    step()  # warm: caches, imports
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        samples.append(time.perf_counter() - start)
    return samples


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def p99_us(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e6


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    (repo / "src").mkdir(parents=True)
    for name in ("app.py", "utils.py", "models.py", "old.py", "tmp.py"):
        (repo / "src" / name).write_text("a = 1\n")
    git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    return repo


BASELINE_DECIDER = r"""
import json, statistics, sys, time
from pathlib import Path
from lockyard.infra.hooks.shell_guard import decide_shell_command
try:
    from lockyard.infra.lockstore import LockStore
except ImportError:
    from lockyard.infra.tools.locking import LockStore
repo, lock_dir, agent = sys.argv[1], sys.argv[2], sys.argv[3]
store = LockStore(repo, lock_dir)
for name in ("app.py", "utils.py", "models.py", "old.py", "tmp.py", "new.py"):
    store.try_lock(f"src/{name}", agent)
for line in sys.stdin:
    command, rounds = json.loads(line)
    decide_shell_command(command, repo, agent, store)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        decide_shell_command(command, repo, agent, store)
        samples.append(time.perf_counter() - start)
    print(json.dumps(samples), flush=True)
"""


class Baseline:
    """The same decisions, made by another checkout's code in a process of its own."""

    def __init__(self, checkout: str, repo: Path, lock_dir: Path) -> None:
        python = Path(checkout) / ".venv" / "bin" / "python"
        self.process = subprocess.Popen(
            [str(python), "-c", BASELINE_DECIDER, str(repo), str(lock_dir), AGENT],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=checkout,
        )  # fmt: skip

    def sample(self, command: str, rounds: int) -> list[float]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps([command, rounds]) + "\n")
        self.process.stdin.flush()
        samples: list[float] = json.loads(self.process.stdout.readline())
        return samples

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def compare(repo: Path, store: LockStore, baseline: Baseline, repeat: int) -> None:
    """Alternating rounds of ours and the baseline's decision on each typical command: the
    ratio of the medians (over all rounds) is today's cost against the baseline's."""
    ours: dict[str, list[float]] = {c: [] for c in TYPICAL}
    theirs: dict[str, list[float]] = {c: [] for c in TYPICAL}
    rounds = 5
    for _ in range(rounds):
        for command in TYPICAL:
            step = max(20, repeat // rounds)
            ours[command] += sample(
                lambda c=command: decide_shell_command(c, repo, AGENT, store), step
            )
            theirs[command] += baseline.sample(command, step)
    print(f"{'command':52} {'today':>8} {'baseline':>9} {'ratio':>6}")
    for command in TYPICAL:
        shown = command.replace("\n", "\\n")
        shown = shown if len(shown) <= 50 else shown[:49] + "…"
        today, before = median_us(ours[command]), median_us(theirs[command])
        print(f"{shown:52} {today:6.0f}µs {before:7.0f}µs {today / before:5.2f}x")
    mine = [x for c in TYPICAL for x in ours[c]]
    base = [x for c in TYPICAL for x in theirs[c]]
    print(
        f"all typical commands: median {median_us(mine):.0f} µs today, "
        f"{median_us(base):.0f} µs baseline: {median_us(mine) / median_us(base):.2f}x"
    )


def sizes(repo: Path, lock_dir: Path) -> None:
    """The real hook process on very large commands (a Claude Code Bash call each)."""
    lockyard = str(Path(sys.executable).parent / "lockyard")
    limit = MAX_COMMAND_CHARS
    cases = {
        "`ls` (the floor: a hook process that judges little)": "ls",
        "1M words (`echo w w w ...`)": "echo " + " w" * 1_000_000,
        "10M words": "echo " + " w" * 10_000_000,
        f"{limit // 1024} KiB of words": "echo " + " w" * (limit // 2 - 4),
        f"{limit // 1024} KiB of statements (a;a;...)": ";".join(["a"] * (limit // 2)),
        f"{limit // 1024} KiB of substitutions": "echo " + " $(a)" * (limit // 5 - 2),
        f"{limit // 1024} KiB here-doc": "cat <<'EOF'\n"
        + ("x" * 79 + "\n") * (limit // 80 - 1)
        + "EOF",
        "100 KiB of Python in a here-doc": "python3 - <<'EOF'\n" + "x = 1\n" * 17_000 + "EOF",
        "a glob over the whole disk": "rm /*/*/*/*/*/*.none",
        "nested loops (200 x 200)": (
            "for a in {1..200}; do for b in {1..200}; do rm -f x$a$b; done; done"
        ),
    }
    print(f"{'the real hook on':52} {'chars':>11} {'seconds':>8} {'x ls':>5}  answer")
    floor: float | None = None
    for name, command in cases.items():
        payload = json.dumps(
            {"tool_name": "Bash", "tool_input": {"command": command}, "cwd": str(repo)}
        ).encode()
        start = time.perf_counter()
        done = subprocess.run(
            [lockyard, "hook", "pre-tool-use", "--cli", "claude-code", "--agent-id", AGENT,
             "--repo", str(repo), "--lock-dir", str(lock_dir)],
            input=payload, capture_output=True, check=False,
        )  # fmt: skip
        took = time.perf_counter() - start
        answer = json.loads(done.stdout or b"{}").get("hookSpecificOutput", {})
        verdict = answer.get("permissionDecision", "allow")
        reason = answer.get("permissionDecisionReason", "")
        why = "too large" if "too large" in reason or "more than the guard" in reason else ""
        floor = took if floor is None else floor
        print(f"{name[:52]:52} {len(command):11,} {took:8.2f} {took / floor:5.1f}  {verdict} {why}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--lock-dir", help="lock directory (default: a fresh one on tmpfs)")
    parser.add_argument("--baseline", help="a checkout to compare against (its .venv)")
    parser.add_argument("--sizes", action="store_true", help="time the hook on huge commands")
    options = parser.parse_args()
    repeat = 300 if options.quick else 2000
    with tempfile.TemporaryDirectory() as scratch:
        repo = make_repo(Path(scratch))
        lock_dir = Path(options.lock_dir or Path("/dev/shm") / Path(scratch).name)
        store = LockStore(repo, lock_dir)
        for name in ("app.py", "utils.py", "models.py", "old.py", "tmp.py", "new.py"):
            store.try_lock(f"src/{name}", AGENT)
        if options.sizes:
            sizes(repo, lock_dir)
            return
        if options.baseline:
            baseline = Baseline(options.baseline, repo, lock_dir.with_name(lock_dir.name + "-b"))
            try:
                compare(repo, store, baseline, repeat)
            finally:
                baseline.close()
            return
        ts = Parser(Language(tree_sitter_bash.language()))
        edit_hook = make_write_guard_hook(store, AGENT)
        edit = {"tool_name": "Edit", "tool_input": {"file_path": str(repo / "src/app.py")}}

        edit_samples = sample(lambda: edit_hook_sync(edit_hook, edit), repeat)
        print(f"{'command':52} {'decide':>9} {'p99':>9} {'parse':>8} {'ratio':>6}")
        decides: list[float] = []
        for command in TYPICAL + WITH_GIT:
            rounds = repeat if command in TYPICAL else max(20, repeat // 20)
            decision = decide_shell_command(command, repo, AGENT, store)
            assert decision.allowed, (command, decision.reason)
            took = sample(lambda c=command: decide_shell_command(c, repo, AGENT, store), rounds)
            parse = sample(lambda c=command: ts.parse(c.encode()), rounds)
            if command in TYPICAL:
                decides.extend(took)
            shown = command.replace("\n", "\\n")
            shown = shown if len(shown) <= 50 else shown[:49] + "…"
            print(
                f"{shown:52} {median_us(took):7.0f}µs {p99_us(took):7.0f}µs "
                f"{median_us(parse):6.1f}µs {median_us(took) / median_us(parse):5.0f}x"
            )
        print()
        print(
            f"typical commands, all samples: median {median_us(decides):.0f} µs, "
            f"p99 {p99_us(decides):.0f} µs (target < 1000 µs); the write guard deciding one "
            f"Edit: {median_us(edit_samples):.0f} µs; median decision / Edit = "
            f"{median_us(decides) / median_us(edit_samples):.1f}x"
        )


def edit_hook_sync(hook: Callable[..., object], data: dict[str, object]) -> object:
    """Drive the async write guard to completion without an event loop (it never awaits)."""
    coroutine = hook(data, None, {})
    try:
        coroutine.send(None)  # type: ignore[attr-defined]
    except StopIteration as done:
        return done.value
    raise RuntimeError("the write guard awaited something")


if __name__ == "__main__":
    main()
