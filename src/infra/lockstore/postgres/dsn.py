"""Backend specs for PostgreSQL: parsing, redaction, and the connection settings lockyard adds.

A spec is a libpq connection URI (`postgresql://user@host:5432/db?sslmode=require`) or the
bare word `postgresql` (libpq's own defaults: PGHOST, PGUSER, PGPASSWORD, PGSSLMODE... from
the environment). One parameter is lockyard's, not libpq's, and is taken out before the
rest goes to libpq: `lockyard_schema` (default `lockyard`), the schema of lockyard's tables.

A password (in the URI or `password=`) never appears in what `redact` returns, which is what
every log line, error message and `lockyard status` shows.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from ..errors import LockStoreError

URI_PREFIXES: Final = ("postgresql://", "postgres://")
BARE_WORDS: Final = ("postgresql", "postgres")
SCHEMA_PARAM: Final = "lockyard_schema"
DEFAULT_SCHEMA: Final = "lockyard"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

LIVENESS_ENV: Final = "LOCKYARD_PG_LIVENESS_SECONDS"
DEFAULT_LIVENESS_SECONDS: Final = 10
"""How long a cut-off or silently dead client keeps its locks at most (see `KeepaliveBound`)."""


class BackendSpecError(LockStoreError, ValueError):
    """A backend spec that cannot be used; the message says what to pass instead."""


def is_postgres_spec(spec: str) -> bool:
    text = spec.strip()
    return text.lower() in BARE_WORDS or text.lower().startswith(URI_PREFIXES)


@dataclass(frozen=True)
class KeepaliveBound:
    """TCP keepalive and user-timeout settings that bound how long a dead peer goes unseen.

    Set on both ends of every lockyard connection: libpq's `keepalives*` / `tcp_user_timeout`
    on the client, the server's `tcp_keepalives_*` / `tcp_user_timeout` through `SET` on the
    session. After `seconds` without an answer from a client, the server drops its session,
    and with it the client's locks; the client, likewise, learns its connection is gone.
    """

    seconds: int = DEFAULT_LIVENESS_SECONDS

    @classmethod
    def from_env(cls) -> KeepaliveBound:
        raw = os.environ.get(LIVENESS_ENV, "").strip()
        if not raw:
            return cls()
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if not 3 <= value <= 3600:
            raise BackendSpecError(
                f"{LIVENESS_ENV}={raw!r} is not a whole number of seconds from 3 to 3600"
            )
        return cls(value)

    # A silent peer is given up after idle + count * interval seconds, at most `seconds`.
    @property
    def idle(self) -> int:
        return max(1, self.seconds // 3)

    @property
    def count(self) -> int:
        return 2

    @property
    def interval(self) -> int:
        return max(1, (self.seconds - self.idle) // self.count)

    def client_params(self) -> dict[str, str]:
        return {
            "keepalives": "1",
            "keepalives_idle": str(self.idle),
            "keepalives_interval": str(self.interval),
            "keepalives_count": str(self.count),
            "tcp_user_timeout": str(self.seconds * 1000),
        }

    def server_settings(self) -> dict[str, str]:
        return {
            "tcp_keepalives_idle": str(self.idle),
            "tcp_keepalives_interval": str(self.interval),
            "tcp_keepalives_count": str(self.count),
            "tcp_user_timeout": str(self.seconds * 1000),
        }


@dataclass(frozen=True)
class PgSpec:
    """A parsed PostgreSQL backend spec: what libpq gets, and lockyard's schema."""

    conninfo: str
    schema: str
    display: str

    def __str__(self) -> str:
        return self.display

    def __repr__(self) -> str:
        return f"PgSpec({self.display!r}, schema={self.schema!r})"


def parse_spec(spec: str, schema: str | None = None) -> PgSpec:
    """Split `spec` into libpq's conninfo and lockyard's schema; refuse what cannot work."""
    text = spec.strip()
    found_schema = None
    if "\x00" in text:
        raise BackendSpecError("the backend spec contains a NUL byte; remove it")
    if text.lower() in BARE_WORDS:
        conninfo = ""
    elif text.lower().startswith(URI_PREFIXES):
        # The query is filtered as text, not re-encoded: libpq decodes %XX but not `+`, and
        # a URI with nothing after `//` must keep it (`postgresql://` is libpq's defaults).
        base, _, query = text.partition("?")
        kept = []
        for item in filter(None, query.split("&")):
            name, _, value = item.partition("=")
            if unquote(name) == SCHEMA_PARAM:
                found_schema = unquote(value)
            else:
                kept.append(item)
        conninfo = base + ("?" + "&".join(kept) if kept else "")
        _check_conninfo(text, conninfo)
    else:
        raise BackendSpecError(
            f"{redact(text)!r} is not a PostgreSQL backend: pass a URI such as "
            "postgresql://user@host:5432/dbname, or the word postgresql for libpq's defaults"
        )
    chosen = schema or found_schema or DEFAULT_SCHEMA
    if not _SCHEMA_NAME.fullmatch(chosen):
        raise BackendSpecError(
            f"{SCHEMA_PARAM}={chosen!r} is not a plain schema name: use lower-case letters, "
            "digits and _ (up to 63, not starting with a digit)"
        )
    return PgSpec(conninfo=conninfo, schema=chosen, display=redact_conninfo(conninfo, chosen))


def _check_conninfo(spec: str, conninfo: str) -> None:
    """Refuse, in one line, a URI libpq would refuse (an unknown parameter, a bad port)."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(conninfo)
    except ProgrammingError as exc:
        why = _one_line(redact(str(exc)))
        raise BackendSpecError(
            f"{redact(spec)!r} is not a connection URI libpq accepts ({why}): "
            "pass postgresql://user@host:5432/dbname with libpq's parameters after ? (and "
            f"lockyard's {SCHEMA_PARAM}=NAME), or the word postgresql for libpq's defaults"
        ) from None


def redact(spec: str) -> str:
    """`spec` with any password replaced by `***` (for messages about a spec we refuse)."""
    text = re.sub(r"(://[^:/@?#]*:)[^@/?#]*@", r"\1***@", spec)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", text, flags=re.I)


def redact_conninfo(conninfo: str, schema: str = DEFAULT_SCHEMA) -> str:
    """What a user may be shown of a connection: `postgresql://user@host:port/db`, never the
    password; libpq's environment fills in what the spec leaves out."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(conninfo)
    except Exception:
        return redact(conninfo) or "postgresql (libpq defaults)"
    host = str(params.get("host") or os.environ.get("PGHOST") or "localhost")
    port = str(params.get("port") or os.environ.get("PGPORT") or "5432")
    user = str(params.get("user") or os.environ.get("PGUSER") or "")
    db = str(params.get("dbname") or os.environ.get("PGDATABASE") or user or "")
    who = f"{user}@" if user else ""
    suffix = "" if schema == DEFAULT_SCHEMA else f" (schema {schema})"
    return f"postgresql://{who}{host}:{port}/{db}{suffix}"


def _one_line(text: str) -> str:
    return " ".join(text.split())
