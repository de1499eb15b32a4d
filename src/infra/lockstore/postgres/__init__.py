"""The PostgreSQL backend: locks of agents on many hosts, in one database.

The store, its sessions and its schema (which import psycopg, slow to load) are imported on
first use, so that choosing a backend, or running a command on the lock directory, never
pays for them; and everything outside this package enters them here, so that an install
without psycopg (the `postgres` extra) says so in one line.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ....core.extras import POSTGRES, require
from .dsn import (
    BARE_WORDS,
    BackendSpecError,
    KeepaliveBound,
    PgSpec,
    is_postgres_spec,
    parse_spec,
    redact,
)

if TYPE_CHECKING:
    from .cluster import ClusterError, ThrowawayCluster
    from .journal import PgJournal
    from .listener import close_listeners
    from .privileges import PrivilegeError
    from .schema import (
        SCHEMA_VERSION,
        SchemaError,
        SchemaMissingError,
        graph_channel,
        lock_class,
        namespace_channel,
    )
    from .session import BackendUnavailableError
    from .store import PgLockStore

_LAZY = {
    "ClusterError": ".cluster",
    "ThrowawayCluster": ".cluster",
    "PgJournal": ".journal",
    "close_listeners": ".listener",
    "SCHEMA_VERSION": ".schema",
    "SchemaError": ".schema",
    "SchemaMissingError": ".schema",
    "PrivilegeError": ".privileges",
    "graph_channel": ".schema",
    "lock_class": ".schema",
    "namespace_channel": ".schema",
    "BackendUnavailableError": ".session",
    "PgLockStore": ".store",
}

__all__ = [
    "BARE_WORDS",
    "SCHEMA_VERSION",
    "BackendSpecError",
    "BackendUnavailableError",
    "ClusterError",
    "KeepaliveBound",
    "PgJournal",
    "PgLockStore",
    "PgSpec",
    "PrivilegeError",
    "SchemaError",
    "SchemaMissingError",
    "ThrowawayCluster",
    "close_listeners",
    "graph_channel",
    "is_postgres_spec",
    "lock_class",
    "namespace_channel",
    "parse_spec",
    "redact",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        require(POSTGRES, "the PostgreSQL backend")  # one line naming the extra, if it is missing
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
