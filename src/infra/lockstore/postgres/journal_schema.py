"""The journal on PostgreSQL: a table written in the same transaction as each change.

A grant and its record commit together (or neither does), whichever statement or function
made the change. The store's two hot statements (take a free lock, release) write their own
records, in a data-modifying CTE of the statement (`grant_record`, `release_record`): a
trigger call costs the server more than the rest of the cycle's journal work (the trigger
function's interpreter, and an executor started and torn down for each insert it runs), and
with triggers the journal cost the uncontended cycle 1.54x the server's instructions, with
CTEs 1.2x. Such a change flips its row's `recorded` (holds), which tells the triggers it is
recorded already. Every other change is recorded by triggers on `holds`, `readers` and
`waiters`: `take_slow`, `hand_off`, `advance`, `leave`, `cleanup`, `reclaim`, an operator's
`DELETE`, and any statement written later that does not know of the journal. A row change
alone does not say everything, so the statements that know more say it in transaction-local
settings the triggers read:

- `lockyard.handing` (set by `hand_off`): a holder written in now was handed the lock by
  a release, not a taker of a free lock (a hand-over, not a grant; its giver is the
  agent of the lock's last release record); the release statement that writes the next
  holder over the last one is a hand-over by itself;
- `lockyard.why` (set by the client with `leave`): how a wait that did not get its lock
  ended: timed-out, cancelled or victim;
- `lockyard.cause` = `operator` (set by `lockyard clean` and the admin tools): a lock freed
  now is an operator release, not a reclaim.
- `lockyard.by` (set by `reclaim_by` where a request takes back a dead session's lock): the
  agent a `reclaim` record names as the one that took it back (`other`).

And per session: `lockyard.session` (the session number, set when the session opens: a
lock freed by a session that is not its holder's is a reclaim of a dead session's lock, as
only those are freed by others), `lockyard.journal` (`off`: no records; the triggers'
WHEN clauses test it, so the journal switched off costs no trigger call) and
`lockyard.retention` (seconds of records kept).

Retention: every 1024th record's insert also deletes the records older than the retention
of the session that wrote it (default 14 days, `LOCKYARD_JOURNAL_RETENTION`), so the table
stays bounded with no job to run.

Sums for `lockyard stats`: a million rows take the server seconds to aggregate, so the
figures of each whole block of SUM_BLOCK record ids are kept, summed once (`journal_sums`,
the rows of the stats query itself), and a reader adds only the rows no sum covers. A block
may be summed once every transaction that could still write into it has ended: the writer
of a block's first id after it names it in `journal_blocks` with the next transaction id
then (`ready`), and each housekeeping step sums one named block whose `ready` is older than
every running transaction, so the writers keep the sums made as they go; a reader names the
blocks no writer did, and `journal_seal()` sums whatever is still ready and unsummed
(readers run it; a reader that may not write reads the rows instead). Pruning drops the
sums of the blocks it cuts into.

Out of the lock path's failure modes: the table is UNLOGGED like the lock tables (a record
costs no write-ahead log, and a full disk cannot stop the server through it: a server that
cannot write its log stops), so it survives a clean restart but is emptied by a crash, as the
locks are; and a record that cannot be written (a refused constraint, a revoked privilege)
never fails the change: a trigger catches it in its own subtransaction (the change commits
without it, and the server logs a warning), and a hot statement whose record fails is run
again as its function (`take`, `release`), whose triggers do so (store.py).
"""

from __future__ import annotations

import os
import re
from typing import Final

from ..errors import LockStoreError
from ..journal.files import journal_enabled

RETENTION_ENV: Final = "LOCKYARD_JOURNAL_RETENTION"
DEFAULT_RETENTION_SECONDS: Final = 14 * 86400
PRUNE_EVERY: Final = 1024
SUM_BLOCK: Final = 32768
"""Record ids per summed block (a multiple of PRUNE_EVERY: the writers name a finished block
in the same step as pruning). Big enough that a block's sums are few rows beside its
records, small enough that the rows no sum covers yet are quick to add up."""
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RETENTION: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")


class RetentionSettingError(LockStoreError, ValueError):
    """`LOCKYARD_JOURNAL_RETENTION` is not a duration lockyard understands."""


def retention_from_env(environ: dict[str, str] | None = None) -> int:
    """Seconds of records the PostgreSQL journal keeps: `LOCKYARD_JOURNAL_RETENTION`
    (`30d`, `36h`, `90m`, `600s`), default 14 days."""
    raw = (environ if environ is not None else os.environ).get(RETENTION_ENV, "").strip()
    if not raw:
        return DEFAULT_RETENTION_SECONDS
    match = _RETENTION.match(raw)
    if match is None or float(match.group(1)) <= 0:
        raise RetentionSettingError(
            f"{RETENTION_ENV}={raw!r} is not a duration: write it as 14d, 36h, 90m or 600s"
        )
    return max(1, int(float(match.group(1)) * _UNITS[match.group(2)]))


def journal_settings() -> dict[str, str]:
    """What a lockyard session sets for the journal: on or off (`LOCKYARD_JOURNAL`), and
    the retention."""
    return {
        "lockyard.journal": "on" if journal_enabled() else "off",
        "lockyard.retention": str(retention_from_env()),
    }


# The journal's objects, created with the rest of the schema (schema.py fills {s}, {prefix}).
# 1024: PRUNE_EVERY; 1209600: DEFAULT_RETENTION_SECONDS; {block}: SUM_BLOCK.
_DDL: Final = """
CREATE UNLOGGED TABLE {s}.journal (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    t double precision NOT NULL,
    kind text NOT NULL,
    namespace text NOT NULL,
    agent text NOT NULL,
    file text NOT NULL,
    session text NOT NULL,
    pid integer NOT NULL,
    host text NOT NULL,
    fence bigint,
    waited double precision,
    held double precision,
    outcome text,
    other text,
    reason text,
    guard text,
    detail jsonb
);
-- Records are appended in time order: a block range index finds a time window at the cost
-- of a few bytes per 128 pages, where a B-tree would cost every insert a second index.
CREATE INDEX journal_t ON {s}.journal USING brin (t);
-- Deadlocks are rare and every query about an agent or a file asks for them too (a cycle
-- names its agents and files in `detail`): a partial index costs the other records nothing.
CREATE INDEX journal_deadlocks ON {s}.journal (id) WHERE kind = 'deadlock';
-- Whole blocks of record ids (block k: ids k*{block} to k*{block}+{block}-1), their sums
-- made once no transaction that could write into them runs (`ready`: the next transaction id
-- when the block was finished), and its span of times (for a window of `lockyard stats`).
CREATE UNLOGGED TABLE {s}.journal_blocks (
    block bigint PRIMARY KEY,
    ready xid8 NOT NULL,
    summed boolean NOT NULL DEFAULT false,
    first double precision,
    last double precision
);
-- A block's rows of the stats query (journal.py: per file, per agent, per kind).
CREATE UNLOGGED TABLE {s}.journal_sums (
    block bigint NOT NULL,
    file text,
    agent text,
    kind text,
    grouped integer NOT NULL,
    records bigint NOT NULL,
    first double precision NOT NULL,
    last double precision NOT NULL,
    figured bigint NOT NULL,
    holds bigint NOT NULL,
    held double precision NOT NULL,
    waits bigint NOT NULL,
    waited double precision NOT NULL,
    longest double precision NOT NULL,
    granted bigint NOT NULL,
    timeouts bigint NOT NULL,
    denied bigint NOT NULL
);
CREATE INDEX journal_sums_block ON {s}.journal_sums (block);
-- The backends following the journal (`lockyard log --follow`, the views): a record is
-- notified only while there is one, so that a journal nobody follows costs no NOTIFY.
CREATE UNLOGGED TABLE {s}.journal_followers (pid integer PRIMARY KEY);


-- The figures of `lockyard stats` over the records of ids lo to hi - 1 (in a window of
-- times, when given), per file, per agent and per kind at once, summed by the server in one
-- pass (`grouped` tells which: 3, 5, 6). Every figure is a count, a sum, a least or a
-- greatest, so rows of parts add up to the rows of the whole.
CREATE FUNCTION {s}.journal_figures(lo bigint, hi bigint, since double precision DEFAULT NULL,
    until double precision DEFAULT NULL)
RETURNS TABLE (file text, agent text, kind text, grouped integer, records bigint,
    first double precision, last double precision, figured bigint, holds bigint,
    held double precision, waits bigint, waited double precision, longest double precision,
    granted bigint, timeouts bigint, denied bigint)
LANGUAGE sql STABLE AS $$
    SELECT file, agent, kind, grouping(file, agent, kind), count(*), min(t), max(t),
        count(*) FILTER (WHERE kind IN ('grant', 'hand-over', 'release', 'reclaim',
                                        'operator-release', 'wait-end', 'denied')),
        count(*) FILTER (WHERE kind IN ('grant', 'hand-over')
                         AND outcome IS DISTINCT FROM 'upgrade'),
        coalesce(sum(held) FILTER (WHERE kind IN ('release', 'reclaim', 'operator-release')),
                 0),
        count(*) FILTER (WHERE kind = 'wait-end'),
        coalesce(sum(waited) FILTER (WHERE kind = 'wait-end'), 0),
        coalesce(max(waited) FILTER (WHERE kind = 'wait-end'), 0),
        count(*) FILTER (WHERE kind = 'wait-end' AND outcome = 'granted'),
        count(*) FILTER (WHERE kind = 'wait-end' AND outcome = 'timed-out'),
        count(*) FILTER (WHERE kind = 'denied')
    FROM {s}.journal
    WHERE id >= lo AND id < hi AND (since IS NULL OR t >= since)
        AND (until IS NULL OR t < until)
    GROUP BY GROUPING SETS ((file), (agent), (kind))
$$;

-- Sum block k (its rows of the stats query, and its span of times); the caller holds its
-- journal_blocks row (FOR UPDATE), and knows no transaction can still write into it.
CREATE FUNCTION {s}.journal_sum_block(k bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {s}.journal_sums
    SELECT k, * FROM {s}.journal_figures(k * {block}, k * {block} + {block});
    UPDATE {s}.journal_blocks SET summed = true,
        first = (SELECT min(first) FROM {s}.journal_sums WHERE block = k AND grouped = 6),
        last = (SELECT max(last) FROM {s}.journal_sums WHERE block = k AND grouped = 6)
    WHERE block = k;
END $$;

-- Sum the finished blocks nobody can still write into (run by readers, in a transaction of
-- its own). Blocks no writer named (the id at their end was never written, or rolled back)
-- are named now. Two readers never sum one block: a block being summed is skipped.
CREATE FUNCTION {s}.journal_seal() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    horizon xid8 := pg_snapshot_xmin(pg_current_snapshot());
    k bigint;
BEGIN
    INSERT INTO {s}.journal_blocks (block, ready)
    SELECT b, pg_snapshot_xmax(pg_current_snapshot())
    FROM (SELECT min(id) / {block} AS low, max(id) / {block} AS high FROM {s}.journal) ends,
        generate_series(ends.low, ends.high - 1) b
    ON CONFLICT DO NOTHING;
    FOR k IN SELECT block FROM {s}.journal_blocks WHERE NOT summed AND ready <= horizon
             ORDER BY block FOR UPDATE SKIP LOCKED LOOP
        PERFORM {s}.journal_sum_block(k);
    END LOOP;
END $$;

-- Every 1024th record: drop what is past the writer's retention (and the sums of blocks
-- that lose records); at a block's first id, name the block before it as finished; and sum
-- one named block nobody can still write into, so that the writers keep the sums up to date
-- and the first `stats` after an afternoon of records finds them made (a reader summing a
-- million records takes seconds). One block (tens of milliseconds) per call, in a
-- subtransaction: a failure there costs the sums, never the record that called it.
CREATE FUNCTION {s}.journal_housekeeping(n bigint, now double precision)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    cutoff double precision := now - coalesce(
        nullif(current_setting('lockyard.retention', true), '')::double precision, 1209600);
    k bigint;
BEGIN
    DELETE FROM {s}.journal WHERE t < cutoff;
    WITH gone AS (DELETE FROM {s}.journal_blocks WHERE first < cutoff RETURNING block)
    DELETE FROM {s}.journal_sums WHERE block IN (SELECT block FROM gone);
    IF n % {block} = 0 THEN
        INSERT INTO {s}.journal_blocks (block, ready)
        VALUES (n / {block} - 1, pg_snapshot_xmax(pg_current_snapshot()))
        ON CONFLICT DO NOTHING;
    END IF;
    BEGIN
        SELECT block INTO k FROM {s}.journal_blocks
        WHERE NOT summed AND ready <= pg_snapshot_xmin(pg_current_snapshot())
        ORDER BY block LIMIT 1 FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
            PERFORM {s}.journal_sum_block(k);
        END IF;
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'lockyard journal: block % was not summed: %', k, SQLERRM;
    END;
END $$;

-- A holds row changed holder: the holder it had lost it (release, reclaim, operator
-- release), the holder it has now got it (grant, hand-over). A readers row, made or
-- removed, is a shared hold's grant or release the same way. What the triggers' WHEN
-- clauses could test is tested here instead (the journal switched off, a holds row whose
-- holder stays): a WHEN clause is parsed again by every statement that changes a row of its
-- table, the hot ones too, and cost them more than a call here costs the others. The
-- recording is one subtransaction: a record that cannot be written (a full disk, a revoked
-- privilege) never fails the change it records, which commits without it while the server
-- logs why.
CREATE FUNCTION {s}.journal_holds() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    now double precision := date_part('epoch', clock_timestamp());
    kind text;
    giver text;
    n bigint;
    n_before bigint;
    waited_old double precision;  -- since when the old holder or reader waited (`pending`)
    waited_new double precision;  -- and the new one
    how text;  -- a grant's outcome: shared (a read), upgrade (the holder's read goes into it)
BEGIN
    IF current_setting('lockyard.journal', true) = 'off'
       OR (TG_OP = 'INSERT' AND NEW.agent_id IS NULL) THEN
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN waited_old := OLD.pending; END IF;
    IF TG_OP <> 'DELETE' THEN waited_new := NEW.pending; END IF;
    IF TG_OP = 'UPDATE' AND OLD.token IS NOT DISTINCT FROM NEW.token
       AND (waited_old IS NULL OR waited_new IS NOT NULL) THEN
        RETURN NULL;  -- the same holder or reader, whose wait (if any) goes on
    END IF;
    IF TG_TABLE_NAME = 'readers' THEN
        how := 'shared';
        IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM {s}.holds WHERE namespace =
               OLD.namespace AND key = OLD.key AND agent_id = OLD.agent_id) THEN
            RETURN NULL;  -- an upgrade's read, gone into its hold: no release (nor reclaim)
        END IF;
    ELSIF TG_OP <> 'DELETE' AND NEW.readers > 0 AND EXISTS (SELECT 1 FROM {s}.readers
              WHERE namespace = NEW.namespace AND key = NEW.key AND agent_id = NEW.agent_id) THEN
        how := 'upgrade';  -- one hold with the read (stats count it once)
    END IF;
    BEGIN
        IF TG_OP = 'UPDATE' AND OLD.token = NEW.token THEN
            -- A holder that waited for readers (or a holder or reader of a directory or glob
            -- for the holds under it) is granted, as a waiter is at a hand-over: from the last
            -- reader to leave (a directory's giver is not looked up: many holds under it may
            -- have ended).
            IF NOT {s}.scoped(NEW.key) THEN
                SELECT j.agent INTO giver FROM {s}.journal j WHERE j.namespace = NEW.namespace
                    AND j.file = NEW.key AND j.kind IN ('release', 'reclaim', 'operator-release')
                    ORDER BY j.id DESC LIMIT 1;
            END IF;
            INSERT INTO {s}.journal (t, kind, namespace, agent, file, session, pid, host, fence,
                other, outcome)
            VALUES (now, 'hand-over', NEW.namespace, NEW.agent_id, NEW.key, NEW.session::text,
                coalesce(NEW.pid, 0), coalesce(NEW.host, ''), NEW.fence, giver, how)
            RETURNING id INTO n_before;
            IF n_before % 1024 = 0 THEN
                PERFORM {s}.journal_housekeeping(n_before, now);
            END IF;
            INSERT INTO {s}.journal (t, kind, namespace, agent, file, session, pid, host, waited,
                outcome)
            VALUES (now, 'wait-end', NEW.namespace, NEW.agent_id, NEW.key, NEW.session::text,
                coalesce(NEW.pid, 0), coalesce(NEW.host, ''), greatest(now - waited_old, 0),
                'granted')
            RETURNING id INTO n;
        ELSIF TG_OP <> 'INSERT' AND OLD.agent_id IS NOT NULL AND waited_old IS NOT NULL THEN
            -- A holder still waiting gave up (or its session ended): its wait ended, and it
            -- never held the lock.
            INSERT INTO {s}.journal (t, kind, namespace, agent, file, session, pid, host, waited,
                outcome)
            VALUES (now, 'wait-end', OLD.namespace, OLD.agent_id, OLD.key, OLD.session::text,
                coalesce(OLD.pid, 0), coalesce(OLD.host, ''), greatest(now - waited_old, 0),
                coalesce(nullif(current_setting('lockyard.why', true), ''), 'cancelled'))
            RETURNING id INTO n;
        ELSIF TG_OP <> 'INSERT' AND OLD.agent_id IS NOT NULL THEN
            kind := CASE
                WHEN current_setting('lockyard.cause', true) = 'operator' THEN 'operator-release'
                WHEN OLD.session::text IS DISTINCT FROM current_setting('lockyard.session', true)
                    THEN 'reclaim'
                ELSE 'release' END;
            INSERT INTO {s}.journal (t, kind, namespace, agent, file, session, pid, host, held,
                other, reason)
            VALUES (now, kind, OLD.namespace, OLD.agent_id, OLD.key, OLD.session::text,
                coalesce(OLD.pid, 0), coalesce(OLD.host, ''), now - OLD.acquired_at,
                CASE kind WHEN 'operator-release'
                    THEN nullif(current_setting('lockyard.operator', true), '')
                    WHEN 'reclaim' THEN nullif(current_setting('lockyard.by', true), '') END,
                CASE kind WHEN 'reclaim'
                    THEN 'its database session ' || OLD.session || ' ended' END)
            RETURNING id INTO n;
        END IF;
        IF n % 1024 = 0 THEN
            PERFORM {s}.journal_housekeeping(n, now);
        END IF;
        n := NULL;
        IF TG_OP = 'DELETE' OR NEW.agent_id IS NULL OR OLD.token = NEW.token THEN
            NULL;  -- no new holder
        ELSIF waited_new IS NOT NULL THEN
            -- Written in as the holder (or a reader), it waits for readers (or the holds under
            -- its directory): a wait begins, unless it began in the queue it comes from (whose
            -- entry goes after this, in the same transaction).
            IF NOT EXISTS (SELECT 1 FROM {s}.waiters WHERE token = NEW.token) THEN
                INSERT INTO {s}.journal (t, kind, namespace, agent, file, session, pid, host)
                VALUES (now, 'wait-begin', NEW.namespace, NEW.agent_id, NEW.key,
                    NEW.session::text, coalesce(NEW.pid, 0), coalesce(NEW.host, ''))
                RETURNING id INTO n;
            END IF;
        ELSE
            IF TG_OP = 'UPDATE' AND OLD.agent_id IS NOT NULL THEN
                kind := 'hand-over';
                giver := OLD.agent_id;
            ELSIF current_setting('lockyard.handing', true) = 'on' THEN
                kind := 'hand-over';  -- freed earlier in this transaction: by whom, it says
                SELECT j.agent INTO giver FROM {s}.journal j WHERE j.namespace = NEW.namespace
                    AND j.file = NEW.key AND j.kind IN ('release', 'reclaim', 'operator-release')
                    ORDER BY j.id DESC LIMIT 1;
            ELSE
                kind := 'grant';
            END IF;
            INSERT INTO {s}.journal (t, kind, namespace, agent, file, session, pid, host, fence,
                other, outcome)
            VALUES (now, kind, NEW.namespace, NEW.agent_id, NEW.key, NEW.session::text,
                coalesce(NEW.pid, 0), coalesce(NEW.host, ''), NEW.fence, giver, how)
            RETURNING id INTO n;
        END IF;
        IF n % 1024 = 0 THEN
            PERFORM {s}.journal_housekeeping(n, now);
        END IF;
        IF EXISTS (SELECT 1 FROM {s}.journal_followers) THEN  -- nobody follows: no NOTIFY
            PERFORM pg_notify('{prefix}_journal', '');
        END IF;
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'lockyard journal: a record of % was not written: %', TG_TABLE_NAME,
            SQLERRM;
    END;
    RETURN NULL;
END $$;

-- A queue entry came (wait-begin) or went (wait-end: granted when its token now holds the
-- lock, else as the client said, else cancelled).
CREATE FUNCTION {s}.journal_waiters() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    now double precision := date_part('epoch', clock_timestamp());
    n bigint;
    holding double precision;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {s}.journal (t, kind, namespace, agent, file, session, pid, host)
        VALUES (now, 'wait-begin', NEW.namespace, NEW.agent_id, coalesce(NEW.want, NEW.key),
            NEW.session::text, NEW.pid, NEW.host)
        RETURNING id INTO n;
    ELSE
        SELECT coalesce(pending, 0) INTO holding FROM {s}.holds
        WHERE namespace = OLD.namespace AND key = coalesce(OLD.want, OLD.key)
            AND token = OLD.token;
        IF holding IS NULL THEN
            SELECT coalesce(pending, 0) INTO holding FROM {s}.readers
            WHERE namespace = OLD.namespace AND key = coalesce(OLD.want, OLD.key)
                AND token = OLD.token;
        END IF;
        IF holding > 0 THEN
            RETURN NULL;  -- written in as the holder or a reader, it waits on: not over yet
        END IF;
        INSERT INTO {s}.journal (t, kind, namespace, agent, file, session, pid, host, waited,
            outcome)
        VALUES (now, 'wait-end', OLD.namespace, OLD.agent_id, coalesce(OLD.want, OLD.key),
            OLD.session::text, OLD.pid, OLD.host, now - OLD.since,
            CASE WHEN holding IS NOT NULL THEN 'granted'
                ELSE coalesce(nullif(current_setting('lockyard.why', true), ''), 'cancelled')
            END)
        RETURNING id INTO n;
    END IF;
    IF n % 1024 = 0 THEN
        PERFORM {s}.journal_housekeeping(n, now);
    END IF;
    IF EXISTS (SELECT 1 FROM {s}.journal_followers) THEN
        PERFORM pg_notify('{prefix}_journal', '');
    END IF;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'lockyard journal: a record of % was not written: %', TG_TABLE_NAME, SQLERRM;
    RETURN NULL;
END $$;

-- A change of a holds row that recorded itself (a hot statement: it writes `recorded` true
-- in a new row, and flips it in a row it updates) is skipped; every other writer leaves
-- `recorded` as it was, so a statement that knows nothing of the journal is recorded here.
-- Nothing else in the WHEN clauses: the hot statements parse them (journal_holds).
CREATE TRIGGER holds_journal_insert AFTER INSERT ON {s}.holds FOR EACH ROW
    WHEN (NOT NEW.recorded) EXECUTE FUNCTION {s}.journal_holds();
CREATE TRIGGER holds_journal_update AFTER UPDATE ON {s}.holds FOR EACH ROW
    WHEN (OLD.recorded = NEW.recorded) EXECUTE FUNCTION {s}.journal_holds();
CREATE TRIGGER holds_journal_delete AFTER DELETE ON {s}.holds FOR EACH ROW
    WHEN (OLD.agent_id IS NOT NULL
          AND current_setting('lockyard.journal', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION {s}.journal_holds();
-- A reader's row: its shared grant (outcome "shared") and its release, as for a holder;
-- for a reader of a directory or glob that waits for the writes under it, its wait.
CREATE TRIGGER readers_journal AFTER INSERT OR UPDATE OR DELETE ON {s}.readers FOR EACH ROW
    WHEN (current_setting('lockyard.journal', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION {s}.journal_holds();
CREATE TRIGGER waiters_journal AFTER INSERT OR DELETE ON {s}.waiters FOR EACH ROW
    WHEN (current_setting('lockyard.journal', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION {s}.journal_waiters();
"""
JOURNAL_DDL: Final = _DDL.replace("{block}", str(SUM_BLOCK))

_JOURNAL_ON: Final = "current_setting('lockyard.journal', true) IS DISTINCT FROM 'off'"


def _after_record(s: str, channel: str) -> str:
    """The RETURNING list of a hot statement's record insert: what the triggers do after each
    record (every PRUNE_EVERY-th id, the housekeeping step; a NOTIFY while someone follows)."""
    return (
        f"CASE WHEN id % {PRUNE_EVERY} = 0 THEN {s}.journal_housekeeping(id, t)::text END, "
        f"CASE WHEN EXISTS (SELECT FROM {s}.journal_followers) "
        f"THEN pg_notify('{channel}', '')::text END"
    )


def release_record(s: str, channel: str, moved: str) -> str:
    """A CTE's body: the record of the release the CTE `moved` made by itself (its RETURNING:
    `mine`, and the holder's session, pid, host, acquired_at before it), lock $2 of
    namespace $1, agent $3, as the update trigger writes it."""
    return f"""INSERT INTO {s}.journal (t, kind, namespace, agent, file, session, pid, host, held)
    SELECT c.t, 'release', $1, $3, $2, session::text, coalesce(pid, 0), coalesce(host, ''),
        c.t - acquired_at
    FROM {moved}, LATERAL (SELECT date_part('epoch', clock_timestamp()) AS t) AS c
    WHERE mine AND {_JOURNAL_ON}
    RETURNING {_after_record(s, channel)}"""


def grant_record(s: str, channel: str, taken: str) -> str:
    """A CTE's body: the record of the grant the CTE `taken` made (its RETURNING: fence,
    agent_id, session, pid, host, acquired_at; none when it made none), lock $2 of namespace
    $1, as the insert trigger writes it. `s`: the quoted schema; `channel`: the journal's."""
    return f"""INSERT INTO {s}.journal (t, kind, namespace, agent, file, session, pid, host, fence)
    SELECT acquired_at, 'grant', $1, agent_id, $2, session::text, coalesce(pid, 0),
        coalesce(host, ''), fence
    FROM {taken} WHERE {_JOURNAL_ON}
    RETURNING {_after_record(s, channel)}"""
