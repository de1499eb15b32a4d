"""The PostgreSQL backend: locks of agents on many hosts, in one database."""

from .dsn import BackendSpecError, KeepaliveBound, PgSpec, is_postgres_spec, parse_spec, redact
from .schema import SCHEMA_VERSION, SchemaError
from .session import BackendUnavailableError
from .store import PgLockStore

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
