"""A location that cannot work is one line saying so, never a traceback (issue 33, point 9):
a PostgreSQL URI libpq refuses, `postgresql://` (libpq's defaults), a NUL byte in a lock
directory given to the Python API or in a backend spec."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockyard.infra.lockstore import LockDirError, LockStore
from lockyard.infra.lockstore.postgres.dsn import BackendSpecError, parse_spec

LOCKYARD = str(Path(sys.executable).parent / "lockyard")


def test_a_bare_uri_keeps_its_slashes_for_libpq() -> None:
    assert parse_spec("postgresql://").conninfo == "postgresql://"
    assert parse_spec("postgres://?lockyard_schema=s").conninfo == "postgres://"


def test_the_query_is_passed_on_as_written_but_for_lockyards_parameter() -> None:
    spec = parse_spec("postgresql://u@h/db?options=-c%20a%3Db&lockyard_schema=team_a&sslmode=off")
    assert spec.conninfo == "postgresql://u@h/db?options=-c%20a%3Db&sslmode=off"
    assert spec.schema == "team_a"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("postgresql://u:pw@h/db?bogus=1", 'invalid URI query parameter: "bogus"'),
        ("postgresql://u:pw@h/db?sslmode", "is not a connection URI libpq accepts"),
        ("postgresql://u@h/d\x00b", "contains a NUL byte"),
    ],
)
def test_a_uri_libpq_refuses_is_refused_when_parsed(spec: str, message: str) -> None:
    with pytest.raises(BackendSpecError, match=message) as raised:
        parse_spec(spec)
    assert "pw" not in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("spec", ["postgresql://u:pw@h/db?bogus=1", "postgresql://"])
def test_the_cli_says_it_in_one_line(spec: str, tmp_path: Path) -> None:
    env = os.environ | {"PGHOST": str(tmp_path), "PGPORT": "1", "PGCONNECT_TIMEOUT": "2"}
    done = subprocess.run(
        [LOCKYARD, "status", "--backend", spec],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode in (2, 7), done.stderr
    assert done.stderr.startswith("lockyard: error: ")
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2  # the error and a hint


def test_a_lock_directory_with_a_nul_byte_is_a_lock_dir_error(tmp_path: Path) -> None:
    with pytest.raises(LockDirError, match="contains a NUL byte"):
        LockStore(str(tmp_path), "/x\x00y")
