"""PostgreSQL matches globs exactly as the lock directory does: the pattern stored per glob
(postgres/glob_pattern.py, tested in SQL) agrees with `pathspec` (scope_keys.glob_matches),
and schema.py's order of the keys above a key and its test of what is below a glob agree with
`scope_keys.is_above`, over drawn globs and paths."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockyard.infra.lockstore.postgres.glob_pattern import pg_glob_pattern
from lockyard.infra.lockstore.postgres.schema import ensure_schema
from lockyard.infra.lockstore.scope_keys import (
    glob_matches,
    glob_prefix,
    glob_problem,
    is_above,
    places_above,
    scope_of,
    split_glob,
)
from pg_support import PgServer

SCHEMA = "t_glob_matching"
NS = "repo"

# Few letters, so that drawn globs and paths meet; the characters that mean something to a
# regular expression or to gitignore ('.', '[', ']', ' ', '-', '#', '+', '\\'), a non-ASCII
# one, and '*' and '?' in globs.
_FILE_CHARS = "ab.[] é-#+"
_component = st.text(_FILE_CHARS, min_size=1, max_size=3).filter(lambda c: c not in (".", ".."))
_glob_component = st.one_of(
    _component,
    st.sampled_from(["*", "**", "?", "*.a", "a*", "?b", "*a*", "a?.b", "[a]*"]),
)
_paths = st.builds(
    lambda lead, parts: lead + "/".join(parts),
    st.sampled_from(["", "", "", "/", "./"]),
    st.lists(_component, min_size=1, max_size=4),
)


def _valid(glob: str) -> bool:
    split = split_glob(glob)
    return split is not None and glob_problem(glob, split[1]) is None


_globs = st.lists(_glob_component, min_size=1, max_size=4).map("/".join).filter(_valid)


@pytest.fixture(scope="module")
def conn(pg_server: PgServer) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_server.dsn, autocommit=True) as connection:
        ensure_schema(connection, SCHEMA)
        yield connection
        connection.execute(f'DROP SCHEMA "{SCHEMA}" CASCADE')


@settings(max_examples=100)
@given(glob=_globs, paths=st.lists(_paths, min_size=1, max_size=12))
def test_postgresql_matches_a_glob_exactly_as_pathspec_does(
    conn: psycopg.Connection[tuple[object, ...]], glob: str, paths: list[str]
) -> None:
    rows = conn.execute(
        f'SELECT k, "{SCHEMA}".glob_matches(%s, k) FROM unnest(%s::text[]) AS k',
        (pg_glob_pattern(glob), paths),
    ).fetchall()
    assert {str(k): bool(m) for k, m in rows} == {p: glob_matches(glob, p) for p in paths}


def _scoped_keys() -> st.SearchStrategy[str]:
    directories = st.lists(_component, min_size=1, max_size=3).map(lambda p: "/".join(p) + "/")
    return st.one_of(_globs, directories)


@settings(max_examples=50)
@given(
    locked=st.lists(_globs, min_size=1, max_size=6, unique=True),
    keys=st.lists(
        st.one_of(_paths.filter(lambda p: p[:1] not in "/."), _scoped_keys()), max_size=8
    ),
)
def test_the_keys_above_and_below_are_scope_keys_own_in_its_order(
    conn: psycopg.Connection[tuple[object, ...]], locked: list[str], keys: list[str]
) -> None:
    """scopes_above: the directories over a key and the indexed globs above it, outermost
    first (a directory before the globs of its scope, globs in key order); is_below: what a
    glob is above, among the keys of its literal directory's range."""
    with conn.transaction():
        conn.execute(f'DELETE FROM "{SCHEMA}".globs')
        for glob in locked:
            conn.execute(
                f'INSERT INTO "{SCHEMA}".globs VALUES (%s, %s, %s, %s)',
                (NS, glob_prefix(glob), glob, pg_glob_pattern(glob)),
            )
    for key in keys + locked:
        above = conn.execute(
            f'SELECT k FROM "{SCHEMA}".scopes_above(%s, %s) AS k', (NS, key)
        ).fetchall()
        candidates = [place for place in places_above(key) if place] + locked
        expected = sorted(
            {c for c in candidates if is_above(c, key)},
            key=lambda c: (len(scope_of(c) or ""), not c.endswith("/"), c),
        )
        assert [str(row[0]) for row in above] == expected, key
    for glob in locked:
        prefix = glob_prefix(glob)
        for key in keys + locked:
            if not key.startswith(prefix) or key == prefix:
                continue  # outside the glob's range: below_blocker never asks
            (below,) = conn.execute(
                f'SELECT "{SCHEMA}".is_below(%s, %s, %s)', (glob, pg_glob_pattern(glob), key)
            ).fetchone() or (None,)
            assert below == is_above(glob, key), (glob, key)


def test_a_glob_whose_index_entry_went_is_taken_only_once_it_is_written_again(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    """A glob's index entry goes with its last hold (release_glob); a take of the glob that
    finds it gone (its client wrote it, then the glob's last holder let it go) takes nothing
    and says 'unindexed', so no glob is ever held that file takes cannot find."""
    s, glob = f'"{SCHEMA}"', "lib/*.py"
    (me,) = conn.execute(f"SELECT {s}.open_session()").fetchone() or (0,)

    def take(key: str, agent: str) -> str:
        params = (NS, key, agent, f"t-{agent}", 1, None, "h", None, None, "/r", False, me)
        (outcome,) = conn.execute(
            f"SELECT outcome FROM {s}.take({', '.join(['%s'] * 12)})", params
        ).fetchone() or (None,)
        return str(outcome)

    def indexed() -> bool:
        return (
            conn.execute(f"SELECT 1 FROM {s}.globs WHERE key = %s", (glob,)).fetchone() is not None
        )

    assert take(glob, "ann") == "unindexed"
    assert conn.execute(f"SELECT 1 FROM {s}.holds WHERE key = %s", (glob,)).fetchone() is None
    index = f"INSERT INTO {s}.globs VALUES (%s, %s, %s, %s)"
    conn.execute(index, (NS, glob_prefix(glob), glob, pg_glob_pattern(glob)))
    assert take(glob, "ann") == "granted"
    assert take("lib/a.py", "bob") == "busy"  # the file take finds the glob by its entry
    assert conn.execute(
        f"SELECT {s}.release_glob(%s, %s, 'bob', %s)", (NS, glob, me)
    ).fetchone() == (False,)
    assert indexed()  # not bob's to release: ann still holds it
    assert conn.execute(
        f"SELECT {s}.release_glob(%s, %s, 'ann', %s)", (NS, glob, me)
    ).fetchone() == (True,)
    assert not indexed()
    assert take("lib/a.py", "bob") == "granted"
