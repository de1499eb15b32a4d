"""Typed errors of the lock store. Each says what was wrong and what to do instead.

Every validation error is raised before anything is written, so bad input changes nothing.
The input errors are also `ValueError`s, so callers that only know the builtin still catch them.
"""

from __future__ import annotations

from ...core.agent_ids import AgentIdError


class LockStoreError(Exception):
    """Base class of every error the lock store raises on purpose."""


class BackendError(LockStoreError):
    """A lock server (PostgreSQL) cannot be used: unreachable, refused us, or a schema that
    is not ours. Defined here so that callers can catch it without importing that backend."""


class InvalidPathError(LockStoreError, ValueError):
    """The file path is empty, not a string, contains a NUL byte, or is too long."""


class PathOutsideRepoError(InvalidPathError):
    """The path resolves outside the agent's checkout and the store does not allow that."""


class InvalidNamespaceError(LockStoreError, ValueError):
    """An explicit namespace is empty, too long, not a string, or contains `/`, NUL or
    control characters."""


class InvalidAgentIdError(LockStoreError, AgentIdError):
    """The agent id breaks the one agent id rule (`lockyard.core.agent_ids`): not a string,
    blank, too long, or with control characters."""


class InvalidTimeoutError(LockStoreError, ValueError):
    """A timeout or poll interval is not a finite number within the allowed range."""


class LockDirError(LockStoreError):
    """The lock directory is unusable or unsafe (a symlink, owned by someone else, not a
    directory), or an entry inside it is not what the store wrote there."""


class LockDirFullError(LockDirError):
    """The lock directory's file system is full (or over quota): nothing was written.
    Releasing still works; locking works again once there is space."""


class CorruptRecordError(LockStoreError):
    """A lock's holder record cannot be read as a record; the lock is left untouched."""
