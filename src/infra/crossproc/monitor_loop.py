"""`lockyard monitor`: deadlock detection across processes, from the lock directory alone.

Each pass reads who holds and who waits from the lock directory (lock records and queue
entries), rebuilds the shared `DeadlockMonitor` from it, finds every cycle, re-checks each
cycle against a fresh read of the directory (`verify_cycle`), and resolves it softly: a victim
notice is posted for the victim, whose pending `lock_acquire` (in whatever process) returns the
deadlock result. Passes run when the lock directory changes (inotify), with a periodic rescan
as backstop, or by polling where inotify is unavailable.

The same `DeadlockMonitor` and victim policy as an orchestrator's in-process monitor are used,
so both pick the same cycle and victim from the same state. Agent ages come from the lock
records (see `WaitForSnapshot.agent_start_times`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from ...core.deadlock_info import DeadlockInfo
from ...domain.monitor import DeadlockMonitor
from ...domain.victim import VictimPolicy
from .deadlock_text import readable
from .idle_policy import Revocation, revoke_stalls
from .notices import VictimNotice
from .sources import MonitorSource
from .sources.lockdir import LockDirSource
from .state import WaitForSnapshot

log = logging.getLogger("lockyard.monitor")

RESCAN_SECONDS = 2.0
"""Even with push wake-ups, rescan this often: covers lost events and dying processes."""


@dataclass(frozen=True)
class Resolution:
    """One deadlock the monitor found, and the notice it posted (None if it did not)."""

    deadlock: DeadlockInfo
    notice: VictimNotice | None

    def to_dict(self) -> dict[str, object]:
        return {
            "deadlock": self.deadlock.to_dict(),
            "summary": readable(self.deadlock),
            "victim": self.deadlock.victim,
            "notice_posted": self.notice is not None,
        }


@dataclass
class PassReport:
    """What one pass over the lock directory found and did."""

    resolutions: list[Resolution] = field(default_factory=list)
    stale_notices_removed: list[str] = field(default_factory=list)
    revocations: list[Revocation] = field(default_factory=list)
    """Holders whose locks the idle limit revoked (leader only; see idle_policy.py)."""
    holds: int = 0
    waits: int = 0
    leader: bool = True
    """False when this monitor did not lead (another process does, or --no-resolve): it
    found the cycles but posted nothing."""
    resolving: bool = True
    """False for a monitor that only reports (--no-resolve)."""
    resolved_by: str | None = None
    """Who leads instead, in words, when this monitor found deadlocks but did not lead."""

    def to_dict(self) -> dict[str, object]:
        return {
            "deadlocks": [resolution.to_dict() for resolution in self.resolutions],
            "stale_notices_removed": self.stale_notices_removed,
            "revocations": [revocation.to_dict() for revocation in self.revocations],
            "holds": self.holds,
            "waits": self.waits,
            "leader": self.leader,
            "resolving": self.resolving,
            "resolved_by": self.resolved_by,
        }


class CrossProcessMonitor:
    """Finds and softly resolves deadlocks among every agent of one lock directory."""

    def __init__(
        self,
        lock_dir: Path | None = None,
        *,
        resolve: bool = True,
        victim_policy: VictimPolicy | None = None,
        source: MonitorSource | None = None,
    ) -> None:
        if source is None:
            if lock_dir is None:
                raise ValueError("pass a lock directory or a source")
            # A monitor that resolves nothing writes nothing, not even the directory's mode.
            source = LockDirSource(Path(lock_dir), read_only=not resolve)
        elif lock_dir is not None:
            raise ValueError("pass either a lock directory or a source, not both")
        self.source: MonitorSource = source
        self.location = self.source.location
        self.state = self.source.state
        self.board = self.source.board
        self.resolve = resolve
        self._victim_policy = victim_policy
        self._monitor = self._new_monitor()
        self._reported: dict[str, tuple[str, str | None]] = {}  # victim -> (lock, wait id)
        self._registered: set[str] = set()
        self._fresh: WaitForSnapshot | None = None  # the verification read of this pass
        self._leading = True

    def _new_monitor(self) -> DeadlockMonitor:
        return DeadlockMonitor(victim_policy=self._victim_policy, verify_cycle=self._verify)

    def _verify(self, info: DeadlockInfo) -> bool:
        """Re-read the lock directory: is every hold and wait of the cycle still real?

        One fresh read serves every cycle of a pass: it is taken after detection, which is
        what the re-check needs, and a pass that finds many cycles stays two reads long.
        """
        if self._fresh is None:
            self._fresh = self.state.read()
        return self._fresh.has_cycle(info)

    async def check_once(self) -> PassReport:
        """One pass: read, detect, verify, post notices, remove stale ones; then, when the
        store has an idle limit, revoke the locks of holders idle past it while others wait."""
        snapshot = self.state.read()
        self._fresh = None
        report = PassReport(
            holds=len(snapshot.holds), waits=len(snapshot.waits), resolving=self.resolve
        )
        # Only a resolving monitor stands for leader: one that reports only must never keep
        # the processes that would resolve from leading.
        report.leader = self.resolve and self.source.lead()
        if report.leader:  # --no-resolve reports only: it changes nothing on disk
            report.stale_notices_removed = self.board.prune(
                lambda notice: snapshot.has_wait(notice.agent_id, notice.waits_on, notice.wait_id)
            )
        self._leading = report.leader
        self._forget_finished_victims(snapshot)
        self._sync_agents(snapshot)
        self._monitor.rebuild(snapshot.holders(), snapshot.wait_pairs())
        for info in await self._monitor.check_all():
            resolution = self._settle(info, snapshot)
            if resolution is not None:
                report.resolutions.append(resolution)
        if report.resolutions and self.resolve and not report.leader:
            report.resolved_by = self.source.who_leads()
        if report.leader:  # the leader alone, so a stall is revoked once
            limit = self.source.store.idle_limit()
            if limit is not None:
                whose = (
                    "the lock directory's"
                    if isinstance(self.source, LockDirSource)
                    else "the database's"
                )
                report.revocations = revoke_stalls(
                    self.source.store, snapshot, limit, time.time(), whose=whose
                )
        return report

    def _forget_finished_victims(self, snapshot: WaitForSnapshot) -> None:
        """A victim whose noticed wait is over is no victim any more, even if it waits again
        (a retry is a new wait): start from a fresh monitor so its new cycles are reported."""
        finished = [
            agent
            for agent, (lock, wait_id) in self._reported.items()
            if not snapshot.has_wait(agent, lock, wait_id)
        ]
        for agent in finished:
            del self._reported[agent]
        if finished:
            self._monitor = self._new_monitor()
            self._registered = set()

    def _sync_agents(self, snapshot: WaitForSnapshot) -> None:
        """Register every holding agent with its age (see state.py); forget the others, so a
        long-running monitor does not accumulate every agent id it ever saw."""
        starts = snapshot.agent_start_times()
        for agent in self._registered - starts.keys():
            self._monitor.unregister_agent(agent)
        for agent, start in starts.items():
            self._monitor.register_agent(agent, start_time=start)
        self._registered = set(starts)

    def _settle(self, info: DeadlockInfo, snapshot: WaitForSnapshot) -> Resolution | None:
        """Post the victim's notice; None if this very wait was already reported by us."""
        wait = (info.victim_waits_on, snapshot.wait_id(info.victim, info.victim_waits_on))
        if self._reported.get(info.victim) == wait:
            return None
        self._reported[info.victim] = wait
        log.info("deadlock: %s; victim %s", readable(info), info.victim)
        if not self.resolve or not self._leading:
            return Resolution(info, None)
        current = self.board.read(info.victim)
        if current is not None and (current.waits_on, current.wait_id) == wait:
            return Resolution(info, None)  # another monitor posted it already
        notice = VictimNotice(
            agent_id=info.victim, waits_on=wait[0], wait_id=wait[1], deadlock=info
        )
        self.board.post(notice)
        log.info("posted a victim notice for %s", info.victim)
        return Resolution(info, notice)

    async def run(
        self,
        on_report: Callable[[PassReport], Awaitable[None] | None],
        *,
        poll_interval: float = 0.5,
        rescan_seconds: float = RESCAN_SECONDS,
        while_leading: bool = False,
    ) -> None:
        """Pass after pass until cancelled; `on_report` gets every pass that did something.

        `while_leading`: return after the first pass that finds this monitor no longer
        leads (a candidate of the election then goes back to trying)."""
        with self.source.feed(poll_interval) as watcher:
            log.info(
                "watching %s (%s)",
                self.location,
                "push" if watcher.pushing else f"polling every {poll_interval:g} s",
            )
            while True:
                self.source.check_present()
                started = time.monotonic()
                report = await self.check_once()
                if while_leading and not report.leader:
                    return
                took = time.monotonic() - started
                if report.resolutions or report.stale_notices_removed or report.revocations:
                    outcome = on_report(report)
                    if outcome is not None:
                        await outcome
                finished = time.monotonic()
                if await watcher.changed(rescan_seconds):
                    # Under constant churn, rest at least as long as a pass takes: the monitor
                    # then uses at most half a core on a big lock directory, and on a small
                    # one (passes of a millisecond) this costs no latency at all.
                    await anyio.sleep(max(0.0, took - (time.monotonic() - finished)))
