"""Find and open the lock directory an operator command works on, read-only first.

The directory is checked before the store touches it, so a typo in `--lock-dir` never
creates an empty lock directory somewhere. A directory that does not exist yet is a normal
state (no agent has locked anything there): the commands report it as empty.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..infra.lockstore import (
    BackendError,
    InvalidAgentIdError,
    LockStoreError,
    chosen_spec,
    is_postgres_spec,
    open_backend,
)
from ._errors import CliError, ExitCode

if TYPE_CHECKING:  # a store loads pydantic: `log` and `stats` only read the journal
    from ..infra.lockstore import LockBackend

LOCK_DIR_ENV = "LOCKYARD_LOCK_DIR"
LOCK_DIR_HELP = (
    "The lock directory (default: $LOCKYARD_LOCK_DIR, else the lock store's per-user "
    "runtime directory)."
)


def resolve_lock_dir(option: Path | None) -> Path:
    """`--lock-dir`, else $LOCKYARD_LOCK_DIR, else the store's per-user default."""
    if option is not None:
        return option
    from_env = os.environ.get(LOCK_DIR_ENV)
    if from_env and not from_env.strip():  # Path("  ") would be a stray relative directory
        raise CliError(f"{LOCK_DIR_ENV} is blank", ExitCode.USAGE, "unset it or set it to a path")
    if from_env:
        return Path(from_env)
    from ..infra.lockstore import default_lock_dir  # not at the top: `log` on PostgreSQL

    return Path(default_lock_dir())


class LockDirNotCreatedError(Exception):
    """The lock directory (or PostgreSQL schema) does not exist yet: nothing was ever locked
    there."""

    def __init__(self, path: Path | str, why: str = "the directory does not exist yet") -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


def location_source(option: Path | None, backend: str | None) -> str:
    """Why a command looks where it looks: the option, the variable, or the default."""
    if option is not None:
        return "--lock-dir"
    if backend is not None:
        return "--backend"
    if os.environ.get("LOCKYARD_BACKEND"):
        return "$LOCKYARD_BACKEND"
    if os.environ.get(LOCK_DIR_ENV):
        return f"${LOCK_DIR_ENV}"
    return "per-user default"


def check_lock_dir(lock_dir: Path) -> None:
    """Raise LockDirNotCreatedError when `lock_dir` does not exist yet, and a CliError
    (exit 3) unless it is a readable directory."""
    hint = f"pass --lock-dir DIR or set {LOCK_DIR_ENV} to the directory your agents lock in"
    try:
        os.stat(lock_dir)
    except (FileNotFoundError, NotADirectoryError):
        pass  # reported just below
    except OSError as error:  # a name too long, a symlink loop, no permission on the way
        raise CliError(
            f"lock directory {lock_dir} cannot be used: {error.strerror}", ExitCode.LOCK_DIR, hint
        ) from None
    if not lock_dir.exists() and not lock_dir.is_symlink():
        raise LockDirNotCreatedError(lock_dir)
    if not lock_dir.is_dir():
        raise CliError(f"{lock_dir} is not a directory", ExitCode.LOCK_DIR, hint)
    if not os.access(lock_dir, os.R_OK | os.X_OK):
        raise CliError(
            f"lock directory {lock_dir} is not readable by this user",
            ExitCode.LOCK_DIR,
            "run as the user that owns it",
        )


@contextmanager
def store_errors() -> Iterator[None]:
    """Turn the store's typed errors into one-line CLI errors (never a traceback)."""
    try:
        yield
    except InvalidAgentIdError as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    except BackendError as error:
        raise CliError(str(error), ExitCode.BACKEND) from None
    except ValueError as error:  # a backend spec that cannot be used
        raise CliError(str(error), ExitCode.USAGE) from None
    except LockStoreError as error:
        raise CliError(str(error), ExitCode.LOCK_DIR) from None


def open_store(
    option: Path | None,
    backend: str | None = None,
    *,
    read_only: bool = False,
    repo: Path | None = None,
    namespace: str | None = None,
) -> LockBackend:
    """The lock store on `--backend` (PostgreSQL, connected now so that a server that is
    down fails here), else on the resolved, checked lock directory (LockDirNotCreatedError
    when it does not exist yet). `read_only` for inspecting: the lock directory is then left
    exactly as it is (not created, its mode not tightened). `repo` and `namespace` name the
    repository whose keys the store takes (default: the working directory's)."""
    with store_errors():
        spec = chosen_spec(backend)
    if spec is not None and is_postgres_spec(spec):
        if option is not None:
            raise CliError("pass either --lock-dir or a PostgreSQL --backend", ExitCode.USAGE)
        from ..infra.lockstore.postgres import SchemaMissingError

        with store_errors():
            store = open_backend(repo, spec, namespace=namespace, read_only=read_only)
            try:
                store.connect()  # type: ignore[attr-defined]
            except SchemaMissingError as missing:  # reading only: nothing is created
                raise LockDirNotCreatedError(store.location, missing.reason) from None
            return store
    if spec is not None and spec.strip() != "file":
        option = Path(spec) if option is None else option
    lock_dir = resolve_lock_dir(option)
    check_lock_dir(lock_dir)
    from ..infra.lockstore import LockStore

    with store_errors():
        return LockStore(repo, lock_dir, namespace=namespace, read_only=read_only)
