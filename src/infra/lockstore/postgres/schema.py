"""lockyard's objects in PostgreSQL: one schema, created and versioned on first use.

Tables (UNLOGGED: a lock outlives no server crash, since every session dies with it; skipping
the WAL makes a grant cost no disk write):
  holds     one row per lock ever taken (namespace, key): its exclusive holder (agent,
            owning session, grant token; all empty while the lock is free), its last
            fencing number, which the row keeps across releases, and its count of readers
  readers   one row per shared hold (a reader), changed only under its lock's row lock
  waiters   one row per queued wait, ordered by `ticket` (arrival order)
  notices   one victim notice per agent, posted by `lockyard monitor`
  activity  each agent's last heartbeat (a lock tool call)
  revocations  locks revoked from an agent, with why, until it is told
  meta      the schema's version and the policy (`idle_limit`, seconds; NULL: off)
  journal   the record of lock changes, written by triggers (journal_schema.py)
Sequences: `fence_seq` (fencing numbers; logged, so they keep growing across restarts),
`ticket_seq`, `session_seq`. Functions do each operation in one round trip; the two hot
paths (take a free lock, release) are plain statements of the store instead (store.py).

Liveness: every lockyard connection holds a session advisory lock on (class, session number)
for as long as it lives. A row's owner is alive while that lock is held, which anyone can
test without privileges and in O(1) with `pg_try_advisory_xact_lock_shared`: it succeeds
only when no session holds the exclusive lock, i.e. when the owner's session has ended.

Versions: `meta` records the schema's version. `ddl` creates the current version directly;
a schema made by an older lockyard is brought forward by `UPGRADES`, one step per version.
Creation and upgrade are safe when many clients start at once: the first takes an advisory
lock and does its work in one transaction; the others wait on that lock, then find the
version row. A schema whose version is newer than this lockyard's is refused, never altered.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping
from typing import Any, Final

import psycopg

from ..errors import BackendError
from .journal_schema import JOURNAL_DDL

UPGRADES: Final[Mapping[int, str]] = {}
"""Version N's step from version N-1 (statements filled in like the DDL's), for schemas that
older lockyards made. None yet: lockyard was never released, and its first release ships
version 1. A change to the schema after that edits the DDL below (a new schema is made as it
is then) and adds its step here; test_postgres_upgrade.py shows a step running."""


def latest_version(upgrades: Mapping[int, str]) -> int:
    """The version `upgrades` lead to: version 1, then one more per step."""
    return 1 + len(upgrades)


SCHEMA_VERSION: Final = latest_version(UPGRADES)


class SchemaError(BackendError):
    """lockyard's schema in the database cannot be used (too new, or not ours)."""


def lock_class(schema: str) -> int:
    """The advisory-lock class (first key) of one lockyard schema, a signed 32-bit number."""
    return zlib.crc32(f"lockyard:{schema}".encode()) - 2**31


def scope_class(schema: str) -> int:
    """The advisory-lock class of one schema's scope locks (`scope_guard`): a class of their
    own, so that a namespace's key never meets a session number of `lock_class`."""
    return zlib.crc32(f"lockyard-scopes:{schema}".encode()) - 2**31


def channel_prefix(schema: str) -> str:
    return "ly_" + hashlib.sha256(schema.encode()).hexdigest()[:12]


def namespace_channel(schema: str, namespace: str) -> str:
    """The NOTIFY channel of one namespace (grants and victim notices of its agents)."""
    digest = hashlib.sha256(f"{schema}/{namespace}".encode(errors="surrogatepass"))
    return f"{channel_prefix(schema)}_{digest.hexdigest()[:24]}"


def journal_channel(schema: str) -> str:
    """The NOTIFY channel of the journal: a record was written (`lockyard log --follow`)."""
    return f"{channel_prefix(schema)}_journal"


def graph_channel(schema: str) -> str:
    """The NOTIFY channel `lockyard monitor` listens on: a wait began or a lock changed hands."""
    return f"{channel_prefix(schema)}_graph"


# The DDL below is written with placeholders that `_fill` replaces: {s} the quoted schema,
# {cls} its advisory-lock class, {prefix} its channel prefix, {schema} its plain name and
# {graph} the monitor's channel.

# The tables and sequences.
_TABLES: Final = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE {s}.meta (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    version integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    idle_limit double precision CHECK (idle_limit > 0)
);
CREATE SEQUENCE {s}.session_seq AS integer MINVALUE 1 CYCLE;
CREATE SEQUENCE {s}.fence_seq AS bigint;
CREATE SEQUENCE {s}.ticket_seq AS bigint;

-- A lock's row is made by its first grant and never deleted: a release empties the holder's
-- columns (a free lock has a NULL agent_id) and the next grant writes itself into the row.
-- So every grant but the first draws its fencing number while it holds the row's lock, above
-- the row's last one, and the numbers of one lock grow whatever the timing of the grants.
-- `queued`: someone queued behind this hold, so its release must hand the lock on; without
-- it (the common case) a release is a bare update. Set under the row's lock by whoever
-- queues. `recorded`: flipped by a change that wrote its own journal record, so that the
-- journal's triggers skip it (journal_schema.py). `pending`: set while the holder written in
-- still waits for readers (or, for a directory, for the holds under it) to leave: when its
-- wait began; cleared when it is granted (`wait_over`). No index on agent_id: finding an agent's
-- locks scans the locks of the one repository set, which is cheap, while every grant would
-- pay for the index.
CREATE UNLOGGED TABLE {s}.holds (
    namespace text NOT NULL,
    key text COLLATE "C" NOT NULL,
    agent_id text,
    session integer,
    token text,
    fence bigint NOT NULL,
    pid integer,
    start_time bigint,
    host text,
    boot_id text,
    pid_ns text,
    acquired_at double precision,
    checkout text,
    queued boolean NOT NULL DEFAULT false,
    readers integer NOT NULL DEFAULT 0,
    recorded boolean NOT NULL DEFAULT false,
    pending double precision,
    PRIMARY KEY (namespace, key)
);
-- Shared holds. A reader is written in, counted in its lock's `readers` and given a number
-- above the lock's last one, all under the lock's row lock, and only while the lock has no
-- exclusive holder; so an exclusive grant that finds `readers = 0` under that lock excludes
-- every reader, and the hot take of a free lock needs no look at this table. An exclusive
-- holder written in while other readers remain waits for them (it is "pending": the guards
-- see the readers and refuse its writes); the last reader's release pushes it the grant. A
-- reader of a directory or glob written in while writes under it remain waits for them too:
-- its `pending` says since when, until `read_over` (the journal's wait, then hand-over).
CREATE UNLOGGED TABLE {s}.readers (
    namespace text NOT NULL,
    key text COLLATE "C" NOT NULL,
    agent_id text NOT NULL,
    session integer NOT NULL,
    token text NOT NULL,
    fence bigint NOT NULL,
    pid integer,
    start_time bigint,
    host text,
    boot_id text,
    pid_ns text,
    acquired_at double precision NOT NULL,
    checkout text,
    pending double precision,
    PRIMARY KEY (namespace, key, agent_id)
);
-- `key` is the line a waiter stands in; `want`, when set, the key it asks for, under a
-- directory lock (`key`) that another agent holds: it passes through that directory's line.
CREATE UNLOGGED TABLE {s}.waiters (
    ticket bigint PRIMARY KEY,
    namespace text NOT NULL,
    key text COLLATE "C" NOT NULL,
    agent_id text NOT NULL,
    session integer NOT NULL,
    token text NOT NULL,
    pid integer NOT NULL,
    start_time bigint,
    host text NOT NULL,
    boot_id text,
    pid_ns text,
    since double precision NOT NULL,
    checkout text,
    shared boolean NOT NULL DEFAULT false,
    want text COLLATE "C"
);
CREATE INDEX waiters_lock ON {s}.waiters (namespace, key, ticket);
CREATE INDEX waiters_token ON {s}.waiters (token);
-- Heartbeats: when each agent last made a lock tool call (one upsert per call at most).
CREATE UNLOGGED TABLE {s}.activity (
    agent_id text PRIMARY KEY,
    at double precision NOT NULL
);
-- Locks revoked from an agent (`lockyard clean --agent`, the idle limit), until its process
-- tells it why; the guards read the reason meanwhile.
CREATE UNLOGGED TABLE {s}.revocations (
    agent_id text NOT NULL,
    key text NOT NULL,
    reason text NOT NULL,
    at double precision NOT NULL
);
CREATE INDEX revocations_agent ON {s}.revocations (agent_id, key);
CREATE UNLOGGED TABLE {s}.notices (
    agent_id text PRIMARY KEY,
    namespace text NOT NULL,
    waits_on text NOT NULL,
    wait_id text,
    notice_id text NOT NULL,
    body text NOT NULL
);
"""

# Helpers of the operations below: the clock, liveness, channels, sessions, a lock's row.
_BASICS: Final = """
CREATE FUNCTION {s}.now_epoch() RETURNS double precision LANGUAGE sql VOLATILE
AS $$ SELECT extract(epoch FROM clock_timestamp())::double precision $$;

-- Whether a row's session lives: see the module's docstring.
CREATE FUNCTION {s}.alive(p_session integer, p_me integer) RETURNS boolean
LANGUAGE sql VOLATILE
AS $$ SELECT p_session = p_me OR NOT pg_try_advisory_xact_lock_shared({cls}, p_session) $$;

-- A namespace's NOTIFY channel (schema.namespace_channel). STABLE, as its body is
-- (convert_to is STABLE): PostgreSQL never inlines an IMMUTABLE SQL function whose body is
-- not, and a call of its own on every hand-off cost about a fifth of the hand-off's time.
CREATE FUNCTION {s}.channel(p_ns text) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT '{prefix}_'
    || left(encode(sha256(convert_to('{schema}/' || p_ns, 'UTF8')), 'hex'), 24) $$;

-- A new session number, held by this connection's session advisory lock until it ends.
CREATE FUNCTION {s}.open_session() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE n integer;
BEGIN
    FOR i IN 1..1000 LOOP
        n := nextval('{s}.session_seq');
        IF pg_try_advisory_lock({cls}, n) THEN RETURN n; END IF;
    END LOOP;
    RAISE EXCEPTION 'lockyard: no free session number';
END $$;

-- The holder's columns cleared: the lock is free, its row and last number stay.
-- For the journal: the agent whose request takes back the dead sessions' locks freed next in
-- this transaction (their `reclaim` records name it, as the lock directory's do).
CREATE FUNCTION {s}.reclaim_by(p_agent text) RETURNS void LANGUAGE sql AS $$
    SELECT set_config('lockyard.by', p_agent, true)
$$;

CREATE FUNCTION {s}.free(p_ns text, p_key text, p_token text) RETURNS boolean
LANGUAGE sql AS $$
    UPDATE {s}.holds SET agent_id = NULL, session = NULL, token = NULL, pid = NULL,
        start_time = NULL, host = NULL, boot_id = NULL, pid_ns = NULL, acquired_at = NULL,
        checkout = NULL, pending = NULL
    WHERE namespace = p_ns AND key = p_key AND token = p_token
    RETURNING true
$$;

-- Take the lock for the caller when it is free (and has no readers, unless `p_pending`: the
-- caller then waits for them, holding it): its row made (the lock's first grant, whose
-- number no other grant of it can have drawn after), or its free row filled in under the
-- row's lock with a number drawn there. The fencing number, or NULL when it is held. One
-- number drawn per grant: the insert draws only for a row not there yet (an insert's
-- values are computed before it meets a conflict), the update only once it passes.
-- `p_since`: the caller must still wait (for readers, or the holds under a directory),
-- since then (the lock's `pending`).
CREATE FUNCTION {s}.claim(p_ns text, p_key text, p_agent text, p_token text,
    p_pid integer, p_start bigint, p_host text, p_boot text, p_pidns text, p_checkout text,
    p_me integer, p_queued boolean, p_pending boolean DEFAULT false,
    p_since double precision DEFAULT NULL) RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO {s}.holds AS l (namespace, key, agent_id, session, token, fence, pid,
        start_time, host, boot_id, pid_ns, acquired_at, checkout, queued, pending)
    VALUES (p_ns, p_key, p_agent, p_me, p_token, CASE WHEN EXISTS (SELECT FROM {s}.holds
            WHERE namespace = p_ns AND key = p_key) THEN 0 ELSE nextval('{s}.fence_seq') END,
        p_pid, p_start, p_host, p_boot, p_pidns, {s}.now_epoch(), p_checkout, p_queued,
        p_since)
    ON CONFLICT (namespace, key) DO UPDATE SET agent_id = EXCLUDED.agent_id,
        session = EXCLUDED.session, token = EXCLUDED.token,
        fence = greatest(nextval('{s}.fence_seq'), l.fence + 1), pid = EXCLUDED.pid,
        start_time = EXCLUDED.start_time, host = EXCLUDED.host,
        boot_id = EXCLUDED.boot_id, pid_ns = EXCLUDED.pid_ns,
        acquired_at = EXCLUDED.acquired_at, checkout = EXCLUDED.checkout,
        queued = EXCLUDED.queued, pending = EXCLUDED.pending
    WHERE l.agent_id IS NULL AND (l.readers = 0 OR p_pending)
    RETURNING fence
$$;
"""

# Glob locks (a key holding '*' or '?', docs/postgres.md "Glob locks"): the index of the
# globs held, read or waited for, and how a key is matched. A glob's client writes its entry
# (its literal directory, its pattern) in a transaction of its own before it asks for the
# glob, so every decision that may meet the glob's hold sees the entry; a decision finds the
# globs that may cover a key by looking only at the entries of the directories over it. The
# pattern is pathspec's own regular expression, translated (postgres/glob_pattern.py): the
# lock directory's matching, exactly. An entry goes once nothing holds, reads or waits for
# its glob (forget_globs), under the namespace's scope lock held exclusively, as a glob's
# take decides: a take that finds its entry gone meanwhile says 'unindexed', and its client
# writes the entry again and asks again.
_GLOBS: Final = """
CREATE UNLOGGED TABLE {s}.globs (
    namespace text NOT NULL,
    prefix text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    pattern text NOT NULL,
    PRIMARY KEY (namespace, prefix, key)
);

CREATE FUNCTION {s}.is_glob(p_key text) RETURNS boolean LANGUAGE sql IMMUTABLE
AS $$ SELECT strpos(p_key, '*') > 0 OR strpos(p_key, '?') > 0 $$;

-- Whether a key covers more than itself: a directory or a glob.
CREATE FUNCTION {s}.scoped(p_key text) RETURNS boolean LANGUAGE sql IMMUTABLE
AS $$ SELECT right(p_key, 1) = '/' OR strpos(p_key, '*') > 0 OR strpos(p_key, '?') > 0 $$;

-- A glob's literal directory ('src/api/**/*.py' -> 'src/api/'; '' for the checkout's root).
CREATE FUNCTION {s}.glob_prefix(p_key text) RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT coalesce(substring(p_key FROM '^[^*?]*/'), '') $$;

-- Whether the file p_key matches a glob's pattern, the key normalised as pathspec does (a
-- leading '/' or './' dropped).
CREATE FUNCTION {s}.glob_matches(p_pattern text, p_key text) RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$ SELECT CASE WHEN left(p_key, 1) = '/' THEN substr(p_key, 2)
    WHEN left(p_key, 2) = './' THEN substr(p_key, 3) ELSE p_key END ~ p_pattern $$;

-- A glob's pattern (NULL for a directory or a file).
CREATE FUNCTION {s}.glob_pattern(p_ns text, p_key text) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT pattern FROM {s}.globs
    WHERE namespace = p_ns AND prefix = {s}.glob_prefix(p_key) AND key = p_key $$;

-- Whether p_key, a key in the range of the scoped key p_scope (below_blocker), is below it
-- (scope_keys.is_above): under a directory, everything; under a glob (p_pattern, its
-- pattern), a file it matches, a directory (the range holds those under its prefix only),
-- a glob of a deeper prefix, or of its own prefix and a greater key.
CREATE FUNCTION {s}.is_below(p_scope text, p_pattern text, p_key text) RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$ SELECT CASE
    WHEN p_pattern IS NULL OR right(p_key, 1) = '/' THEN true
    WHEN {s}.is_glob(p_key) THEN {s}.glob_prefix(p_key) <> {s}.glob_prefix(p_scope)
        OR p_key COLLATE "C" > p_scope COLLATE "C"
    ELSE {s}.glob_matches(p_pattern, p_key) END $$;
"""

# Shared holds (readers): joining, leaving, and the exclusive holder that waits for them.
# Every function here runs with the lock's row locked by its caller (or makes the row).
_READERS: Final = """
-- A reader joins a lock that has no exclusive holder: its row, the lock's count, and a
-- number drawn under the lock's row lock (so it is above every earlier grant's, and every
-- later exclusive grant's is above it). NULL when the lock has an exclusive holder.
-- `p_since`: the reader, of a directory or glob, must still wait for the writes under it,
-- since then (its `pending`).
CREATE FUNCTION {s}.join_readers(p_ns text, p_key text, p_agent text, p_token text,
    p_session integer, p_pid integer, p_start bigint, p_host text, p_boot text,
    p_pidns text, p_checkout text, p_since double precision DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE f bigint;
BEGIN
    SELECT fence INTO f FROM {s}.readers
    WHERE namespace = p_ns AND key = p_key AND agent_id = p_agent;
    IF FOUND THEN RETURN f; END IF;  -- a reader already (two stores of one agent)
    -- An update that waits for the row only when it may pass (no holder in its snapshot),
    -- never an upsert, which would wait for any lock on the row: a hand-off run by `leave`
    -- would then wait for a release that waits for `leave`'s queue entry.
    FOR attempt IN 1..2 LOOP
        UPDATE {s}.holds SET readers = readers + 1,
            fence = greatest(nextval('{s}.fence_seq'), fence + 1)
        WHERE namespace = p_ns AND key = p_key AND agent_id IS NULL
        RETURNING fence INTO f;
        EXIT WHEN FOUND;
        IF EXISTS (SELECT 1 FROM {s}.holds WHERE namespace = p_ns AND key = p_key) THEN
            RETURN NULL;  -- held
        END IF;
        INSERT INTO {s}.holds (namespace, key, fence, readers)
        VALUES (p_ns, p_key, nextval('{s}.fence_seq'), 1)
        ON CONFLICT (namespace, key) DO NOTHING
        RETURNING fence INTO f;
        EXIT WHEN FOUND;  -- else made meanwhile: look again
    END LOOP;
    IF f IS NULL THEN RETURN NULL; END IF;
    INSERT INTO {s}.readers (namespace, key, agent_id, session, token, fence, pid,
        start_time, host, boot_id, pid_ns, acquired_at, checkout, pending)
    VALUES (p_ns, p_key, p_agent, p_session, p_token, f, p_pid, p_start, p_host, p_boot,
        p_pidns, {s}.now_epoch(), p_checkout, p_since);
    RETURN f;
END $$;

-- A reader of a lock other than p_agent whose session lives (the first to have come), or
-- NULL; the readers whose session ended are dropped on the way (proof of death).
CREATE FUNCTION {s}.other_reader(p_ns text, p_key text, p_agent text, p_me integer)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE gone integer; who text;
BEGIN
    DELETE FROM {s}.readers
    WHERE namespace = p_ns AND key = p_key AND NOT {s}.alive(session, p_me);
    GET DIAGNOSTICS gone = ROW_COUNT;
    IF gone > 0 THEN
        UPDATE {s}.holds SET readers = readers - gone WHERE namespace = p_ns AND key = p_key;
    END IF;
    SELECT agent_id INTO who FROM {s}.readers
    WHERE namespace = p_ns AND key = p_key AND agent_id <> p_agent
    ORDER BY acquired_at LIMIT 1;
    RETURN who;
END $$;

-- p_agent's read of a lock ends (gone into its exclusive hold, or given back): whether it
-- had one.
CREATE FUNCTION {s}.drop_read(p_ns text, p_key text, p_agent text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE since double precision;
BEGIN
    DELETE FROM {s}.readers WHERE namespace = p_ns AND key = p_key AND agent_id = p_agent
    RETURNING acquired_at INTO since;
    IF NOT FOUND THEN RETURN false; END IF;
    -- Gone into its own exclusive hold (an upgrade): one hold, held since the read began.
    UPDATE {s}.holds SET readers = readers - 1, acquired_at = CASE WHEN agent_id = p_agent
        THEN least(acquired_at, since) ELSE acquired_at END
    WHERE namespace = p_ns AND key = p_key;
    RETURN true;
END $$;

-- The holder of a lock that waited for readers or for the holds under it (`pending`) is
-- granted now: its wait ends (the journal's hand-over and wait-end), its hold begins.
CREATE FUNCTION {s}.wait_over(p_ns text, p_key text) RETURNS void LANGUAGE sql AS $$
    UPDATE {s}.holds SET pending = NULL, acquired_at = {s}.now_epoch()
    WHERE namespace = p_ns AND key = p_key AND pending IS NOT NULL
$$;

-- The same for the reader of p_key whose token is p_token (a directory's or a glob's).
CREATE FUNCTION {s}.read_over(p_ns text, p_key text, p_token text) RETURNS void
LANGUAGE sql AS $$
    UPDATE {s}.readers SET pending = NULL, acquired_at = {s}.now_epoch()
    WHERE namespace = p_ns AND key = p_key AND token = p_token AND pending IS NOT NULL
$$;

-- Readers left: an exclusive holder that waited for them and now has none but its own read
-- is granted, its read absorbed, and told by a push (as a hand-off tells a waiter).
CREATE FUNCTION {s}.readers_left(p_ns text, p_key text, p_me integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE h {s}.holds;
BEGIN
    SELECT * INTO h FROM {s}.holds WHERE namespace = p_ns AND key = p_key;
    IF NOT FOUND THEN RETURN; END IF;
    IF {s}.other_reader(p_ns, p_key, coalesce(h.agent_id, ''), p_me) IS NOT NULL
       OR h.agent_id IS NULL THEN
        RETURN;
    END IF;
    IF {s}.scoped(p_key)
       AND {s}.below_blocker(p_ns, p_key, h.agent_id, false, p_me, false) IS NOT NULL THEN
        RETURN;  -- the last hold under it pushes the grant (below_left)
    END IF;
    PERFORM {s}.wait_over(p_ns, p_key);  -- (first: the journal sees the read)
    PERFORM {s}.drop_read(p_ns, p_key, h.agent_id);
    PERFORM pg_notify({s}.channel(p_ns), 'g' || h.token || ':' || h.fence),
        pg_notify('{graph}', '');
END $$;

-- A reader gives its read back: false when it had none. An exclusive holder waiting for the
-- readers is granted when it was the last.
CREATE FUNCTION {s}.release_read(p_ns text, p_key text, p_agent text, p_me integer)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM {s}.holds WHERE namespace = p_ns AND key = p_key FOR NO KEY UPDATE;
    IF NOT FOUND OR NOT {s}.drop_read(p_ns, p_key, p_agent) THEN
        RETURN false;
    END IF;
    PERFORM {s}.readers_left(p_ns, p_key, p_me);
    IF EXISTS (SELECT 1 FROM {s}.holds WHERE namespace = p_ns AND key = p_key
               AND agent_id IS NULL AND readers = 0) THEN
        PERFORM {s}.hand_off(p_ns, p_key, p_me);  -- the directory's line, the locks over it
    END IF;
    RETURN true;
END $$;
"""

# Directory locks (a key ending in '/', docs/postgres.md "Directory locks"): where they meet
# the locks under them. Every grant that may overlap a directory lock decides under the
# namespace's scope lock (`scope_guard`), shared for a file, exclusive for a directory, taken
# in an earlier statement than its look, so two overlapping decisions never run at once and
# the later one sees the earlier one's rows.
_SCOPES: Final = """
-- The directory keys over a key, outermost first ('a/b/c.py' -> {a/, a/b/}), as
-- scope_keys.directory_ancestors gives them; a glob's are its literal directory's and that
-- directory ('a/b/*.py' -> {a/, a/b/}).
CREATE FUNCTION {s}.dirs_above(p_key text) RETURNS text[] LANGUAGE sql IMMUTABLE
AS $$ SELECT coalesce(array_agg(left(p_key, i) ORDER BY i), '{}')
    FROM generate_series(2, CASE WHEN {s}.is_glob(p_key)
        THEN length({s}.glob_prefix(p_key)) ELSE length(p_key) - 1 END) AS i
    WHERE substr(p_key, i, 1) = '/' AND left(p_key, i) <> './' $$;

-- Whether a glob is indexed at one of the places a key above p_key can live (the checkout's
-- root, the directories over it: the places scopes_above looks at), one index probe each:
-- only then is scopes_above asked, the directories' array being enough otherwise. plpgsql,
-- as scopes_above: its plans are kept for the session (a LANGUAGE sql function called from
-- plpgsql is planned again on every call: ~0.5-1 ms beside 100 globs, against ~40 us).
CREATE FUNCTION {s}.globs_at(p_ns text, p_key text) RETURNS boolean LANGUAGE plpgsql STABLE
AS $$
DECLARE place text;
BEGIN
    FOREACH place IN ARRAY '{""}'::text[] || {s}.dirs_above(p_key) LOOP
        IF EXISTS (SELECT 1 FROM {s}.globs WHERE namespace = p_ns AND prefix = place) THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END $$;

-- The first key after every key under the directory p_dir ('src/api/' -> 'src/api0', '0'
-- being the character after '/'): the keys under it are (p_dir, dir_end(p_dir)) in the "C"
-- collation of the key columns, one index range.
CREATE FUNCTION {s}.dir_end(p_dir text) RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT left(p_dir, -1) || '0' $$;

-- The directory and glob keys above p_key (scope_keys.is_above; for a file, the globs that
-- match it), outermost first: by scope, a directory before the globs of its own scope,
-- globs in key order. The globs come from the index entries of the directories over it,
-- one place at a time: each pattern is matched only after its entry was found by its
-- place (one set of rows over the namespace's globs let the planner match every pattern
-- in the namespace first, ~100 regular expressions compiled per call beside 100 globs).
CREATE FUNCTION {s}.scopes_above(p_ns text, p_key text) RETURNS SETOF text
LANGUAGE plpgsql STABLE AS $$
DECLARE place text; directory boolean := right(p_key, 1) = '/';
    glob boolean := {s}.is_glob(p_key);
BEGIN
    FOREACH place IN ARRAY '{""}'::text[] || {s}.dirs_above(p_key) LOOP
        IF place <> '' THEN
            RETURN NEXT place;
        END IF;
        RETURN QUERY SELECT g.key FROM {s}.globs g
            WHERE g.namespace = p_ns AND g.prefix = place AND g.key <> p_key AND CASE
                WHEN directory THEN true
                WHEN glob THEN g.prefix <> {s}.glob_prefix(p_key) OR g.key < p_key
                ELSE {s}.glob_matches(g.pattern, p_key) END
            ORDER BY g.key;
    END LOOP;
END $$;

-- The scope lock: exclusive for a directory's or a glob's decision, shared for a file's (a
-- glob of the checkout's root may cover any file). Transaction-scoped: it ends with the
-- decision's transaction.
CREATE FUNCTION {s}.scope_guard(p_ns text, p_key text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF {s}.scoped(p_key) THEN
        PERFORM pg_advisory_xact_lock({scls}, hashtext(p_ns));
    ELSE
        PERFORM pg_advisory_xact_lock_shared({scls}, hashtext(p_ns));
    END IF;
END $$;

-- Who, holding the directory p_dir, blocks p_agent's request (shared or not) of a key under
-- it: its exclusive holder (granted, or waiting for the holds under it), else, for an
-- exclusive request, a reader; NULL when nobody. A holder whose session ended still blocks
-- (so that nobody passes a directory lock that is being handed on), unless p_reap: then it
-- is freed and handed on first, and the directory looked at again.
CREATE FUNCTION {s}.dir_blocker(p_ns text, p_dir text, p_agent text, p_shared boolean,
    p_me integer, p_reap boolean) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE h {s}.holds; who text;
BEGIN
    SELECT * INTO h FROM {s}.holds WHERE namespace = p_ns AND key = p_dir;
    IF NOT FOUND THEN RETURN NULL; END IF;
    IF h.agent_id IS NOT NULL AND h.agent_id <> p_agent THEN
        IF {s}.alive(h.session, p_me) OR NOT p_reap THEN RETURN h.agent_id; END IF;
        SELECT * INTO h FROM {s}.holds WHERE namespace = p_ns AND key = p_dir
        FOR NO KEY UPDATE;
        IF h.agent_id IS NOT NULL AND NOT {s}.alive(h.session, p_me) THEN
            PERFORM {s}.reclaim_by(p_agent);
            PERFORM {s}.free(p_ns, p_dir, h.token);
            PERFORM {s}.hand_off(p_ns, p_dir, p_me);
        END IF;
        RETURN {s}.dir_blocker(p_ns, p_dir, p_agent, p_shared, p_me, false);
    END IF;
    IF p_shared OR h.readers = 0 THEN RETURN NULL; END IF;
    IF p_reap THEN
        PERFORM 1 FROM {s}.holds WHERE namespace = p_ns AND key = p_dir FOR NO KEY UPDATE;
        RETURN {s}.other_reader(p_ns, p_dir, p_agent, p_me);  -- drops the dead ones
    END IF;
    SELECT agent_id INTO who FROM {s}.readers
    WHERE namespace = p_ns AND key = p_dir AND agent_id <> p_agent LIMIT 1;
    RETURN who;
END $$;

-- The outermost directory or glob above p_key whose holders block p_agent's request
-- (dir_blocker), and who blocks it there; NULLs when none.
CREATE FUNCTION {s}.blocker_above(p_ns text, p_key text, p_agent text, p_shared boolean,
    p_me integer, p_reap boolean, OUT o_line text, OUT o_agent text)
LANGUAGE plpgsql AS $$
DECLARE d text; above text[];
BEGIN
    -- scopes_above costs several times the directories' array: asked only where a glob is
    -- indexed at a place above the key (globs elsewhere in the checkout cost nothing here).
    IF {s}.globs_at(p_ns, p_key) THEN
        above := ARRAY(SELECT * FROM {s}.scopes_above(p_ns, p_key));
    ELSE
        above := {s}.dirs_above(p_key);
    END IF;
    FOREACH d IN ARRAY above LOOP
        o_agent := {s}.dir_blocker(p_ns, d, p_agent, p_shared, p_me, p_reap);
        IF o_agent IS NOT NULL THEN
            o_line := d;
            RETURN;
        END IF;
    END LOOP;
END $$;

-- Who holds something below the directory or glob p_dir that p_agent's hold of it must
-- wait for: another agent's exclusive hold (of a file, a directory or a glob) or, for an
-- exclusive hold of p_dir, another agent's read; NULL when nobody. A hold whose session
-- ended counts until it is freed (so that a hand-off of it to a waiter is never missed),
-- unless p_reap: then it is freed and handed on first, and the dead reads dropped. The keys
-- under a directory are one index range; a glob's are those of its literal directory's range
-- that it is above (is_below).
CREATE FUNCTION {s}.below_blocker(p_ns text, p_dir text, p_agent text, p_shared boolean,
    p_me integer, p_reap boolean) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE h {s}.holds; who text; k text; pat text := {s}.glob_pattern(p_ns, p_dir);
    lo text := CASE WHEN {s}.is_glob(p_dir) THEN {s}.glob_prefix(p_dir) ELSE p_dir END;
    hi text := CASE WHEN lo = '' THEN NULL ELSE {s}.dir_end(lo) END;
BEGIN
    IF p_reap THEN
        FOR h IN SELECT * FROM {s}.holds WHERE namespace = p_ns AND key > lo
                 AND (hi IS NULL OR key < hi) AND {s}.is_below(p_dir, pat, key)
                 AND agent_id IS NOT NULL
                 AND NOT {s}.alive(session, p_me) ORDER BY key FOR NO KEY UPDATE LOOP
            PERFORM {s}.reclaim_by(p_agent);
            PERFORM {s}.free(p_ns, h.key, h.token);
            PERFORM {s}.hand_off(p_ns, h.key, p_me);
        END LOOP;
        FOR k IN SELECT DISTINCT key FROM {s}.readers WHERE namespace = p_ns AND key > lo
                 AND (hi IS NULL OR key < hi) AND {s}.is_below(p_dir, pat, key)
                 AND NOT {s}.alive(session, p_me) ORDER BY key LOOP
            PERFORM 1 FROM {s}.holds WHERE namespace = p_ns AND key = k FOR NO KEY UPDATE;
            PERFORM {s}.readers_left(p_ns, k, p_me);  -- drops the dead ones
        END LOOP;
    END IF;
    SELECT agent_id INTO who FROM {s}.holds WHERE namespace = p_ns AND key > lo
        AND (hi IS NULL OR key < hi) AND {s}.is_below(p_dir, pat, key)
        AND agent_id IS NOT NULL AND agent_id <> p_agent
    LIMIT 1;
    IF who IS NOT NULL OR p_shared THEN RETURN who; END IF;
    SELECT agent_id INTO who FROM {s}.readers WHERE namespace = p_ns AND key > lo
        AND (hi IS NULL OR key < hi) AND {s}.is_below(p_dir, pat, key) AND agent_id <> p_agent
    LIMIT 1;
    RETURN who;
END $$;

-- A directory lock granted to p_agent (holder or reader) whose holds under it are not all
-- gone yet: mark the locks under it `queued`, so that each one's release looks above it
-- (below_left) and the last one pushes the directory's grant. Whether it must wait.
CREATE FUNCTION {s}.wait_below(p_ns text, p_dir text, p_agent text, p_shared boolean,
    p_me integer) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE pat text := {s}.glob_pattern(p_ns, p_dir);
    lo text := CASE WHEN {s}.is_glob(p_dir) THEN {s}.glob_prefix(p_dir) ELSE p_dir END;
BEGIN
    IF {s}.below_blocker(p_ns, p_dir, p_agent, p_shared, p_me, false) IS NULL THEN
        RETURN false;
    END IF;
    UPDATE {s}.holds SET queued = true WHERE namespace = p_ns AND key > lo
        AND (lo = '' OR key < {s}.dir_end(lo)) AND {s}.is_below(p_dir, pat, key)
        AND (agent_id IS NOT NULL OR readers > 0) AND NOT queued;
    PERFORM pg_notify('{graph}', '');  -- a wait began: on the holds under it
    RETURN true;
END $$;

-- A hold of p_key ended: each directory or glob lock above it that waited for the holds
-- below it and waits no more is pushed its grant (its holder's, or each reader's, by token).
CREATE FUNCTION {s}.below_left(p_ns text, p_key text, p_me integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE h {s}.holds; r {s}.readers;
BEGIN
    FOR h IN SELECT d.* FROM unnest(CASE
                 WHEN {s}.globs_at(p_ns, p_key)
                 THEN ARRAY(SELECT * FROM {s}.scopes_above(p_ns, p_key))
                 ELSE {s}.dirs_above(p_key) END) AS a(k)
             JOIN LATERAL (SELECT * FROM {s}.holds WHERE namespace = p_ns AND key = a.k
                           LIMIT 1) AS d
             ON true WHERE d.agent_id IS NOT NULL OR d.readers > 0 ORDER BY d.key LOOP
        IF h.agent_id IS NOT NULL
           AND {s}.below_blocker(p_ns, h.key, h.agent_id, false, p_me, false) IS NULL
           AND NOT EXISTS (SELECT 1 FROM {s}.readers WHERE namespace = p_ns AND key = h.key
                           AND agent_id <> h.agent_id) THEN
            PERFORM {s}.wait_over(p_ns, h.key);  -- (first: the journal sees the read)
            PERFORM {s}.drop_read(p_ns, h.key, h.agent_id);  -- an upgrade's own read
            PERFORM pg_notify({s}.channel(p_ns), 'g' || h.token || ':' || h.fence);
        END IF;
        FOR r IN SELECT * FROM {s}.readers WHERE namespace = p_ns AND key = h.key LOOP
            IF {s}.below_blocker(p_ns, h.key, r.agent_id, true, p_me, false) IS NULL THEN
                PERFORM {s}.read_over(p_ns, h.key, r.token);
                PERFORM pg_notify({s}.channel(p_ns), 'g' || r.token || ':' || r.fence);
            END IF;
        END LOOP;
    END LOOP;
END $$;

-- A queued waiter w, whose line no longer blocks it, placed anew: in the line of the
-- outermost directory over the key it wants that blocks it, or else in that key's own line,
-- which is handed on (granting it, when it is first and the lock is free). Its ticket stays:
-- its turn among the waiters of any line it joins is its arrival's.
CREATE FUNCTION {s}.replace_waiter(w {s}.waiters, p_me integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE wanted text := coalesce(w.want, w.key); line text; who text;
BEGIN
    SELECT * INTO line, who FROM {s}.blocker_above(w.namespace, wanted, w.agent_id,
        w.shared, p_me, false);
    IF line IS NOT NULL THEN
        IF line <> w.key THEN
            UPDATE {s}.waiters SET key = line, want = wanted WHERE ticket = w.ticket;
            UPDATE {s}.holds SET queued = true
            WHERE namespace = w.namespace AND key = line AND NOT queued;
            PERFORM pg_notify('{graph}', '');
        END IF;
        RETURN;
    END IF;
    IF w.want IS NULL THEN RETURN; END IF;  -- in its own line already
    UPDATE {s}.waiters SET key = wanted, want = NULL WHERE ticket = w.ticket;
    INSERT INTO {s}.holds (namespace, key, fence) VALUES (w.namespace, wanted, 0)
    ON CONFLICT (namespace, key) DO NOTHING;  -- no grant yet: no number drawn
    UPDATE {s}.holds SET queued = true WHERE namespace = w.namespace AND key = wanted
        AND agent_id IS NOT NULL AND NOT queued;
    PERFORM {s}.hand_off(w.namespace, wanted, p_me);
END $$;
"""

# Handing a freed lock on. Every path that frees a lock someone queues for calls it in the
# same transaction, so a free lock never has a live waiter left asleep.
_HAND_OFF: Final = """
-- Give a free lock to its first live waiter (dropping dead ones), and push it the grant; a
-- run of shared requests at the head of the line are all granted (each becomes a reader),
-- up to the first exclusive one, which is written in as the holder and, while other readers
-- remain, waits for them holding the lock (so nobody passes it: FIFO with no starvation).
-- On the hand-off path of every contended release: as few statements as it can be.
CREATE FUNCTION {s}.hand_off(p_ns text, p_key text, p_me integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE w {s}.waiters; f bigint; more boolean; pushed text; who text; line text;
    nested boolean := cardinality({s}.dirs_above(p_key)) > 0
        OR {s}.globs_at(p_ns, p_key);
    below boolean := false; read_below boolean;
BEGIN
    -- For the journal (journal_schema.py): a holder written in from now on in this
    -- transaction was handed the lock (nothing after a hand-off in a transaction takes one).
    PERFORM set_config('lockyard.handing', 'on', true);
    -- The common case in one statement: the lock is a file's, no directory or glob lock is
    -- held over it, it is free, has no readers, and its first waiter is alive and exclusive,
    -- so the waiter's grant is written into the lock's row, with a number drawn under its row
    -- lock.
    IF NOT {s}.scoped(p_key) AND NOT (nested AND (EXISTS (
            SELECT 1 FROM unnest({s}.dirs_above(p_key)) AS a(k), LATERAL (
                SELECT 1 FROM {s}.holds WHERE namespace = p_ns AND key = a.k
                AND (agent_id IS NOT NULL OR readers > 0) LIMIT 1) AS held) OR EXISTS (
            SELECT 1 FROM unnest('{""}'::text[] || {s}.dirs_above(p_key)) AS a(place),
            LATERAL (SELECT 1 FROM {s}.globs g, LATERAL (SELECT 1 FROM {s}.holds gh
                    WHERE gh.namespace = p_ns AND gh.key = g.key
                    AND (gh.agent_id IS NOT NULL OR gh.readers > 0) LIMIT 1) AS gh
                WHERE g.namespace = p_ns AND g.prefix = a.place
                AND {s}.glob_matches(g.pattern, p_key) LIMIT 1) AS held))) THEN
    WITH head AS (
        SELECT * FROM {s}.waiters WHERE namespace = p_ns AND key = p_key
        ORDER BY ticket LIMIT 1 FOR UPDATE
    ), granted AS (
        UPDATE {s}.holds h SET agent_id = head.agent_id, session = head.session,
            token = head.token, fence = greatest(nextval('{s}.fence_seq'), h.fence + 1),
            pid = head.pid,
            start_time = head.start_time, host = head.host, boot_id = head.boot_id,
            pid_ns = head.pid_ns, acquired_at = date_part('epoch', clock_timestamp()),
            checkout = head.checkout,
            queued = h.queued OR EXISTS (SELECT 1 FROM {s}.waiters o WHERE o.namespace = p_ns
                             AND o.key = p_key AND o.ticket <> head.ticket)
        FROM head
        WHERE h.namespace = p_ns AND h.key = p_key AND h.agent_id IS NULL
            AND h.readers = 0 AND NOT head.shared AND head.want IS NULL
            AND {s}.alive(head.session, p_me)
        RETURNING h.token, h.fence, h.queued
    ), served AS (
        DELETE FROM {s}.waiters WHERE ticket = (SELECT ticket FROM head)
        AND EXISTS (SELECT 1 FROM granted)
    )
    SELECT fence, pg_notify({s}.channel(p_ns), 'g' || token || ':' || fence)::text
        || CASE WHEN queued THEN pg_notify('{graph}', '')::text ELSE '' END
    INTO f, pushed FROM granted;
    IF f IS NOT NULL THEN
        RETURN;
    END IF;
    END IF;
    -- Otherwise (a dead first waiter, readers, a shared head, or a held lock): one by one.
    FOR w IN SELECT * FROM {s}.waiters WHERE namespace = p_ns AND key = p_key
             ORDER BY ticket FOR UPDATE LOOP
        IF NOT {s}.alive(w.session, p_me) THEN
            DELETE FROM {s}.waiters WHERE ticket = w.ticket;
            CONTINUE;
        END IF;
        IF w.want IS NOT NULL THEN  -- it passes through this directory's line
            IF {s}.dir_blocker(p_ns, p_key, w.agent_id, w.shared, p_me, false) IS NOT NULL THEN
                RETURN;  -- the line is held again: it waits on
            END IF;
            PERFORM {s}.replace_waiter(w, p_me);
            CONTINUE;
        END IF;
        IF nested THEN  -- a directory lock over it that blocks it: it passes through its line
            SELECT b.o_line INTO line FROM {s}.blocker_above(p_ns, p_key, w.agent_id,
                w.shared, p_me, false) AS b;
            IF line IS NOT NULL THEN
                PERFORM {s}.replace_waiter(w, p_me);
                CONTINUE;
            END IF;
        END IF;
        IF w.shared THEN
            read_below := {s}.scoped(p_key)
                AND {s}.below_blocker(p_ns, p_key, w.agent_id, true, p_me, false) IS NOT NULL;
            f := {s}.join_readers(p_ns, p_key, w.agent_id, w.token, w.session, w.pid,
                w.start_time, w.host, w.boot_id, w.pid_ns, w.checkout,
                CASE WHEN read_below THEN w.since END);
            IF f IS NULL THEN
                RETURN;  -- held: its release hands on
            END IF;
            DELETE FROM {s}.waiters WHERE ticket = w.ticket;
            IF read_below AND {s}.wait_below(p_ns, p_key, w.agent_id, true, p_me) THEN
                CONTINUE;  -- a reader that waits for the holds under it (below_left pushes)
            END IF;
            IF read_below THEN
                PERFORM {s}.read_over(p_ns, p_key, w.token);  -- they went meanwhile
            END IF;
            PERFORM pg_notify({s}.channel(p_ns), 'g' || w.token || ':' || f),
                pg_notify('{graph}', '');
            CONTINUE;
        END IF;
        more := EXISTS (SELECT 1 FROM {s}.waiters
                        WHERE namespace = p_ns AND key = p_key AND ticket <> w.ticket);
        who := {s}.other_reader(p_ns, p_key, w.agent_id, p_me);
        IF who IS NULL AND {s}.scoped(p_key) THEN
            who := {s}.below_blocker(p_ns, p_key, w.agent_id, false, p_me, false);
            below := who IS NOT NULL;
        END IF;
        UPDATE {s}.holds SET agent_id = w.agent_id, session = w.session, token = w.token,
            fence = greatest(nextval('{s}.fence_seq'), fence + 1), pid = w.pid,
            start_time = w.start_time,
            host = w.host, boot_id = w.boot_id, pid_ns = w.pid_ns,
            acquired_at = {s}.now_epoch(), checkout = w.checkout, queued = more OR queued,
            pending = CASE WHEN who IS NOT NULL THEN w.since END  -- its wait goes on
        WHERE namespace = p_ns AND key = p_key AND agent_id IS NULL
        RETURNING fence INTO f;
        IF f IS NOT NULL THEN
            DELETE FROM {s}.waiters WHERE ticket = w.ticket;
            IF below AND {s}.wait_below(p_ns, p_key, w.agent_id, false, p_me) THEN
                RETURN;  -- it holds the directory and waits for the holds under it
            END IF;
            IF who IS NULL THEN
                PERFORM {s}.drop_read(p_ns, p_key, w.agent_id);  -- an upgrade's own read
                -- By token: the waiter subscribed to it before its queue entry existed. The
                -- monitor hears of it when others still wait (their edges now lead elsewhere).
                PERFORM pg_notify({s}.channel(p_ns), 'g' || w.token || ':' || f),
                    CASE WHEN more THEN pg_notify('{graph}', '') END;
            ELSE
                -- It holds the lock and waits for the readers (a new edge for the monitor);
                -- the last reader's release pushes its grant (readers_left).
                PERFORM pg_notify('{graph}', '');
            END IF;
        END IF;
        RETURN;
    END LOOP;
    -- Nobody left to give it to: a free lock marks no queue.
    UPDATE {s}.holds SET queued = false
    WHERE namespace = p_ns AND key = p_key AND agent_id IS NULL AND queued;
    IF nested THEN
        PERFORM {s}.below_left(p_ns, p_key, p_me);  -- a directory lock waiting for it
    END IF;
END $$;
"""

# Taking a lock, where the store's one-statement take of a free lock did not do.
_TAKE: Final = """
-- The slow part of an attempt, when the lock is held, queued for or read: 'granted',
-- 'held' (already this agent's in a mode that covers the request), 'busy', 'queued' (free
-- but reserved for a live waiter), or, for a caller that will queue (p_queue), 'pending':
-- an exclusive request that found only readers is written in as the holder and waits for
-- them (readers_left pushes its grant). p_shared: a shared request (a reader).
-- The lock's row stays locked until the caller's transaction ends, so that a release cannot
-- slip between "held" and the caller's queue entry (it waits, then sees it). An update
-- lock, not a share lock: the caller then marks the row `queued`, and two callers holding
-- share locks would deadlock on that.
CREATE FUNCTION {s}.take_slow(p_ns text, p_key text, p_agent text, p_token text,
    p_pid integer, p_start bigint, p_host text, p_boot text, p_pidns text, p_checkout text,
    p_shared boolean, p_me integer, p_queue boolean,
    OUT outcome text, OUT o_fence bigint, OUT o_agent text, OUT o_line text)
LANGUAGE plpgsql AS $$
DECLARE h {s}.holds; w {s}.waiters; scoped boolean := {s}.scoped(p_key);
    below boolean := false;
BEGIN
    -- Before any look (each later query of this function sees what committed meanwhile).
    PERFORM {s}.scope_guard(p_ns, p_key);
    IF {s}.is_glob(p_key) AND NOT EXISTS (SELECT 1 FROM {s}.globs WHERE namespace = p_ns
            AND prefix = {s}.glob_prefix(p_key) AND key = p_key) THEN
        outcome := 'unindexed';  -- its entry went since its client wrote it: written again
        RETURN;
    END IF;
    IF p_shared THEN
        SELECT fence INTO o_fence FROM {s}.readers
        WHERE namespace = p_ns AND key = p_key AND agent_id = p_agent;
        IF FOUND THEN
            outcome := 'held'; o_agent := p_agent;
            RETURN;
        END IF;
    END IF;
    IF NOT p_queue THEN  -- a try of a held lock needs no row lock (and waits for none)
        SELECT * INTO h FROM {s}.holds WHERE namespace = p_ns AND key = p_key;
        IF FOUND AND h.agent_id IS NOT NULL AND {s}.alive(h.session, p_me) THEN
            o_fence := h.fence; o_agent := h.agent_id;
            outcome := CASE WHEN h.agent_id = p_agent THEN 'held' ELSE 'busy' END;
            RETURN;
        END IF;
    END IF;
    FOR attempt IN 1..8 LOOP
        SELECT * INTO h FROM {s}.holds WHERE namespace = p_ns AND key = p_key
        FOR NO KEY UPDATE;
        IF FOUND AND h.agent_id IS NOT NULL THEN
            IF {s}.alive(h.session, p_me) THEN
                o_fence := h.fence; o_agent := h.agent_id;
                outcome := CASE WHEN h.agent_id = p_agent THEN 'held' ELSE 'busy' END;
                RETURN;
            END IF;
            PERFORM {s}.reclaim_by(p_agent);
            PERFORM {s}.free(p_ns, p_key, h.token);
        END IF;
        FOR w IN SELECT * FROM {s}.waiters WHERE namespace = p_ns AND key = p_key
                 ORDER BY ticket LOOP
            IF {s}.alive(w.session, p_me) THEN
                PERFORM {s}.hand_off(p_ns, p_key, p_me);
                outcome := 'queued'; o_agent := w.agent_id;
                RETURN;
            END IF;
            DELETE FROM {s}.waiters WHERE ticket = w.ticket;
        END LOOP;
        -- Free in its own line: a directory lock over it that blocks it sends it through
        -- that directory's line ('via'), after a look again under that lock's row lock (its
        -- release hands on to the queue, so none slips between this look and the queue entry).
        SELECT * INTO o_line, o_agent FROM {s}.blocker_above(p_ns, p_key, p_agent, p_shared,
            p_me, true);
        IF o_line IS NOT NULL THEN
            IF NOT p_queue THEN
                outcome := 'busy'; o_line := NULL;
                RETURN;
            END IF;
            PERFORM 1 FROM {s}.holds WHERE namespace = p_ns AND key = o_line FOR NO KEY UPDATE;
            o_agent := {s}.dir_blocker(p_ns, o_line, p_agent, p_shared, p_me, false);
            IF o_agent IS NOT NULL THEN
                outcome := 'via';
                RETURN;
            END IF;
            o_line := NULL;
            CONTINUE;  -- handed on meanwhile: look again
        END IF;
        -- A directory: the holds under it (a try takes it only when there are none).
        IF scoped THEN
            o_agent := {s}.below_blocker(p_ns, p_key, p_agent, p_shared, p_me, true);
            IF o_agent IS NOT NULL AND NOT p_queue THEN
                outcome := 'busy';
                RETURN;
            END IF;
            below := o_agent IS NOT NULL;
            o_agent := NULL;
        END IF;
        IF p_shared THEN
            o_fence := {s}.join_readers(p_ns, p_key, p_agent, p_token, p_me, p_pid, p_start,
                p_host, p_boot, p_pidns, p_checkout, CASE WHEN below THEN {s}.now_epoch() END);
        ELSE
            IF h.readers > 0 THEN  -- (NULL when the row was not there)
                o_agent := {s}.other_reader(p_ns, p_key, p_agent, p_me);
                IF o_agent IS NOT NULL AND NOT p_queue THEN
                    outcome := 'busy';
                    RETURN;
                END IF;
            END IF;
            -- Past readers of its own (an upgrade: its read goes into the hold, after the
            -- claim, so that the journal sees it absorbed and not given back).
            o_fence := {s}.claim(p_ns, p_key, p_agent, p_token, p_pid, p_start, p_host,
                p_boot, p_pidns, p_checkout, p_me, false, h.readers > 0,
                CASE WHEN o_agent IS NOT NULL OR below THEN {s}.now_epoch() END);
            IF o_fence IS NOT NULL AND o_agent IS NULL AND h.readers > 0 THEN
                PERFORM {s}.drop_read(p_ns, p_key, p_agent);  -- an upgrade, in place
            END IF;
            IF o_fence IS NOT NULL AND o_agent IS NOT NULL THEN
                outcome := 'pending';  -- it holds the lock and waits for o_agent's read
                RETURN;
            END IF;
        END IF;
        IF o_fence IS NOT NULL AND scoped
           AND {s}.wait_below(p_ns, p_key, p_agent, p_shared, p_me) THEN
            outcome := 'pending';  -- it holds the directory and waits for the holds under it
            o_agent := {s}.below_blocker(p_ns, p_key, p_agent, p_shared, p_me, false);
            RETURN;
        END IF;
        IF o_fence IS NOT NULL THEN
            IF below AND p_shared THEN  -- the holds under it went meanwhile: its wait is over
                PERFORM {s}.read_over(p_ns, p_key, p_token);
            ELSIF below THEN
                PERFORM {s}.wait_over(p_ns, p_key);
            END IF;
            outcome := 'granted'; o_agent := p_agent;
            RETURN;
        END IF;
        o_agent := NULL;  -- the row was made meanwhile: look again
    END LOOP;
    outcome := 'busy';
END $$;

-- One attempt at a lock, never queueing (the store tried the free-lock statement first).
CREATE FUNCTION {s}.take(p_ns text, p_key text, p_agent text, p_token text,
    p_pid integer, p_start bigint, p_host text, p_boot text, p_pidns text, p_checkout text,
    p_shared boolean, p_me integer, OUT outcome text, OUT o_fence bigint, OUT o_agent text)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT t.outcome, t.o_fence, t.o_agent INTO outcome, o_fence, o_agent
    FROM {s}.take_slow(p_ns, p_key, p_agent, p_token, p_pid, p_start, p_host, p_boot,
        p_pidns, p_checkout, p_shared, p_me, false) AS t;
END $$;

-- An attempt that queues when it cannot take: 'granted', 'held', 'pending' (see
-- take_slow), or 'waiting' with the queue entry's ticket (o_agent: who holds it or is
-- ahead). One transaction, so a release either comes before it (and the lock is taken
-- here) or sees the queue entry and hands the lock over with a push.
CREATE FUNCTION {s}.take_or_enqueue(p_ns text, p_key text, p_agent text, p_token text,
    p_pid integer, p_start bigint, p_host text, p_boot text, p_pidns text, p_checkout text,
    p_shared boolean, p_me integer, OUT outcome text, OUT o_fence bigint, OUT o_agent text,
    OUT o_ticket bigint)
LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
    SELECT * INTO outcome, o_fence, o_agent, line FROM {s}.take_slow(p_ns, p_key, p_agent,
        p_token, p_pid, p_start, p_host, p_boot, p_pidns, p_checkout, p_shared, p_me, true);
    IF outcome = 'pending' THEN
        PERFORM pg_notify('{graph}', '');  -- a wait began: on the readers
    END IF;
    IF outcome IN ('granted', 'held', 'pending', 'unindexed') THEN
        RETURN;
    END IF;
    -- In its own line, or ('via') in the line of the directory lock over it that blocks it.
    INSERT INTO {s}.waiters (ticket, namespace, key, agent_id, session, token, pid,
        start_time, host, boot_id, pid_ns, since, checkout, shared, want)
    VALUES (nextval('{s}.ticket_seq'), p_ns, coalesce(line, p_key), p_agent, p_me, p_token,
        p_pid, p_start, p_host, p_boot, p_pidns, {s}.now_epoch(), p_checkout, p_shared,
        CASE WHEN line IS NOT NULL THEN p_key END)
    RETURNING ticket INTO o_ticket;
    -- The hold we queue behind (the one seen busy, or the one just handed to the head).
    UPDATE {s}.holds SET queued = true
    WHERE namespace = p_ns AND key = coalesce(line, p_key) AND NOT queued;
    PERFORM pg_notify('{graph}', '');
    outcome := 'waiting';
END $$;
"""

# A queued waiter: its attempts, and its leaving.
_WAIT: Final = """
-- The first live waiter ahead of p_ticket in the line of p_line (NULL: none); the dead ones
-- met on the way leave the line.
CREATE FUNCTION {s}.live_ahead(p_ns text, p_line text, p_ticket bigint, p_me integer)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE a {s}.waiters;
BEGIN
    FOR a IN SELECT * FROM {s}.waiters WHERE namespace = p_ns AND key = p_line
             AND ticket < p_ticket ORDER BY ticket LOOP
        IF {s}.alive(a.session, p_me) THEN
            RETURN a.agent_id;
        END IF;
        DELETE FROM {s}.waiters WHERE ticket = a.ticket;
    END LOOP;
    RETURN NULL;
END $$;

-- A waiter's attempt: 'granted', 'waiting' (o_agent: who is ahead, holds it, or still reads
-- it), or 'gone' (its queue entry is no more, or belongs to a session of ours that ended).
-- A waiter may have been handed the lock already: as a reader, or as the exclusive holder
-- that waits for the readers (granted once none but its own read is left).
CREATE FUNCTION {s}.advance(p_ns text, p_key text, p_ticket bigint,
    p_token text, p_me integer, OUT outcome text, OUT o_fence bigint, OUT o_agent text)
LANGUAGE plpgsql AS $$
DECLARE w {s}.waiters; h {s}.holds; line text; below text;
    scoped boolean := {s}.scoped(p_key);
BEGIN
    PERFORM {s}.scope_guard(p_ns, p_key);  -- before any look
    SELECT * INTO w FROM {s}.waiters WHERE ticket = p_ticket;
    IF NOT FOUND OR w.session <> p_me THEN
        SELECT * INTO h FROM {s}.holds
        WHERE namespace = p_ns AND key = p_key AND token = p_token AND session = p_me
        FOR NO KEY UPDATE;
        IF FOUND THEN
            o_agent := {s}.other_reader(p_ns, p_key, h.agent_id, p_me);
            IF o_agent IS NULL AND scoped THEN
                o_agent := {s}.below_blocker(p_ns, p_key, h.agent_id, false, p_me, true);
            END IF;
            IF o_agent IS NOT NULL THEN
                outcome := 'waiting';
                RETURN;
            END IF;
            PERFORM {s}.wait_over(p_ns, p_key);  -- (first: the journal sees the read)
            PERFORM {s}.drop_read(p_ns, p_key, h.agent_id);
            outcome := 'granted'; o_fence := h.fence; o_agent := h.agent_id;
            RETURN;
        END IF;
        SELECT fence, agent_id INTO o_fence, o_agent FROM {s}.readers
        WHERE namespace = p_ns AND key = p_key AND token = p_token AND session = p_me;
        IF FOUND AND scoped
           AND {s}.below_blocker(p_ns, p_key, o_agent, true, p_me, true) IS NOT NULL THEN
            outcome := 'waiting';  -- a reader of the directory, waiting for writes under it
            o_agent := {s}.below_blocker(p_ns, p_key, o_agent, true, p_me, false);
            o_fence := NULL;
        ELSIF FOUND THEN
            PERFORM {s}.read_over(p_ns, p_key, p_token);
            outcome := 'granted';
        ELSE
            DELETE FROM {s}.waiters WHERE ticket = p_ticket;
            outcome := 'gone';
        END IF;
        RETURN;
    END IF;
    IF w.want IS NOT NULL THEN  -- in the line of a directory lock over its key
        o_agent := {s}.live_ahead(p_ns, w.key, p_ticket, p_me);
        IF o_agent IS NOT NULL THEN
            outcome := 'waiting';
            RETURN;
        END IF;
        PERFORM 1 FROM {s}.holds WHERE namespace = p_ns AND key = w.key FOR NO KEY UPDATE;
        o_agent := {s}.dir_blocker(p_ns, w.key, w.agent_id, w.shared, p_me, true);
        IF o_agent IS NOT NULL THEN
            outcome := 'waiting';
            RETURN;
        END IF;
        SELECT * INTO w FROM {s}.waiters WHERE ticket = p_ticket;  -- a hand-off moved it?
        IF FOUND AND w.want IS NOT NULL THEN
            PERFORM {s}.replace_waiter(w, p_me);
        END IF;
        SELECT * INTO outcome, o_fence, o_agent  -- where it went, or its grant
        FROM {s}.advance(p_ns, p_key, p_ticket, p_token, p_me);
        RETURN;
    END IF;
    o_agent := {s}.live_ahead(p_ns, p_key, p_ticket, p_me);
    IF o_agent IS NOT NULL THEN
        outcome := 'waiting';
        RETURN;
    END IF;
    -- A live holder is the common answer, read without a row lock (every waiter asks this
    -- at each liveness re-check); a free lock, or a dead holder's, is then read locked.
    SELECT * INTO h FROM {s}.holds WHERE namespace = p_ns AND key = p_key;
    IF FOUND AND h.agent_id IS NOT NULL AND {s}.alive(h.session, p_me) THEN
        outcome := 'waiting'; o_agent := h.agent_id;
        RETURN;
    END IF;
    SELECT * INTO h FROM {s}.holds WHERE namespace = p_ns AND key = p_key FOR NO KEY UPDATE;
    IF FOUND AND h.agent_id IS NOT NULL THEN
        IF {s}.alive(h.session, p_me) THEN
            outcome := 'waiting'; o_agent := h.agent_id;
            RETURN;
        END IF;
        PERFORM {s}.reclaim_by(w.agent_id);
        PERFORM {s}.free(p_ns, p_key, h.token);
    END IF;
    -- Its turn in its own line: a directory lock over it that blocks it sends it through
    -- that directory's line.
    SELECT b.o_line, b.o_agent INTO line, o_agent FROM {s}.blocker_above(p_ns, p_key,
        w.agent_id, w.shared, p_me, true) AS b;
    IF line IS NOT NULL THEN
        PERFORM {s}.replace_waiter(w, p_me);
        outcome := 'waiting';
        RETURN;
    END IF;
    IF scoped THEN  -- the dead holds under it reaped
        below := {s}.below_blocker(p_ns, p_key, w.agent_id, w.shared, p_me, true);
    END IF;
    -- For the journal: a waiter that takes the lock at its turn (its holder's dead session
    -- reclaimed, or nobody handed it on) ends its wait with a hand-over, as on the lock
    -- directory, never a grant as if it had just come.
    PERFORM set_config('lockyard.handing', 'on', true);
    IF w.shared THEN
        o_fence := {s}.join_readers(p_ns, p_key, w.agent_id, p_token, p_me, w.pid,
            w.start_time, w.host, w.boot_id, w.pid_ns, w.checkout,
            CASE WHEN below IS NOT NULL THEN w.since END);
        IF o_fence IS NULL THEN
            outcome := 'waiting';
            RETURN;
        END IF;
        DELETE FROM {s}.waiters WHERE ticket = p_ticket;
        PERFORM {s}.hand_off(p_ns, p_key, p_me);  -- the readers behind it come along
        IF scoped AND {s}.wait_below(p_ns, p_key, w.agent_id, true, p_me) THEN
            outcome := 'waiting';  -- it reads the directory once the writes under it end
            o_fence := NULL;
            RETURN;
        END IF;
        IF below IS NOT NULL THEN
            PERFORM {s}.read_over(p_ns, p_key, p_token);  -- they went meanwhile
        END IF;
        outcome := 'granted'; o_agent := w.agent_id;
        RETURN;
    END IF;
    o_agent := {s}.other_reader(p_ns, p_key, w.agent_id, p_me);
    o_fence := {s}.claim(p_ns, p_key, w.agent_id, p_token, w.pid, w.start_time, w.host,
        w.boot_id, w.pid_ns, w.checkout, p_me,
        EXISTS (SELECT 1 FROM {s}.waiters
                WHERE namespace = p_ns AND key = p_key AND ticket <> p_ticket), true,
        CASE WHEN o_agent IS NOT NULL OR below IS NOT NULL THEN w.since END);
    IF o_fence IS NULL THEN
        outcome := 'waiting';
        RETURN;
    END IF;
    DELETE FROM {s}.waiters WHERE ticket = p_ticket;
    IF o_agent IS NOT NULL THEN
        outcome := 'waiting';  -- it holds the lock now, and waits for the readers
        PERFORM pg_notify('{graph}', '');
        RETURN;
    END IF;
    IF scoped AND {s}.wait_below(p_ns, p_key, w.agent_id, false, p_me) THEN
        outcome := 'waiting';  -- it holds the directory and waits for the holds under it
        o_fence := NULL;
        RETURN;
    END IF;
    PERFORM {s}.drop_read(p_ns, p_key, w.agent_id);
    outcome := 'granted'; o_agent := w.agent_id;
END $$;

-- A waiter gives up: 'left', or 'granted' when the lock was handed to it meanwhile. An
-- exclusive holder still waiting for readers gives the lock back (and keeps its own read,
-- if it was upgrading one).
CREATE FUNCTION {s}.leave(p_ns text, p_key text, p_ticket bigint, p_token text, p_me integer)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE h {s}.holds; line text; who text; scoped boolean := {s}.scoped(p_key);
BEGIN
    DELETE FROM {s}.waiters WHERE ticket = p_ticket RETURNING key INTO line;
    IF FOUND THEN
        PERFORM {s}.hand_off(p_ns, line, p_me);  -- its own line, or a directory's
        RETURN 'left';
    END IF;
    SELECT * INTO h FROM {s}.holds WHERE namespace = p_ns AND key = p_key
        AND token = p_token AND session = p_me FOR NO KEY UPDATE;
    IF FOUND THEN
        IF {s}.other_reader(p_ns, p_key, h.agent_id, p_me) IS NULL AND NOT (scoped
           AND {s}.below_blocker(p_ns, p_key, h.agent_id, false, p_me, false) IS NOT NULL)
        THEN
            PERFORM {s}.wait_over(p_ns, p_key);  -- (first: the journal sees the read)
            PERFORM {s}.drop_read(p_ns, p_key, h.agent_id);
            RETURN 'granted';
        END IF;
        PERFORM {s}.free(p_ns, p_key, p_token);
        PERFORM {s}.hand_off(p_ns, p_key, p_me);
        RETURN 'left';
    END IF;
    SELECT agent_id INTO who FROM {s}.readers WHERE namespace = p_ns AND key = p_key
        AND token = p_token AND session = p_me;
    IF FOUND THEN
        IF scoped AND {s}.below_blocker(p_ns, p_key, who, true, p_me, false) IS NOT NULL THEN
            PERFORM {s}.release_read(p_ns, p_key, who, p_me);  -- still waiting: given back
            RETURN 'left';
        END IF;
        PERFORM {s}.read_over(p_ns, p_key, p_token);
        RETURN 'granted';
    END IF;
    RETURN 'left';
END $$;
"""

# Letting go: a holder's release, an agent's cleanup, the reclaim of dead sessions' locks.
_RELEASE: Final = """
-- A holder lets go: false when it held no such lock. A queue behind it gets the lock. Not
-- the holder: a reader gives its read back.
CREATE FUNCTION {s}.release(p_ns text, p_key text, p_agent text, p_me integer)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE h {s}.holds;
BEGIN
    SELECT * INTO h FROM {s}.holds
    WHERE namespace = p_ns AND key = p_key AND agent_id = p_agent FOR UPDATE;
    IF NOT FOUND THEN RETURN {s}.release_read(p_ns, p_key, p_agent, p_me); END IF;
    PERFORM {s}.free(p_ns, p_key, h.token);
    IF h.queued OR h.readers > 0 THEN PERFORM {s}.hand_off(p_ns, p_key, p_me); END IF;
    RETURN true;
END $$;

-- Every lock of an agent (in one namespace, or all), freed and handed on, and every read of
-- it given back: their keys.
CREATE FUNCTION {s}.cleanup(p_agent text, p_ns text, p_me integer)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE h {s}.holds; r {s}.readers;
BEGIN
    FOR h IN SELECT * FROM {s}.holds WHERE agent_id = p_agent
             AND (p_ns IS NULL OR namespace = p_ns) ORDER BY namespace, key FOR UPDATE LOOP
        PERFORM {s}.free(h.namespace, h.key, h.token);
        PERFORM {s}.hand_off(h.namespace, h.key, p_me);
        RETURN NEXT h.key;
    END LOOP;
    FOR r IN SELECT * FROM {s}.readers WHERE agent_id = p_agent
             AND (p_ns IS NULL OR namespace = p_ns) ORDER BY namespace, key LOOP
        IF {s}.release_read(r.namespace, r.key, p_agent, p_me) THEN
            RETURN NEXT r.key;
        END IF;
    END LOOP;
END $$;

-- The glob index's entries of namespace p_ns (of the glob p_key only, when given) that no
-- hold, read or queue entry names any more (one of a dead session still counts, until it is
-- reclaimed). The caller holds the namespace's scope lock exclusively: see _GLOBS.
CREATE FUNCTION {s}.forget_globs(p_ns text, p_key text) RETURNS void LANGUAGE sql AS $$
    DELETE FROM {s}.globs g WHERE g.namespace = p_ns
        AND (p_key IS NULL OR (g.prefix = {s}.glob_prefix(p_key) AND g.key = p_key))
        AND NOT EXISTS (SELECT 1 FROM {s}.holds h WHERE h.namespace = p_ns AND h.key = g.key
                        AND (h.agent_id IS NOT NULL OR h.readers > 0))
        AND NOT EXISTS (SELECT 1 FROM {s}.waiters w WHERE w.namespace = p_ns
                        AND (w.key = g.key OR w.want = g.key))
$$;

-- A glob's release (or a reader's), then its index entry, if nothing else wants it. The
-- scope lock first, before any row lock, in the order every take takes them.
CREATE FUNCTION {s}.release_glob(p_ns text, p_key text, p_agent text, p_me integer)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE released boolean;
BEGIN
    PERFORM {s}.scope_guard(p_ns, p_key);
    released := {s}.release(p_ns, p_key, p_agent, p_me);
    PERFORM {s}.forget_globs(p_ns, p_key);
    RETURN released;
END $$;

-- A glob's waiter gives up (leave), then the glob's index entry, if nothing else wants it.
CREATE FUNCTION {s}.leave_glob(p_ns text, p_key text, p_ticket bigint, p_token text,
    p_me integer) RETURNS text LANGUAGE plpgsql AS $$
DECLARE outcome text;
BEGIN
    PERFORM {s}.scope_guard(p_ns, p_key);
    outcome := {s}.leave(p_ns, p_key, p_ticket, p_token, p_me);
    PERFORM {s}.forget_globs(p_ns, p_key);
    RETURN outcome;
END $$;

-- Every entry of the glob index that nothing wants any more (of one namespace, or all),
-- after a cleanup or a reclaim, each namespace under its scope lock.
CREATE FUNCTION {s}.prune_globs(p_ns text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE n text;
BEGIN
    FOR n IN SELECT DISTINCT namespace FROM {s}.globs WHERE p_ns IS NULL OR namespace = p_ns
             ORDER BY namespace LOOP
        PERFORM pg_advisory_xact_lock({scls}, hashtext(n));
        PERFORM {s}.forget_globs(n, NULL);
    END LOOP;
END $$;

-- Every hold, read and queue entry whose session has ended: removed, locks handed on (an
-- exclusive holder waiting for dead readers is granted).
CREATE FUNCTION {s}.reclaim(p_me integer)
RETURNS SETOF {s}.holds LANGUAGE plpgsql AS $$
DECLARE h {s}.holds; r record;
BEGIN
    DELETE FROM {s}.waiters w WHERE NOT {s}.alive(w.session, p_me);
    FOR h IN SELECT * FROM {s}.holds WHERE agent_id IS NOT NULL LOOP
        IF NOT {s}.alive(h.session, p_me) THEN
            IF {s}.free(h.namespace, h.key, h.token) THEN
                PERFORM {s}.hand_off(h.namespace, h.key, p_me);
                RETURN NEXT h;
            END IF;
        END IF;
    END LOOP;
    FOR r IN SELECT DISTINCT namespace, key FROM {s}.readers
             WHERE NOT {s}.alive(session, p_me) ORDER BY namespace, key LOOP
        PERFORM 1 FROM {s}.holds WHERE namespace = r.namespace AND key = r.key
            FOR NO KEY UPDATE;
        PERFORM {s}.readers_left(r.namespace, r.key, p_me);  -- drops the dead ones
    END LOOP;
END $$;
"""

# Victim notices, posted by `lockyard monitor` (its leader only).
_NOTICES: Final = """
-- A victim notice for an agent (the latest replaces the last), pushed to its namespace.
CREATE FUNCTION {s}.post_notice(p_agent text, p_ns text, p_waits_on text, p_wait_id text,
    p_notice_id text, p_body text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {s}.notices VALUES (p_agent, p_ns, p_waits_on, p_wait_id, p_notice_id, p_body)
    ON CONFLICT (agent_id) DO UPDATE SET namespace = excluded.namespace,
        waits_on = excluded.waits_on, wait_id = excluded.wait_id,
        notice_id = excluded.notice_id, body = excluded.body;
    PERFORM pg_notify({s}.channel(p_ns), 'v' || p_agent);
END $$;
"""

# Tables first: the SQL functions' bodies are checked against them when they are created.
_CREATE: Final = "\n".join(
    (
        _TABLES,
        _BASICS,
        _GLOBS,
        _READERS,
        _SCOPES,
        _HAND_OFF,
        _TAKE,
        _WAIT,
        _RELEASE,
        _NOTICES,
        JOURNAL_DDL,
    )
)


def _fill(text: str, schema: str) -> str:
    return (
        text.replace("{s}", f'"{schema}"')
        .replace("{cls}", str(lock_class(schema)))
        .replace("{scls}", str(scope_class(schema)))
        .replace("{prefix}", channel_prefix(schema))
        .replace("{schema}", schema)
        .replace("{graph}", graph_channel(schema))
    )


def ddl(schema: str) -> str:
    """The statements that create lockyard's schema `schema` (a checked plain name) at
    SCHEMA_VERSION."""
    return _fill(f"{_CREATE}\nINSERT INTO {{s}}.meta (version) VALUES ({SCHEMA_VERSION});", schema)


def upgrade_ddl(schema: str, installed: int, upgrades: Mapping[int, str] = UPGRADES) -> str:
    """The statements that bring `schema` from version `installed` to the latest, each step in
    turn."""
    latest = latest_version(upgrades)
    steps = [upgrades[version] for version in range(installed + 1, latest + 1)]
    steps.append(f"UPDATE {{s}}.meta SET version = {latest};")
    return _fill("\n".join(steps), schema)


def installed_version(conn: psycopg.Connection[Any], schema: str) -> int | None:
    """The version recorded in `schema`, or None when lockyard's tables are not there;
    SchemaError when a table `meta` is there that is not lockyard's."""
    found = conn.execute(
        "SELECT to_regclass(%s)::oid, (SELECT atttypid = 'integer'::regtype FROM pg_attribute"
        " WHERE attrelid = to_regclass(%s) AND attname = 'version' AND NOT attisdropped)",
        (f'"{schema}".meta', f'"{schema}".meta'),
    ).fetchone()
    if found is None or found[0] is None:
        return None
    if not found[1]:
        raise SchemaError(_foreign(schema, "a table meta with no integer column version"))
    row = conn.execute(f'SELECT version FROM "{schema}".meta').fetchone()
    return None if row is None else int(row[0])


class SchemaMissingError(SchemaError):
    """lockyard's schema is not in the database (yet): nothing was ever locked there."""

    def __init__(self, schema: str) -> None:
        self.reason = f"lockyard's schema {schema!r} does not exist in this database yet"
        super().__init__(f"{self.reason}: no agent has locked anything there")


def _foreign(schema: str, what: str) -> str:
    return (
        f"schema {schema!r} already holds {what}, which lockyard did not create: lockyard "
        "keeps its tables in a schema of its own; name another one in the backend spec "
        f"(?lockyard_schema=NAME), or move that object out of {schema!r}"
    )


def check_schema(
    conn: psycopg.Connection[Any], schema: str, upgrades: Mapping[int, str] = UPGRADES
) -> None:
    """For reading only: `schema` is there at the latest version, untouched
    (SchemaMissingError when absent; SchemaError when older or newer: reading never
    upgrades). `upgrades`: UPGRADES, or a test's own steps."""
    version = installed_version(conn, schema)
    if version is None:
        raise SchemaMissingError(schema)
    latest = latest_version(upgrades)
    if version < latest:
        raise SchemaError(
            f"the database's lockyard schema {schema!r} is version {version}, older than this "
            f"lockyard ({latest}); reading never upgrades it: run a command that locks "
            "(lockyard serve, clean), as a role that owns the schema, to upgrade it"
        )
    _refuse_newer(version, schema, latest)


def ensure_schema(
    conn: psycopg.Connection[Any], schema: str, upgrades: Mapping[int, str] = UPGRADES
) -> None:
    """Create `schema` unless it is there, upgrade an older one, refuse a newer one.
    `upgrades`: UPGRADES, or a test's own steps beyond them (to see one run once).

    `conn` must be in autocommit mode; creation or upgrade runs in one transaction of its own,
    so a client sees the schema before or after it, never half-way.
    """
    latest = latest_version(upgrades)
    version = installed_version(conn, schema)
    if version is None or version < latest:
        # Serialise creators: the losers of the race wait on this lock, then see the version.
        # A session lock, so that the check after it runs in a new transaction: one that
        # waited inside a transaction would still see the catalog as it was before the wait.
        conn.execute("SELECT pg_advisory_lock(%s, -1)", (lock_class(schema),))
        try:
            version = installed_version(conn, schema)
            if version is None or version < latest:
                version = _create_or_upgrade(conn, schema, version, upgrades)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s, -1)", (lock_class(schema),))
    _refuse_newer(version, schema, latest)


def _create_or_upgrade(
    conn: psycopg.Connection[Any], schema: str, version: int | None, upgrades: Mapping[int, str]
) -> int:
    """Create `schema` as this lockyard makes it (when `version` is None), then run the steps
    from there to the latest version, all in one transaction: the version it is now at."""
    try:
        with conn.transaction():
            if version is None:
                conn.execute(ddl(schema).encode())
                version = SCHEMA_VERSION
            if version < latest_version(upgrades):
                conn.execute(upgrade_ddl(schema, version, upgrades).encode())
                version = latest_version(upgrades)
    except (
        psycopg.errors.DuplicateTable,
        psycopg.errors.DuplicateObject,
        psycopg.errors.DuplicateFunction,
    ) as exc:
        detail = (exc.diag.message_primary or str(exc)).replace('"', "")
        what = f"an object of the same name ({detail})"
        raise SchemaError(_foreign(schema, what)) from None
    return version


def _refuse_newer(version: int, schema: str, latest: int = SCHEMA_VERSION) -> None:
    if version > latest:
        raise SchemaError(
            f"the database's lockyard schema {schema!r} is version {version}, newer than this "
            f"lockyard understands ({latest}): upgrade lockyard on this host, or use "
            "another schema (lockyard_schema=...) for older clients"
        )
