"""What the lock directory writes to the journal of its own lock changes, as PostgreSQL's
triggers do for theirs: grants, waits and how they ended, releases with how long the lock was
held, hand-overs to a waiter, reclaims with their proof of death, pass-overs and operators'
releases (docs/observability.md says who writes what).

It records what happened to the lock asked for, not to the lines a request passes through:
a file's line taken and given back because a directory over it is held (`scopes.py`), or a
directory's line held for a moment as a turnstile, is no grant, no hand-over and no release.
So the store tells it a grant once the grant is made (`Grants.journal_grant`), a wait once
the request first sleeps and how it ended (`operations.LockWait`), and a release that
removed a grant made. Reclaims and pass-overs happen inside other recipes, and reach it
through the line's operations (`operations.py`). One write per record; nothing at all when
the journal is off. Records no lock change writes (a deadlock, a denied write) go through
`append`.
"""

from __future__ import annotations

import time
from typing import Final

from ..journal.causes import abandoned_wait_outcome, operator_cause
from ..journal.files import JournalFiles
from ..journal.record import (
    GRANT,
    GRANTED,
    HAND_OVER,
    OPERATOR_RELEASE,
    PASS_OVER,
    RECLAIM,
    RELEASE,
    TIMED_OUT,
    UPGRADE,
    WAIT_BEGIN,
    WAIT_END,
    JournalRecord,
    LockLines,
    process_session,
)
from ..liveness import ProcessIdentity, current_process
from ..records import Reclamation, WaiterRecord

_MAX_GRANT_TIMES: Final = 4096


class LockJournal:
    """The lock-path records of one store (namespace `namespace`), written by `writer`."""

    def __init__(self, writer: JournalFiles, namespace: str, turn_timeout: float) -> None:
        self._writer = writer
        self._namespace = namespace
        self._turn_timeout = turn_timeout
        self._lines: tuple[ProcessIdentity, LockLines] | None = None
        """This process's encoder of the records (a forked child makes its own: the records
        name the process)."""
        self._since: dict[str, float] = {}
        """grant token -> when it was granted, for the grants made here: the `held` of their
        release (a hint: dropped when it grows past bounds, or the grant is released
        elsewhere, which reads the time from the holder's record)."""

    def granted(
        self, token: str | None, agent: str, key: str, mode: str | None = None, *,
        waited: bool = False, read_since: float | None = None,
    ) -> None:  # fmt: skip
        """Grant `token` of `key` was made for `agent` (`mode` "shared": a shared hold,
        recorded as the grant's outcome): at once, or handed over at the end of a wait
        (`waited`: the lock passed from its holder, or from nobody, to this waiter; the
        releaser's record is just before). `read_since`: the grant absorbed the agent's
        read of `key`, granted then (an upgrade: one hold, held from the read's grant)."""
        now = time.time()
        if token is not None:
            self._since_now(token, now if read_since is None else read_since)
        if read_since is not None:
            mode = UPGRADE
        self._line(HAND_OVER if waited else GRANT, agent, key, at=now, outcome=mode)

    def wait_began(self, agent: str, key: str) -> float:
        """`agent` begins to wait for `key`; when (for `wait_ended`)."""
        now = time.time()
        self._line(WAIT_BEGIN, agent, key, at=now)
        return now

    def wait_ended(self, agent: str, key: str, began: float, granted: bool | None) -> None:
        """A wait begun at `began` ended: granted (its grant is recorded just before),
        timed out (False), or interrupted (None: cancelled, or given way as a deadlock's
        victim)."""
        now = time.time()
        outcome = (
            abandoned_wait_outcome(agent) if granted is None else GRANTED if granted else TIMED_OUT
        )
        self._line(WAIT_END, agent, key, outcome=outcome, waited=max(now - began, 0.0), at=now)

    def released(
        self,
        token: str,
        agent: str,
        key: str,
        acquired_at: float | None = None,
        namespace: str | None = None,
    ) -> None:
        """Grant `token` of `key` (in `namespace`, default the store's) was released:
        `acquired_at` when it was granted, if not here. An operator's release (inside
        `journal.causes.operator_release`) names the operator."""
        since = self._since.pop(token, acquired_at)
        now = time.time()
        held = None if since is None else max(now - since, 0.0)
        operator = operator_cause()
        if operator is not None:
            self._record(OPERATOR_RELEASE, agent, key, namespace, now, held=held, other=operator)
        elif namespace is None or namespace == self._namespace:
            self._line(RELEASE, agent, key, held=held, at=now)
        else:
            self._record(RELEASE, agent, key, namespace, now, held=held)

    def reclaimed(self, reclaimed: Reclamation) -> None:
        """A provably dead holder's lock was taken back (the reason is the proof)."""
        holder = reclaimed.holder
        self._record(
            RECLAIM, holder.agent_id, holder.lock_path, holder.namespace, reclaimed.reclaimed_at,
            held=max(reclaimed.reclaimed_at - holder.acquired_at, 0.0),
            other=reclaimed.reclaimed_by_agent, reason=reclaimed.reason,
        )  # fmt: skip

    def passed_over(self, waiter: WaiterRecord) -> None:
        """A first waiter left its turn at the free lock untaken past the turn's time."""
        self._record(
            PASS_OVER, waiter.agent_id, waiter.lock_path, waiter.namespace, time.time(),
            reason=f"it left its turn at the free lock untaken for over {self._turn_timeout:g}s",
        )  # fmt: skip

    def append(self, record: JournalRecord) -> None:
        """Append a record no lock change of the store writes (a deadlock, a denied write),
        stamped with this process's session when it has none (left to the store by its
        maker). Never raises (journal/files.py says what happens when it cannot write)."""
        if not record.session:
            me = current_process()
            record.session = process_session(me.pid, me.start_time)
            record.pid, record.host = me.pid, me.host
        self._writer.append(record)

    def _since_now(self, token: str, now: float) -> None:
        if len(self._since) >= _MAX_GRANT_TIMES:
            self._since.clear()
        self._since[token] = now

    def _line(
        self, kind: str, agent: str, key: str, *, at: float,
        waited: float | None = None, held: float | None = None, outcome: str | None = None,
    ) -> None:  # fmt: skip
        """One record of the store's namespace, in the lines cached for this process."""
        me = current_process()
        lines = self._lines
        if lines is None or lines[0] is not me:
            session = process_session(me.pid, me.start_time)
            lines = self._lines = (me, LockLines(self._namespace, session, me.pid, me.host))
        self._writer.append_line(
            lines[1].line(at, kind, agent, key, waited=waited, held=held, outcome=outcome)
        )

    def _record(
        self, kind: str, agent: str, key: str, namespace: str | None, at: float, **more: object
    ) -> None:
        """A rarer record (a reclaim, a pass-over, an operator's release), in any namespace."""
        me = current_process()
        self._writer.append(
            JournalRecord(at, kind, namespace or self._namespace, agent, key,
                          process_session(me.pid, me.start_time), me.pid, me.host,
                          **more)  # type: ignore[arg-type]
        )  # fmt: skip
