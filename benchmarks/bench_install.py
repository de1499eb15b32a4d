"""Size and install time of lockyard's installs: the plain one, and with each extra.

    python3 scripts/uv run python benchmarks/bench_install.py [--variants '' sdk] \
        [--baseline CHECKOUT]

Builds a wheel of this checkout, then installs it as a person would, with `uv tool install`
(uv's defaults: cache links, no bytecode), once per variant: plain (agent CLI sessions),
`[postgres]`, `[sdk]` (an orchestrator's), each into a temporary UV_TOOL_DIR:

- cold: from an EMPTY uv cache of its own, so the install downloads and unpacks everything it
  needs from PyPI (a first install on a new machine; it includes the network, so its seconds
  are rough: compare ratios);
- warm: the same install again into a fresh tool directory, from the cache the cold one
  filled (a reinstall, or a second tool with the same packages): no network, the local cost.

Prints each environment's size on disk and both times, with ratios to `lockyard[sdk]` (what
every install was before the extras, when it carried the SDK and its bundled Claude CLI).
`--baseline CHECKOUT` adds the plain install of another checkout (e.g. the commit before a
change), built and installed in this same run. Start-up per command is bench_startup.py's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UV = [sys.executable, str(ROOT / "scripts" / "uv")]
VARIANTS = ("", "postgres", "sdk")
REFERENCE = "sdk"


@dataclass(frozen=True)
class Installed:
    label: str
    size_bytes: int
    cold_seconds: float
    warm_seconds: float


def uv_env(scratch: Path, tools: str) -> dict[str, str]:
    dropped = {"VIRTUAL_ENV", "UV_PROJECT", "UV_COMPILE_BYTECODE", "UV_LINK_MODE"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(
        UV_NO_PROGRESS="1",
        UV_CACHE_DIR=str(scratch / "cache"),
        UV_TOOL_DIR=str(scratch / tools),
        UV_TOOL_BIN_DIR=str(scratch / f"{tools}-bin"),
        UV_PYTHON=sys.executable,
    )
    return env


def build_wheel(checkout: Path, out: Path) -> Path:
    subprocess.run(
        [*UV, "build", "--wheel", "--out-dir", str(out), str(checkout)],
        check=True, capture_output=True,
    )  # fmt: skip
    return next(out.glob("lockyard-*.whl"))


def tree_size(root: Path) -> int:
    """Bytes on disk, each hard-linked file once (uv links from its cache when it can)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            info = os.lstat(os.path.join(folder, name))
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def timed_install(requirement: str, scratch: Path, tools: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [*UV, "tool", "install", requirement],
        check=True, capture_output=True, env=uv_env(scratch, tools),
    )  # fmt: skip
    return time.perf_counter() - started


def install(label: str, wheel: Path, extras: str) -> Installed:
    scratch = Path(tempfile.mkdtemp(prefix="lockyard-bench-install-"))
    try:
        requirement = f"lockyard[{extras}] @ {wheel.as_uri()}" if extras else str(wheel)
        cold = timed_install(requirement, scratch, "cold")
        warm = timed_install(requirement, scratch, "warm")
        return Installed(label, tree_size(scratch / "cold" / "lockyard"), cold, warm)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def label_of(extras: str) -> str:
    return f"lockyard[{extras}]" if extras else "lockyard"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--variants",
        nargs="+",
        default=list(VARIANTS),
        help="extras of each install ('' for plain; 'sdk,postgres' for both)",
    )
    parser.add_argument("--baseline", type=Path, help="another checkout, installed plain")
    options = parser.parse_args()
    variants = list(dict.fromkeys([*options.variants, REFERENCE]))
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="lockyard-bench-wheels-") as out:
        wheel = build_wheel(ROOT, Path(out) / "this")
        results = [install(label_of(extras), wheel, extras) for extras in variants]
        if options.baseline is not None:
            base_wheel = build_wheel(options.baseline, Path(out) / "baseline")
            results.append(install(f"{options.baseline} (plain)", base_wheel, ""))
    reference = next(r for r in results if r.label == label_of(REFERENCE))
    print(
        f"uv tool install of a wheel, Python {sys.version.split()[0]}, uv's defaults; "
        f"load {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print()
    print("| install | size | vs [sdk] | empty cache | vs [sdk] | cached | vs [sdk] |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(
            f"| `{r.label}` | {r.size_bytes / 1e6:.0f} MB "
            f"| {r.size_bytes / reference.size_bytes:.2f}x "
            f"| {r.cold_seconds:.1f} s | {r.cold_seconds / reference.cold_seconds:.2f}x "
            f"| {r.warm_seconds:.1f} s | {r.warm_seconds / reference.warm_seconds:.2f}x |"
        )


if __name__ == "__main__":
    main()
