"""Agent CLIs from the npm registry, at pinned exact versions, installed once into a cache.

`installed_cli(name)` installs the package with npm (`--ignore-scripts` is not used: the
Codex and OpenCode packages pick their platform binary in a dependency) into
`$LOCKYARD_CLI_CACHE` (default `~/.cache/lockyard-test-clis`), one directory per
package and version, and returns the path of its executable. A second call, or a second CI
run with the cache kept, finds it there and costs nothing. Tests that need a CLI call this
in a fixture and skip with the reason when npm or the registry is not reachable.
`.ci/run` fetches them ahead (`python3 tests/e2e/npm_clis.py NAME...`, stdlib only) while
the rest of the machine is set up; a test that comes first waits for that install's lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final


@dataclass(frozen=True)
class NpmCli:
    package: str
    version: str
    executable: str


PINNED: Final = {
    "gemini": NpmCli("@google/gemini-cli", "0.61.0", "gemini"),
    "codex": NpmCli("@openai/codex", "0.169.0", "codex"),
    "opencode": NpmCli("opencode-ai", "1.18.33", "opencode"),
    "copilot": NpmCli("@github/copilot", "1.0.102", "copilot"),
    "qwen": NpmCli("@qwen-code/qwen-code", "0.24.4", "qwen"),
    "pi": NpmCli("@mariozechner/pi-coding-agent", "0.73.1", "pi"),
    # 7.8.1, the latest, has no linux-x64 binary package on the registry; 7.7.7 has.
    "kilo": NpmCli("@kilocode/cli", "7.7.7", "kilo"),
    "droid": NpmCli("droid", "0.215.0", "droid"),
}


class CliUnavailableError(Exception):
    """The CLI could not be installed here (no npm, no registry); the message says why."""


def cache_root() -> Path:
    configured = os.environ.get("LOCKYARD_CLI_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "lockyard-test-clis"


def install_home(name: str) -> Path:
    """The cache directory of the pinned CLI `name` (its npm prefix)."""
    cli = PINNED[name]
    return cache_root() / f"{cli.package.replace('/', '+')}@{cli.version}"


def install_all(names: Iterable[str]) -> dict[str, Path | CliUnavailableError]:
    """Install the pinned CLIs `names` at once (npm mostly waits on the network), each into
    its cache directory: the executable of each, or why it could not be installed."""

    def one(name: str) -> Path | CliUnavailableError:
        try:
            return installed_cli(name)
        except CliUnavailableError as exc:
            return exc

    wanted = sorted(set(names))
    with ThreadPoolExecutor(max_workers=max(1, len(wanted))) as pool:
        return dict(zip(wanted, pool.map(one, wanted), strict=True))


def installed_cli(name: str) -> Path:
    """The executable of the pinned CLI `name`, installing it into the cache if needed."""
    cli = PINNED[name]
    home = install_home(name)
    executable = home / "node_modules" / ".bin" / cli.executable
    # The link to the executable appears before npm has ended (postinstall scripts still put
    # platform binaries in place): only this mark, written after npm succeeded, says done.
    installed = home / ".installed"
    if installed.exists():
        return executable
    npm = shutil.which("npm")
    if npm is None:
        raise CliUnavailableError("npm is not installed")
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".install.lock").open("w") as lock:  # parallel test workers install once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed.exists():
            return executable
        done = subprocess.run(
            [npm, "install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error",
             "--prefix", str(home), f"{cli.package}@{cli.version}"],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        if done.returncode != 0 or not executable.exists():
            raise CliUnavailableError(
                f"npm install {cli.package}@{cli.version} failed: {done.stderr.strip()[-500:]}"
            )
        installed.touch()
    return executable


if __name__ == "__main__":
    unavailable = [f"{name}: {got}" for name, got in install_all(sys.argv[1:]).items()
                   if isinstance(got, CliUnavailableError)]  # fmt: skip
    for reason in unavailable:
        print(reason, file=sys.stderr)
    sys.exit(1 if unavailable else 0)
