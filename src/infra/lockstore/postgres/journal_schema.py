"""The journal on PostgreSQL: a table written in the same transaction as each change.

Triggers on `holds` and `waiters` write the records, so a grant and its record commit
together (or neither does), whichever statement or function made the change: the two hot
statements of the store, `take_slow`, `hand_off`, `advance`, `leave`, `cleanup`,
`reclaim`, or an operator's `DELETE`. A row change alone does not say everything, so the
statements that know more say it in transaction-local settings the triggers read:

- `lockyard.handing` (set by `hand_off`): a holder written in now was handed the lock by
  a release, not a taker of a free lock (a hand-over, not a grant); the release statement
  that writes the next holder over the last one is a hand-over by itself;
- `lockyard.freed` (set by the trigger): the agent whose lock was just freed in this
  transaction, named as the hand-over's giver;
- `lockyard.why` (set by the client with `leave`): how a wait that did not get its lock
  ended: timed-out, cancelled or victim;
- `lockyard.cause` = `operator` (set by `lockyard clean` and the admin tools): a lock freed
  now is an operator release, not a reclaim.

And per session: `lockyard.session` (the session number, set when the session opens: a
lock freed by a session that is not its holder's is a reclaim of a dead session's lock, as
only those are freed by others), `lockyard.journal` (`off`: no records; the triggers'
WHEN clauses test it, so the journal switched off costs no trigger call) and
`lockyard.retention` (seconds of records kept).

Retention: every 1024th record's insert also deletes the records older than the retention
of the session that wrote it (default 14 days, `LOCKYARD_JOURNAL_RETENTION`), so the table
stays bounded with no job to run.

Out of the lock path's failure modes: the table is UNLOGGED like the lock tables (a record
costs no write-ahead log, and a full disk cannot stop the server through it: a server that
cannot write its log stops), so it survives a clean restart but is emptied by a crash; and a
record that cannot be written (a full disk, a revoked privilege) is caught in its own
subtransaction: the change commits without it, and the server logs a warning.
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
# 1024: PRUNE_EVERY; 1209600: DEFAULT_RETENTION_SECONDS.
JOURNAL_DDL: Final = """
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
CREATE INDEX journal_t ON {s}.journal (t);

-- One record; every PRUNE_EVERY-th also drops what is past the writer's retention.
CREATE FUNCTION {s}.journal_write(p_t double precision, p_kind text, p_ns text,
    p_agent text, p_file text, p_session text, p_pid integer, p_host text, p_fence bigint,
    p_waited double precision, p_held double precision, p_outcome text, p_other text,
    p_reason text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
    INSERT INTO {s}.journal (t, kind, namespace, agent, file, session, pid, host, fence,
        waited, held, outcome, other, reason)
    VALUES (p_t, p_kind, p_ns, p_agent, p_file, coalesce(p_session, ''),
        coalesce(p_pid, 0), coalesce(p_host, ''), p_fence, p_waited, p_held, p_outcome,
        p_other, p_reason)
    RETURNING id INTO n;
    IF n % 1024 = 0 THEN
        DELETE FROM {s}.journal WHERE t < p_t - coalesce(
            nullif(current_setting('lockyard.retention', true), '')::double precision,
            1209600);
    END IF;
    PERFORM pg_notify('{prefix}_journal', '');
EXCEPTION WHEN OTHERS THEN
    -- The journal never fails the change it records (a full disk, a revoked privilege):
    -- the change commits without its record, and the server logs why.
    RAISE WARNING 'lockyard journal: a % record was not written: %', p_kind, SQLERRM;
END $$;

-- A holds row changed holder: the holder it had lost it (release, reclaim, operator
-- release), the holder it has now got it (grant, hand-over).
CREATE FUNCTION {s}.journal_holds() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    now double precision := date_part('epoch', clock_timestamp());
    kind text;
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.agent_id IS NOT NULL THEN
        kind := CASE
            WHEN current_setting('lockyard.cause', true) = 'operator' THEN 'operator-release'
            WHEN OLD.session::text IS DISTINCT FROM current_setting('lockyard.session', true)
                THEN 'reclaim'
            ELSE 'release' END;
        PERFORM {s}.journal_write(now, kind, OLD.namespace, OLD.agent_id, OLD.key,
            OLD.session::text, OLD.pid, OLD.host, NULL, NULL, now - OLD.acquired_at, NULL,
            CASE kind WHEN 'operator-release'
                THEN nullif(current_setting('lockyard.operator', true), '') END,
            CASE kind WHEN 'reclaim'
                THEN 'its database session ' || OLD.session || ' ended' END);
        PERFORM set_config('lockyard.freed', OLD.agent_id, true);
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.agent_id IS NOT NULL THEN
        kind := CASE WHEN TG_OP = 'UPDATE' AND OLD.agent_id IS NOT NULL THEN 'hand-over'
            WHEN current_setting('lockyard.handing', true) = 'on' THEN 'hand-over'
            ELSE 'grant' END;
        PERFORM {s}.journal_write(now, kind, NEW.namespace, NEW.agent_id, NEW.key,
            NEW.session::text, NEW.pid, NEW.host, NEW.fence, NULL, NULL, NULL,
            CASE kind WHEN 'hand-over' THEN coalesce(OLD.agent_id,
                nullif(current_setting('lockyard.freed', true), '')) END, NULL);
    END IF;
    RETURN NULL;
END $$;

-- A queue entry came (wait-begin) or went (wait-end: granted when its token now holds the
-- lock, else as the client said, else cancelled).
CREATE FUNCTION {s}.journal_waiters() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE now double precision := date_part('epoch', clock_timestamp());
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM {s}.journal_write(now, 'wait-begin', NEW.namespace, NEW.agent_id, NEW.key,
            NEW.session::text, NEW.pid, NEW.host, NULL, NULL, NULL, NULL, NULL, NULL);
        RETURN NULL;
    END IF;
    PERFORM {s}.journal_write(now, 'wait-end', OLD.namespace, OLD.agent_id, OLD.key,
        OLD.session::text, OLD.pid, OLD.host, NULL, now - OLD.since, NULL,
        CASE WHEN EXISTS (SELECT 1 FROM {s}.holds WHERE namespace = OLD.namespace
                          AND key = OLD.key AND token = OLD.token) THEN 'granted'
            ELSE coalesce(nullif(current_setting('lockyard.why', true), ''), 'cancelled')
        END, NULL, NULL);
    RETURN NULL;
END $$;

CREATE TRIGGER holds_journal_insert AFTER INSERT ON {s}.holds FOR EACH ROW
    WHEN (NEW.agent_id IS NOT NULL
          AND current_setting('lockyard.journal', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION {s}.journal_holds();
CREATE TRIGGER holds_journal_update AFTER UPDATE ON {s}.holds FOR EACH ROW
    WHEN (OLD.token IS DISTINCT FROM NEW.token
          AND current_setting('lockyard.journal', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION {s}.journal_holds();
CREATE TRIGGER holds_journal_delete AFTER DELETE ON {s}.holds FOR EACH ROW
    WHEN (OLD.agent_id IS NOT NULL
          AND current_setting('lockyard.journal', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION {s}.journal_holds();
CREATE TRIGGER waiters_journal AFTER INSERT OR DELETE ON {s}.waiters FOR EACH ROW
    WHEN (current_setting('lockyard.journal', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION {s}.journal_waiters();
"""
