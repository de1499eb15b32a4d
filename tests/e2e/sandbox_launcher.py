"""Run a command in a throwaway container: its own mount (and pid, optionally network)
namespace, where the file system is a fresh tmpfs holding only the system's programs and
libraries (read-only), the Python environment (read-only), the sandbox's IPC folder at /ipc
and its checkout at /workspace. Nothing else of the host is visible: not the lock directory,
not the other sandboxes' folders, not /dev/shm.

Usage (as root): unshare --mount --pid --fork --kill-child [--net] -- \\
    python sandbox_launcher.py --ipc DIR --workspace DIR [--ro PATH ...] -- COMMAND ...
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc")
DEVICES = ("null", "zero", "random", "urandom")


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def bind(source: str, target: Path, *, read_only: bool) -> None:
    if os.path.isdir(source):
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    mount("--rbind", source, str(target))
    if read_only:
        mount("-o", "remount,bind,ro", str(target))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ipc", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--ro", action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command

    mount("--make-rprivate", "/")  # nothing below propagates back to the host
    root = Path(tempfile.mkdtemp(prefix="sandbox-root-"))
    mount("-t", "tmpfs", "tmpfs", str(root))
    for path in SYSTEM:
        if os.path.islink(path):  # /bin -> usr/bin on merged-/usr systems
            os.symlink(os.readlink(path), root / path.lstrip("/"))
        elif os.path.isdir(path):
            bind(path, root / path.lstrip("/"), read_only=True)
    # The fresh scratch folders first, the read-only binds on top: a checkout or venv that
    # lives under /tmp (as a CI clone may) stays visible instead of hidden by the new /tmp.
    for fresh in ("tmp", "dev/shm", "run"):
        (root / fresh).mkdir(parents=True, exist_ok=True)
        mount("-t", "tmpfs", "tmpfs", str(root / fresh))
    for path in options.ro:
        bind(path, root / path.lstrip("/"), read_only=True)
    for device in DEVICES:
        bind(f"/dev/{device}", root / "dev" / device, read_only=False)
    (root / "proc").mkdir()
    mount("-t", "proc", "proc", str(root / "proc"))  # this pid namespace's processes only
    bind(options.ipc, root / "ipc", read_only=False)
    bind(options.workspace, root / "workspace", read_only=False)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=False, capture_output=True)

    os.chroot(root)
    os.chdir("/workspace")
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        **{k: v for k, v in os.environ.items() if k.startswith("SANDBOX_")},
    }
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    main()
