"""Checking `lockyard ipc-host`'s configuration before anything is served, and the one-host-per-
root lock (two hosts on one root would each answer the same requests)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Final

from ...lockstore import (
    BackendSpecError,
    InvalidAgentIdError,
    LockBackend,
    LockStore,
    LockStoreError,
    open_backend,
    validate_agent_id,
)

HOST_LOCK: Final = ".lockyard-ipc-host.lock"


class IpcHostConfigError(Exception):
    """`ipc-host` cannot start; `hint` says what to do instead."""

    def __init__(self, message: str, hint: str, *, lock_dir_problem: bool = False) -> None:
        super().__init__(message)
        self.hint = hint
        self.lock_dir_problem = lock_dir_problem


def check_root(root: Path) -> Path:
    """The root as a real directory (not a symlink), or IpcHostConfigError."""
    if root.is_symlink() or not root.is_dir():
        raise IpcHostConfigError(
            f"--root {root} is not a directory",
            "create it and one folder per sandbox inside it (mkdir -p ROOT/NAME)",
        )
    return root


def check_admin(admin: str | None) -> str | None:
    if admin is None:
        return None
    try:
        validate_agent_id(admin)
    except InvalidAgentIdError as exc:
        raise IpcHostConfigError(f"--admin: {exc}", "pass the name of a sandbox folder") from None
    if admin.startswith(".") or "/" in admin:
        raise IpcHostConfigError(
            f"--admin {admin!r} cannot be a sandbox folder's name",
            "pass the folder name alone, e.g. --admin main",
        )
    return admin


def open_host_store(
    repo: Path, lock_dir: Path | None, backend: str | None = None, *, cross_process: bool = False
) -> LockBackend:
    """The host's lock store on the chosen backend (see `open_backend`), or IpcHostConfigError."""
    if not repo.is_dir():
        raise IpcHostConfigError(
            f"--repo {repo} is not a directory",
            "pass the host's checkout of the repository the sandboxes edit",
        )
    try:
        store = open_backend(str(repo), backend, lock_dir=lock_dir)
    except BackendSpecError as exc:
        raise IpcHostConfigError(
            str(exc), "pass --backend postgresql://... or a lock directory, not both"
        ) from None
    except LockStoreError as exc:  # an unusable lock directory, an unreachable server
        raise IpcHostConfigError(
            str(exc),
            "pass --lock-dir (or --backend) naming a lock store you can use",
            lock_dir_problem=True,
        ) from None
    if cross_process and not isinstance(store, LockStore):
        store.close()
        raise IpcHostConfigError(
            "--cross-process reads lockyard monitor's notices from a lock directory",
            "drop --cross-process with the PostgreSQL backend",
        )
    return store


class RootLock:
    """An exclusive flock on `<root>/.lockyard-ipc-host.lock`, held while the host runs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._fd = -1

    def __enter__(self) -> RootLock:
        path = self.root / HOST_LOCK
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise IpcHostConfigError(
                f"another lockyard ipc-host (pid {holder}) already serves {self.root}",
                "stop it first, or serve another --root",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
