"""A real PostgreSQL server for the tests: `LOCKYARD_TEST_PG_DSN`, else a throwaway cluster.

Every test gets a schema of its own on the one server of the test session (a worker), so
tests never see each other's locks and no test pays for a server start. Without server
binaries and without `LOCKYARD_TEST_PG_DSN` the fixture fails: the PostgreSQL tests are part
of the suite and are never skipped.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest

from lockyard.infra.lockstore.postgres.cluster import ThrowawayCluster
from lockyard.infra.lockstore.postgres.listener import close_listeners

TEST_DSN_ENV = "LOCKYARD_TEST_PG_DSN"


@dataclass
class PgServer:
    dsn: str
    cluster: ThrowawayCluster | None

    def spec(self, schema: str) -> str:
        separator = "&" if "?" in self.dsn else "?"
        return f"{self.dsn}{separator}lockyard_schema={schema}"

    def drop_schema(self, schema: str) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    dsn = os.environ.get(TEST_DSN_ENV, "").strip()
    if dsn:
        yield PgServer(dsn, None)
        return
    cluster = ThrowawayCluster().start()
    try:
        yield PgServer(cluster.dsn, cluster)
    finally:
        close_listeners()
        cluster.destroy()


@pytest.fixture
def pg_schema(pg_server: PgServer) -> Iterator[str]:
    """A fresh schema name for this test; dropped (with every lock in it) afterwards."""
    schema = f"t_{secrets.token_hex(6)}"
    yield schema
    close_listeners()
    pg_server.drop_schema(schema)


@pytest.fixture
def pg_backend(pg_server: PgServer, pg_schema: str) -> str:
    """A backend spec (`postgresql://...?lockyard_schema=...`) private to this test."""
    return pg_server.spec(pg_schema)
