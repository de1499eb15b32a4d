"""The PostgreSQL backend: locks of agents on many hosts, in one database.

The store, its sessions and its schema (which import psycopg, slow to load) are imported on
first use, so that choosing a backend, or running a command on the lock directory, never
pays for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .dsn import BackendSpecError, KeepaliveBound, PgSpec, is_postgres_spec, parse_spec, redact

if TYPE_CHECKING:
    from .schema import SCHEMA_VERSION, SchemaError
    from .session import BackendUnavailableError
    from .store import PgLockStore

_LAZY = {
    "SCHEMA_VERSION": ".schema",
    "SchemaError": ".schema",
    "BackendUnavailableError": ".session",
    "PgLockStore": ".store",
}

__all__ = [
    "SCHEMA_VERSION",
    "BackendSpecError",
    "BackendUnavailableError",
    "KeepaliveBound",
    "PgLockStore",
    "PgSpec",
    "SchemaError",
    "is_postgres_spec",
    "parse_spec",
    "redact",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
