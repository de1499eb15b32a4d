"""What a PostgreSQL role lacks to use lockyard's schema, named privilege by privilege.

The server's own message (`permission denied for table holds`) names one object and not the
privilege; a person setting up a least-privilege role needs the whole list and the statements
that grant it. So when the server refuses lockyard for want of a privilege, lockyard asks the
catalog (`has_*_privilege`, which any role may call) what the current role lacks for what it
was doing, and says that:

- reading (`lockyard status`): USAGE on the schema, SELECT on its tables;
- locking (every other command): also INSERT, UPDATE and DELETE on the tables, USAGE and
  UPDATE on the sequences, EXECUTE on the functions;
- creating the schema (the first command that locks in a database): CREATE on the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import psycopg

from ..errors import BackendError

GUIDE: Final = "docs/postgres.md, Least-privilege setup"
READ_TABLES: Final = ("holds", "readers", "waiters", "globs", "notices", "activity", "meta")
"""The tables a read-only command reads (`lockyard status`: locks, reads, queues, globs, victim
notices, heartbeats, the policy)."""


class PrivilegeError(BackendError):
    """The server is up and refused lockyard for want of a privilege; the text names each
    missing privilege and the GRANT statements that give it."""


@dataclass(frozen=True)
class _Missing:
    privileges: tuple[str, ...]
    kind: str
    """"database", "schema", "table", "sequence" or "function"."""
    names: tuple[str, ...]

    def describe(self) -> str:
        plural = "" if len(self.names) == 1 or self.kind in ("database", "schema") else "s"
        return f"{', '.join(self.privileges)} on {self.kind}{plural} {', '.join(self.names)}"


def _ident(name: str) -> str:
    plain = name.isidentifier() and name == name.lower() and name.isascii()
    return name if plain else '"' + name.replace('"', '""') + '"'


# Every check goes by oid: a name would have to be looked up in the schema, which a role
# without USAGE on it may not do. A CASE keeps the server from asking a sequence question
# of a table (it may test conditions in any order).
_TABLES = """SELECT relname, array_remove(ARRAY[
    CASE WHEN NOT has_table_privilege(oid, 'SELECT') THEN 'SELECT' END,
    CASE WHEN %(write)s AND NOT has_table_privilege(oid, 'INSERT') THEN 'INSERT' END,
    CASE WHEN %(write)s AND NOT has_table_privilege(oid, 'UPDATE') THEN 'UPDATE' END,
    CASE WHEN %(write)s AND NOT has_table_privilege(oid, 'DELETE') THEN 'DELETE' END], NULL)
FROM pg_class WHERE relnamespace = %(namespace)s AND relkind IN ('r', 'p')
    AND (%(write)s OR relname = ANY(%(read)s)) ORDER BY relname"""
_SEQUENCES = """SELECT relname, ARRAY['USAGE'] FROM pg_class
WHERE relnamespace = %(namespace)s AND %(write)s
    AND CASE WHEN relkind = 'S' THEN NOT has_sequence_privilege(oid, 'USAGE') END
ORDER BY relname"""
_FUNCTIONS = """SELECT DISTINCT proname, ARRAY['EXECUTE'] FROM pg_proc
WHERE pronamespace = %(namespace)s AND %(write)s AND NOT has_function_privilege(oid, 'EXECUTE')
ORDER BY proname"""


def missing_privileges(
    conn: psycopg.Connection[Any], schema: str, *, write: bool
) -> list[_Missing]:
    """What the current role lacks to read (`write` False) or use lockyard's `schema`."""
    database, may_create = conn.execute(
        "SELECT current_database(), has_database_privilege(current_database(), 'CREATE')"
    ).fetchone() or ("", True)
    row = conn.execute(
        "SELECT oid, has_schema_privilege(oid, 'USAGE') FROM pg_namespace WHERE nspname = %s",
        (schema,),
    ).fetchone()
    if row is None:
        return [] if not write or may_create else [_Missing(("CREATE",), "database", (database,))]
    namespace, usage = row
    found = [] if usage else [_Missing(("USAGE",), "schema", (schema,))]
    params = {"namespace": namespace, "write": write, "read": list(READ_TABLES)}
    for kind, query in (("table", _TABLES), ("sequence", _SEQUENCES), ("function", _FUNCTIONS)):
        lacking: dict[str, list[str]] = {}
        for name, privileges in conn.execute(query, params).fetchall():
            for privilege in privileges:
                lacking.setdefault(privilege, []).append(f"{schema}.{name}")
        if lacking:
            names = sorted({name for group in lacking.values() for name in group})
            found.append(_Missing(tuple(lacking), kind, tuple(names)))
    return found


def _grant(missing: _Missing, schema: str, role: str) -> str:
    privileges = ", ".join(missing.privileges)
    target = {
        "database": f"DATABASE {_ident(missing.names[0])}",
        "schema": f"SCHEMA {_ident(schema)}",
        "table": f"ALL TABLES IN SCHEMA {_ident(schema)}",
        "sequence": f"ALL SEQUENCES IN SCHEMA {_ident(schema)}",
        "function": f"ALL FUNCTIONS IN SCHEMA {_ident(schema)}",
    }[missing.kind]
    return f"GRANT {privileges} ON {target} TO {_ident(role)}"


def privilege_error(
    conn: psycopg.Connection[Any],
    where: str,
    schema: str,
    *,
    write: bool,
    refusal: psycopg.Error,
) -> PrivilegeError:
    """The error to raise after the server refused lockyard for want of a privilege."""
    doing = "lock and release" if write else "read the locks"
    refused = " ".join(str(refusal).split())
    try:
        (role,) = conn.execute("SELECT current_user").fetchone() or ("?",)
        found = missing_privileges(conn, schema, write=write)
    except psycopg.Error:  # the catalog itself refused: say what the server said
        found, role = [], "this role"
    if not found:
        return PrivilegeError(
            f"PostgreSQL at {where} refused role {role!r} ({refused}) while it tried to {doing} "
            f"in schema {schema!r}; see {GUIDE}"
        )
    lacks = "; ".join(missing.describe() for missing in found)
    grants = "; ".join(_grant(missing, schema, str(role)) for missing in found)
    if found[0].kind == "database":
        return PrivilegeError(
            f"PostgreSQL at {where}: role {role!r} may not create lockyard's schema {schema!r} "
            f"(the first command that locks in a database creates it): it lacks {lacks}. Grant "
            f"it ({grants}), or run a command that locks once as a role that has it ({GUIDE})"
        )
    return PrivilegeError(
        f"PostgreSQL at {where}: role {role!r} may not {doing} in schema {schema!r}: it lacks "
        f"{lacks}. As the schema's owner: {grants} ({GUIDE})"
    )
