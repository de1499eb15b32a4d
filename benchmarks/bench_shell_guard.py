"""How long the shell guard takes to decide a typical command, against baselines of the same run.

For each command: the median and p99 time of `decide_shell_command` (parse, expand, find the
write targets, read their locks), and two baselines measured in the same run:
- `parse`: tree-sitter parsing the command alone (the floor any real parser sets);
- `Edit`: the write guard deciding one Edit of one file (what a PreToolUse hook already costs).
The target is a decision under 1 ms after start-up. Commands that ask git (`git checkout --`)
are shown apart: they start a git process.

    python3 -m uv run python benchmarks/bench_shell_guard.py            # full run (~15 s)
    python3 -m uv run python benchmarks/bench_shell_guard.py --quick
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import tree_sitter_bash
from tree_sitter import Language, Parser

from lockyard.infra.hooks.shell_guard.decide import decide_shell_command
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--lock-dir", help="lock directory (default: a fresh one on tmpfs)")
    options = parser.parse_args()
    repeat = 300 if options.quick else 2000
    with tempfile.TemporaryDirectory() as scratch:
        repo = make_repo(Path(scratch))
        store = LockStore(repo, options.lock_dir or Path("/dev/shm") / Path(scratch).name)
        for name in ("app.py", "utils.py", "models.py", "old.py", "tmp.py", "new.py"):
            store.try_lock(f"src/{name}", AGENT)
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
