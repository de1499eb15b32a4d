"""Checking `lockyard serve`'s configuration before anything is served.

Kept apart from the server (which imports mcp, slow to load) so that a bad configuration is
reported at once.
"""

from __future__ import annotations

from pathlib import Path

from ...crossproc.notices import NoticeBoardError, VictimNoticeBoard
from ...lockstore import (
    FILE_WORD,
    InvalidAgentIdError,
    InvalidNamespaceError,
    LockBackend,
    LockDirError,
    LockStore,
    LockStoreError,
    ProcessIdentity,
    chosen_spec,
    is_postgres_spec,
    open_backend,
    validate_agent_id,
    validate_namespace,
)

_NAMESPACE_HINT = (
    "pass --namespace NAME (or set LOCKYARD_NAMESPACE) to a short name, or leave both unset"
)


class ServeConfigError(Exception):
    """`serve` cannot start: bad agent id, repository or lock directory (nothing was served)."""

    def __init__(self, message: str, hint: str, *, lock_dir_problem: bool) -> None:
        super().__init__(message)
        self.hint = hint
        self.lock_dir_problem = lock_dir_problem


def open_serve_store(
    agent_id: str,
    repo: Path,
    lock_dir: Path | None,
    backend: str | None = None,
    owner: ProcessIdentity | None = None,
    namespace: str | None = None,
) -> LockBackend:
    """The agent's lock store, or ServeConfigError before anything is served.

    `owner`: the process its lock records name (an agent CLI session's CLI process)."""
    try:
        validate_agent_id(agent_id)
    except InvalidAgentIdError as exc:
        raise ServeConfigError(str(exc), "pass a short printable --agent-id",
                               lock_dir_problem=False) from None  # fmt: skip
    if not repo.is_dir():
        raise ServeConfigError(f"--repo {repo} is not a directory",
                               "pass the root of the repository the agent edits",
                               lock_dir_problem=False)  # fmt: skip
    try:
        if namespace is not None:
            validate_namespace(namespace)
    except InvalidNamespaceError as exc:
        raise ServeConfigError(str(exc), _NAMESPACE_HINT, lock_dir_problem=False) from None
    spec = chosen_spec(backend)
    if spec is not None and is_postgres_spec(spec):
        if lock_dir is not None:
            raise ServeConfigError("pass either --lock-dir or a PostgreSQL --backend",
                                   "drop one of them", lock_dir_problem=False)  # fmt: skip
        try:
            store = open_backend(str(repo), spec, namespace=namespace)
            return store.connect()  # type: ignore[attr-defined, no-any-return]
        except LockStoreError as exc:
            raise ServeConfigError(str(exc), _backend_hint(exc), lock_dir_problem=True) from None
    try:
        named = None if spec is None or spec.strip() == FILE_WORD else spec
        store = LockStore(
            str(repo),
            lock_dir if lock_dir is not None else named,
            owner=owner,
            namespace=namespace,
        )
        VictimNoticeBoard(store.lock_dir).ensure()
    except InvalidNamespaceError as exc:
        raise ServeConfigError(str(exc), _NAMESPACE_HINT, lock_dir_problem=False) from None
    except (LockDirError, NoticeBoardError) as exc:
        hint = "pass --lock-dir (or set LOCKYARD_LOCK_DIR) to a private directory of yours"
        raise ServeConfigError(str(exc), hint, lock_dir_problem=True) from None
    return store


def _backend_hint(error: LockStoreError) -> str:
    """What to do about a PostgreSQL backend that cannot be used: the server is up and says
    no (a privilege, a schema not lockyard's) or it cannot be reached."""
    from ...lockstore.postgres import BackendSpecError, PrivilegeError, SchemaError

    if isinstance(error, PrivilegeError):
        return "grant the role what the message lists, or name another role in --backend"
    if isinstance(error, SchemaError):
        return "name another schema (?lockyard_schema=NAME in --backend), or fix the one named"
    if isinstance(error, BackendSpecError):
        return "fix --backend"
    return "start the server or fix --backend"
