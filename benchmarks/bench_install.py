"""Size and cold install time of lockyard's installs, plain and with each extra.

    python3 scripts/uv run python benchmarks/bench_install.py [--baseline /work/base]

Builds a wheel of this checkout, then installs it as a person would, with `uv tool install`,
once per variant (plain, [postgres], [sdk], [sdk,postgres]), each into a tool directory and
an EMPTY uv cache of its own, so every install downloads and unpacks everything it needs from
PyPI: the time is a cold install (it includes the network, so compare ratios, not seconds).
Prints each environment's size on disk and install time, both as a ratio to the install with
every extra (what every install was before the extras: `--baseline CHECKOUT` adds the plain
install of another checkout, e.g. the commit before this work, built and installed in this
same run). Start-up per command is benchmarks/bench_startup.py's.
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
VARIANTS = ("", "postgres", "sdk", "sdk,postgres")
EVERYTHING = "sdk,postgres"


@dataclass(frozen=True)
class Installed:
    label: str
    size_bytes: int
    install_seconds: float


def uv_env(scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "UV_PROJECT"}}
    env.update(
        UV_NO_PROGRESS="1",
        UV_CACHE_DIR=str(scratch / "cache"),  # empty: a cold install
        UV_TOOL_DIR=str(scratch / "tools"),
        UV_TOOL_BIN_DIR=str(scratch / "bin"),
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


def install(label: str, wheel: Path, extras: str) -> Installed:
    scratch = Path(tempfile.mkdtemp(prefix="lockyard-bench-install-"))
    try:
        requirement = f"lockyard[{extras}] @ {wheel.as_uri()}" if extras else str(wheel)
        started = time.perf_counter()
        subprocess.run(
            [*UV, "tool", "install", "--link-mode", "copy", requirement],
            check=True, capture_output=True, env=uv_env(scratch),
        )  # fmt: skip
        seconds = time.perf_counter() - started
        size = tree_size(scratch / "tools" / "lockyard")
        return Installed(label, size, seconds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another checkout, installed plain")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lockyard-bench-wheels-") as out:
        wheel = build_wheel(ROOT, Path(out) / "this")
        results = [
            install(f"lockyard[{extras}]" if extras else "lockyard", wheel, extras)
            for extras in VARIANTS
        ]
        if options.baseline is not None:
            base_wheel = build_wheel(options.baseline, Path(out) / "baseline")
            results.append(install(f"{options.baseline} (plain)", base_wheel, ""))
    everything = next(r for r in results if r.label == f"lockyard[{EVERYTHING}]")
    print(f"every install: uv tool install, empty cache, Python {sys.version.split()[0]}")
    print()
    print("| install | size | vs everything | cold install | vs everything |")
    print("| --- | --- | --- | --- | --- |")
    for r in results:
        print(
            f"| `{r.label}` | {r.size_bytes / 1e6:.0f} MB "
            f"| {r.size_bytes / everything.size_bytes:.2f}x "
            f"| {r.install_seconds:.1f} s | {r.install_seconds / everything.install_seconds:.2f}x |"
        )


if __name__ == "__main__":
    main()
