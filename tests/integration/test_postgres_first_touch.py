"""PostgreSQL as a new user meets it (issue 33, points 9 and 10), on a real server with real
least-privilege roles: a read-only command needs read rights only and creates nothing; every
refusal names each missing privilege and the GRANT statements, which, run by the owner, are
enough; a schema that holds tables lockyard did not create is named as such."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from lockyard.infra.lockstore.postgres import PgLockStore, PrivilegeError
from pg_support import PgServer

LOCKYARD = str(Path(sys.executable).parent / "lockyard")
BACKEND = 7


def lockyard(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKYARD_")}
    return subprocess.run(
        [LOCKYARD, *args], capture_output=True, text=True, timeout=240, env=env, check=False
    )


def as_role(dsn: str, role: str, password: str, schema: str) -> str:
    parts = urlsplit(dsn)
    host = parts.netloc.rsplit("@", 1)[-1]
    netloc = f"{role}:{password}@{host}"
    separator = "&" if parts.query else ""
    query = f"{parts.query}{separator}lockyard_schema={schema}"
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def owner_runs(pg_server: PgServer, *statements: str) -> None:
    """Run `statements` as the server's superuser (lockyard's schemas belong to it here)."""
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.fixture
def new_role(pg_server: PgServer, pg_schema: str) -> Iterator[Callable[[], tuple[str, str]]]:
    """Makes login roles with no rights at all; returns (role name, backend spec as it)."""
    made: list[str] = []

    def make() -> tuple[str, str]:
        role, password = f"r_{secrets.token_hex(5)}", secrets.token_hex(8)
        owner_runs(pg_server, f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        made.append(role)
        return role, as_role(pg_server.dsn, role, password, pg_schema)

    yield make
    for role in made:
        owner_runs(pg_server, f"DROP OWNED BY {role}", f"DROP ROLE {role}")


def schema_exists(pg_server: PgServer, schema: str) -> bool:
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None


def test_status_needs_only_usage_and_select(
    repo: Path, pg_server: PgServer, pg_backend: str, pg_schema: str,
    new_role: Callable[[], tuple[str, str]],
) -> None:  # fmt: skip
    reader, spec = new_role()
    with PgLockStore(repo, pg_backend) as store:
        assert store.try_lock("src/app.py", "alice")
        owner_runs(
            pg_server,
            f"GRANT USAGE ON SCHEMA {pg_schema} TO {reader}",
            f"GRANT SELECT ON ALL TABLES IN SCHEMA {pg_schema} TO {reader}",
        )
        done = lockyard("status", "--json", "--backend", spec)
        assert done.returncode == 0, done.stderr
        (lock,) = json.loads(done.stdout)["locks"]
        assert lock["holder"]["agent_id"] == "alice"
        text = lockyard("status", "--backend", spec)
        assert text.returncode == 0, text.stderr
        assert "alice" in text.stdout


def test_status_where_nothing_was_ever_locked_creates_nothing(
    pg_server: PgServer, pg_schema: str, new_role: Callable[[], tuple[str, str]]
) -> None:
    _, spec = new_role()
    for command in (("status",), ("status", "--json")):
        done = lockyard(*command, "--backend", spec)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
    assert f"lockyard's schema '{pg_schema}' does not exist in this database yet" in (
        lockyard("status", "--backend", spec).stdout
    )
    assert json.loads(lockyard("status", "--json", "--backend", spec).stdout)["locks"] == []
    assert not schema_exists(pg_server, pg_schema)


def test_creating_the_schema_names_create_on_the_database(
    pg_server: PgServer, pg_schema: str, new_role: Callable[[], tuple[str, str]]
) -> None:
    role, spec = new_role()
    done = lockyard("clean", "--backend", spec)
    assert done.returncode == BACKEND
    assert f"role '{role}' may not create lockyard's schema '{pg_schema}'" in done.stderr
    assert "it lacks CREATE on database" in done.stderr
    assert "start the server" not in done.stderr
    assert not schema_exists(pg_server, pg_schema)


def test_each_refusal_names_the_missing_privileges_and_its_grants_are_enough(
    repo: Path, pg_server: PgServer, pg_backend: str, pg_schema: str,
    new_role: Callable[[], tuple[str, str]],
) -> None:  # fmt: skip
    with PgLockStore(repo, pg_backend) as store:
        store.connect()  # the owner creates the schema
    role, spec = new_role()
    reading = lockyard("status", "--backend", spec)
    assert reading.returncode == BACKEND
    assert f"role '{role}' may not read the locks in schema '{pg_schema}'" in reading.stderr
    assert f"USAGE on schema {pg_schema}" in reading.stderr
    assert "SELECT on tables" in reading.stderr
    assert "INSERT" not in reading.stderr  # reading asks for no more than reading needs
    locking = lockyard("clean", "--backend", spec)
    assert locking.returncode == BACKEND
    assert f"role '{role}' may not lock and release in schema '{pg_schema}'" in locking.stderr
    assert "SELECT, INSERT, UPDATE, DELETE on tables" in locking.stderr
    assert "USAGE on sequences" in locking.stderr
    for output in (reading.stderr, locking.stderr):
        assert "Traceback" not in output
        assert len(output.strip().splitlines()) <= 2
    grants = locking.stderr.split("As the schema's owner: ")[1].split(" (docs/")[0]
    owner_runs(pg_server, *grants.split("; "))
    assert lockyard("clean", "--backend", spec).returncode == 0
    assert lockyard("status", "--backend", spec).returncode == 0
    with PgLockStore(repo, spec) as store:
        assert store.try_lock("a.py", "bob")
        assert store.release("a.py", "bob")


def test_the_python_api_raises_a_privilege_error(
    repo: Path, pg_backend: str, new_role: Callable[[], tuple[str, str]]
) -> None:
    with PgLockStore(repo, pg_backend) as store:
        store.connect()
    _, spec = new_role()
    with PgLockStore(repo, spec) as store, pytest.raises(PrivilegeError, match="it lacks"):
        store.try_lock("a.py", "bob")


def test_serve_tells_a_refused_role_what_to_grant_not_to_start_the_server(
    repo: Path, new_role: Callable[[], tuple[str, str]]
) -> None:
    _, spec = new_role()
    done = subprocess.run(
        [LOCKYARD, "serve", "--backend", spec, "--repo", str(repo), "--agent-id", "a"],
        capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "it lacks CREATE on database" in done.stderr
    assert "start the server" not in done.stderr
    assert "grant the role what the message lists" in done.stderr


@pytest.mark.parametrize(
    ("foreign", "what"),
    [
        ("CREATE TABLE {s}.meta (id int, name text)", "a table meta with no integer column"),
        ("CREATE TABLE {s}.holds (id int)", "relation holds already exists"),
    ],
)
def test_a_schema_holding_tables_lockyard_did_not_create_says_so(
    pg_server: PgServer, pg_backend: str, pg_schema: str, foreign: str, what: str
) -> None:
    owner_runs(pg_server, f"CREATE SCHEMA {pg_schema}", foreign.format(s=pg_schema))
    for command in ("status", "clean"):
        done = lockyard(command, "--backend", pg_backend)
        if command == "status" and "holds" in foreign:
            assert done.returncode == 0  # no meta table: lockyard's schema is not there yet
            continue
        assert done.returncode == BACKEND, done.stderr
        assert what in done.stderr
        assert "which lockyard did not create" in done.stderr
        assert "lockyard_schema=NAME" in done.stderr
        assert "unavailable" not in done.stderr
