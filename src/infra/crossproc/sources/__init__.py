"""What `lockyard monitor` and `lockyard status` read and write, whatever the backend.

A `MonitorSource` bundles, for one backend: the shared state (holds and waits of every
agent), the board victim notices are posted on, a feed that says when to look again, and its
candidacy in the election of the one process that resolves deadlocks (`lead`, `resign`,
`who_leads`; `election.py` runs it in every `lockyard serve`).
The backends' sources sit side by side: `lockdir.LockDirSource` and `postgres.PgMonitorSource`
(loaded only for a PostgreSQL store: it imports psycopg).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ....core.ports import VictimNotices
from ...lockstore import LockBackend, LockStore
from ..notices import VictimNotice
from ..state import WaitForSnapshot

__all__ = [
    "ChangeFeed",
    "MonitorSource",
    "NoticeBoard",
    "SharedState",
    "monitor_source",
    "victim_notices_for",
]


class NoticeBoard(Protocol):
    def post(self, notice: VictimNotice) -> object: ...
    def read(self, agent_id: str) -> VictimNotice | None: ...
    def notices(self) -> list[VictimNotice]: ...
    def prune(self, still_waiting: Callable[[VictimNotice], bool]) -> list[str]: ...


class ChangeFeed(Protocol):
    @property
    def pushing(self) -> bool: ...
    def __enter__(self) -> ChangeFeed: ...
    def __exit__(self, *exc: object) -> None: ...
    async def changed(self, max_wait: float) -> bool: ...


class SharedState(Protocol):
    def read(self) -> WaitForSnapshot: ...


class MonitorSource(Protocol):
    @property
    def state(self) -> SharedState: ...
    @property
    def store(self) -> LockBackend:
        """The store the leader acts on (the idle limit: its setting, stamps and revokes)."""
        ...

    @property
    def board(self) -> NoticeBoard: ...

    @property
    def location(self) -> str: ...
    def feed(self, poll_interval: float) -> ChangeFeed: ...
    def check_present(self) -> None:
        """Raise a LockStoreError when the backend went away (the monitor then stops)."""
        ...

    def lead(self) -> bool:
        """True while this monitor is the one that resolves deadlocks: leads if nobody does."""
        ...

    def resign(self) -> None:
        """Stop leading, so that another candidate takes over at once (no-op if not leading)."""
        ...

    def who_leads(self) -> str | None:
        """Who resolves deadlocks here now, in words (None: nobody)."""
        ...

    def victim_notices(self) -> VictimNotices:
        """What an agent's waiting call listens to for notices posted on this board."""
        ...


def monitor_source(
    store: LockBackend, *, role: str = "lockyard monitor", own_reader: bool = False
) -> MonitorSource:
    """What `lockyard monitor` / `status` read and write for the backend `store` is on.

    `role` says who this candidate is when it leads. `own_reader`: read a lock directory
    through a store of the source's own (for a monitor in another thread than `store`'s
    users); a PostgreSQL store is shared either way (its session serialises calls).
    """
    if isinstance(store, LockStore):
        from .lockdir import LockDirSource

        return LockDirSource(store.lock_dir, None if own_reader else store, role=role)
    from ...lockstore.postgres import PgLockStore
    from .postgres import PgMonitorSource

    if isinstance(store, PgLockStore):
        return PgMonitorSource(store)
    raise TypeError(f"no cross-process monitoring for {type(store).__name__}")


def victim_notices_for(store: LockBackend) -> VictimNotices:
    """Where an agent on `store` hears that `lockyard monitor` chose it as a victim."""
    return monitor_source(store).victim_notices()
