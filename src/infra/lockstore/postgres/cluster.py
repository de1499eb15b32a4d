"""A throwaway PostgreSQL cluster from this machine's server binaries (`initdb`, `pg_ctl`).

Used by the test suite (when `LOCKYARD_TEST_PG_DSN` names no server) and by
`lockyard demo --backend postgres`. The cluster lives in a fresh temporary directory, listens
on loopback (or on the addresses given) at a free port, requires a password over TCP, and is
removed on `stop()`. PostgreSQL refuses to run as root, so under root the server runs as the
`postgres` system user (or `LOCKYARD_PG_OS_USER`), which owns the directory.

`fsync=off`: a throwaway cluster needs no protection from power loss (commits still reach
the WAL, so a crash of the server itself, as the restart tests cause, loses nothing).

A cluster outlives no process that started it, however that process ends:

- a reaper (a small shell process in a session of its own) holds the read end of a pipe whose
  write end only the owner holds; when the owner dies, even by SIGKILL, the reaper reads
  end-of-file, stops the server and removes the directory. It starts before `initdb`, so a
  kill while the cluster is still being created leaves nothing either;
- should the reaper be killed too (a kill of every process of a user or a container), the
  directory still names its owner (`owner.json`: pid, start time, host, boot, pid namespace);
  creating a cluster first reaps every cluster whose owner is provably dead
  (`reap_orphaned_clusters`). A cluster whose owner is alive, or cannot be judged, is never
  touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import quote

from ..liveness import Liveness, current_process, liveness_of

SUPERUSER: Final = "lockyard"
ROOT_PREFIX: Final = "lockyard-pg-"
OWNER_FILE: Final = "owner.json"
_ORPHAN_STOP_SECONDS: Final = 30.0
SERVER_PROGRAMS: Final = ("initdb", "pg_ctl", "postgres")
_PG_BIN_GLOB: Final = "/usr/lib/postgresql/*/bin"


class ClusterError(RuntimeError):
    """The throwaway cluster could not be created or started; the message says why."""


def find_server_bin() -> Path:
    """The directory with `initdb` and `pg_ctl`: PATH first, then Debian's versioned dirs."""
    found = shutil.which("initdb")
    if found is not None:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(Path("/").glob(_PG_BIN_GLOB.lstrip("/")), reverse=True)
    for candidate in candidates:
        if (candidate / "initdb").exists():
            return candidate
    raise ClusterError(
        "no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql: "
        "install the server (Debian: apt-get install postgresql) or point "
        "LOCKYARD_TEST_PG_DSN / --backend at a running server"
    )


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


@dataclass
class ThrowawayCluster:
    """One private PostgreSQL server; `dsn` connects to it as its superuser."""

    listen: Sequence[str] = ("127.0.0.1",)
    max_connections: int = 300
    settings: dict[str, str] = field(default_factory=dict)
    allow_networks: Sequence[str] = ()
    """Networks (CIDR) besides loopback whose clients may log in with the password."""
    root: Path | None = None
    port: int = 0
    password: str = field(default_factory=lambda: secrets.token_hex(12))
    _bin: Path | None = None
    _os_user: str | None = None
    _reaper: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        assert self.root is not None, "the cluster was not created"
        return self.root / "data"

    @property
    def host(self) -> str:
        return self.listen[0]

    def dsn_for(
        self, user: str = SUPERUSER, password: str | None = None, db: str = "postgres"
    ) -> str:
        secret = self.password if password is None else password
        return f"postgresql://{quote(user)}:{quote(secret)}@{self.host}:{self.port}/{db}"

    @property
    def dsn(self) -> str:
        return self.dsn_for()

    def start(self) -> ThrowawayCluster:
        """initdb (first time) and start; returns self. Raises ClusterError with the log."""
        first = self.root is None
        try:
            if first:
                self._create()
            self._pg_ctl(
                "start", "-w", "-t", "60", "-l", str(self._log_file), "-o", self._options()
            )
        except ClusterError:
            if first:
                self.destroy()
            raise
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`immediate` simulates a crash); the data directory stays."""
        if self.root is None or not (self.data_dir / "postmaster.pid").exists():
            return
        self._pg_ctl("stop", "-w", "-t", "60", "-m", mode)

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def destroy(self) -> None:
        """Stop the server and remove every file of the cluster."""
        with contextlib.suppress(ClusterError):
            self.stop("immediate")
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
        if self._reaper is not None:
            assert self._reaper.stdin is not None
            self._reaper.stdin.close()
            self._reaper.wait(timeout=30)
            self._reaper = None

    def __enter__(self) -> ThrowawayCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.destroy()

    @property
    def _log_file(self) -> Path:
        assert self.root is not None
        return self.root / "server.log"

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self._log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def _create(self) -> None:
        self._bin = find_server_bin()
        self._os_user = _server_os_user()
        reap_orphaned_clusters()
        root = Path(tempfile.mkdtemp(prefix=ROOT_PREFIX))
        self.root = root
        _write_owner(root)
        self._reaper = _start_reaper(root)
        password_file = root / "pw"
        password_file.write_text(self.password + "\n")
        if self._os_user is not None:
            entry = pwd.getpwnam(self._os_user)
            os.chown(root, entry.pw_uid, entry.pw_gid)
            os.chown(password_file, entry.pw_uid, entry.pw_gid)
        root.chmod(0o700)
        self.port = self.port or _free_port(self.host)
        self._run(
            self._bin / "initdb",
            "-D", str(self.data_dir),
            "-U", SUPERUSER,
            "--pwfile", str(password_file),
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E", "UTF8",
            "--no-sync",
        )  # fmt: skip
        password_file.unlink()
        if self.allow_networks:
            with (self.data_dir / "pg_hba.conf").open("a") as hba:
                for network in self.allow_networks:
                    hba.write(f"host all all {network} scram-sha-256\n")

    def _options(self) -> str:
        assert self.root is not None
        settings = {
            "listen_addresses": ",".join(self.listen),
            "port": str(self.port),
            "unix_socket_directories": str(self.root),
            "max_connections": str(self.max_connections),
            "fsync": "off",
            "full_page_writes": "off",
            **self.settings,
        }
        return " ".join(f"-c {name}={value}" for name, value in settings.items())

    def _pg_ctl(self, *args: str) -> None:
        assert self._bin is not None
        self._run(self._bin / "pg_ctl", "-D", str(self.data_dir), *args)

    def _run(self, program: Path, *args: str) -> None:
        try:
            subprocess.run(
                [str(program), *args],
                check=True,
                capture_output=True,
                text=True,
                user=self._os_user,
                cwd=self.root,
                env={**os.environ, "LC_ALL": "C.UTF-8"},
                timeout=120,
            )
        except subprocess.CalledProcessError as exc:
            raise ClusterError(
                f"{program.name} {args[0] if args else ''} failed (exit {exc.returncode}): "
                f"{(exc.stderr or exc.stdout).strip()}\n{self.log_tail()}"
            ) from None
        except subprocess.TimeoutExpired:
            raise ClusterError(f"{program.name} took over 120 s\n{self.log_tail()}") from None


# SIGQUIT is PostgreSQL's immediate shutdown: the postmaster ends its backends and exits.
# The wait (up to 30 s, for a loaded machine) lets it exit before its files go.
_REAPER_SCRIPT = """
read -r _ignored
if pid=$(head -n 1 "$1/data/postmaster.pid" 2>/dev/null) && kill -QUIT "$pid" 2>/dev/null; then
    i=0
    while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
fi
rm -rf "$1"
"""


def _start_reaper(root: Path) -> subprocess.Popen[bytes]:
    """A watcher that stops the server and removes its files when this process goes away,
    however it ends (even SIGKILL): it waits for end-of-file on a pipe only we hold."""
    return subprocess.Popen(
        ["sh", "-c", _REAPER_SCRIPT, "lockyard-pg-reaper", str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C meant for the tests must not reach it first
    )


def _write_owner(root: Path) -> None:
    me = current_process()
    record = {
        "pid": me.pid,
        "start_time": me.start_time,
        "host": me.host,
        "boot_id": me.boot_id,
        "pid_ns": me.pid_ns,
    }
    (root / OWNER_FILE).write_text(json.dumps(record))


def _owner_is_dead(root: Path) -> bool:
    """Whether the process that created the cluster in `root` is provably dead; False when
    the directory names no owner (being created, or made by an older version) or is bad."""
    try:
        record = json.loads((root / OWNER_FILE).read_text())
        verdict, _why = liveness_of(
            int(record["pid"]),
            None if record["start_time"] is None else int(record["start_time"]),
            str(record["host"]),
            record["boot_id"],
            record["pid_ns"],
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return verdict is Liveness.DEAD


def _server_pid(root: Path) -> int | None:
    """The postmaster running on `root`'s data directory, if one is."""
    try:
        pid = int((root / "data" / "postmaster.pid").read_text().split("\n", 1)[0])
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            arguments = cmdline.read().split(b"\0")
    except (OSError, ValueError):
        return None
    # A stale pid file may name a pid that now belongs to another process.
    return pid if os.fsencode(root / "data") in arguments else None


def _process_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except OSError:
        return True


def reap_orphaned_clusters(temp_dir: Path | None = None) -> list[Path]:
    """Stop and remove every throwaway cluster (in the temporary directory) whose owner is
    provably dead; returns their directories. Clusters of live owners are left alone."""
    base = Path(tempfile.gettempdir() if temp_dir is None else temp_dir)
    reaped = []
    for root in sorted(base.glob(f"{ROOT_PREFIX}*")):
        if not _owner_is_dead(root):
            continue
        pid = _server_pid(root)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGQUIT)
            deadline = time.monotonic() + _ORPHAN_STOP_SECONDS
            while not _process_gone(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        shutil.rmtree(root, ignore_errors=True)
        reaped.append(root)
    return reaped


def _server_os_user() -> str | None:
    """None to run the server as ourselves; under root, an unprivileged system user."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get("LOCKYARD_PG_OS_USER", "postgres")
    try:
        pwd.getpwnam(name)
    except KeyError:
        raise ClusterError(
            f"PostgreSQL refuses to run as root and there is no {name!r} user to run it as: "
            "create one (useradd --system postgres) or set LOCKYARD_PG_OS_USER"
        ) from None
    return name


def wait_until_accepting(dsn: str, timeout: float = 30.0) -> None:
    """Block until a server accepts connections at `dsn` (for restarts done elsewhere)."""
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(dsn, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
