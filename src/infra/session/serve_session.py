"""What `lockyard serve` does for an agent CLI session when no agent id is given: derive the
id from the CLI process, name that process in the lock records, and register the session."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ..lockstore import ProcessIdentity, boottime_offset_ticks, current_process
from .process_tree import ProcessRef
from .registry import SessionRecord, SessionRegistry, new_record
from .session_ids import server_anchor, session_agent_id


@dataclass(frozen=True)
class DerivedSession:
    """A session's anchor and agent id before anything is served."""

    agent_id: str
    cli: str
    anchor: ProcessRef

    @property
    def owner(self) -> ProcessIdentity:
        """The CLI process as the lock records name it: the session's locks live as long as it.
        Its start time is stored as the store stores its own: without this process's
        boot-time offset (none where it is unknown, as for the store's own records)."""
        offset = boottime_offset_ticks()
        start = None if offset is None else self.anchor.start_time - offset
        return dataclasses.replace(current_process(), pid=self.anchor.pid, start_time=start)


def derive_session(cli: str) -> DerivedSession:
    """The session of the CLI that started this server (SessionIdError if none)."""
    anchor = server_anchor()
    return DerivedSession(session_agent_id(cli, anchor), cli, anchor)


def register_session(session: DerivedSession, lock_dir: Path, repo: str) -> SessionRecord:
    """Publish the session so the CLI's hooks (and `lockyard status`) find it."""
    registry = SessionRegistry(lock_dir)
    registry.remove_closed()
    record = new_record(session.agent_id, session.cli, session.anchor, repo)
    registry.register(record)
    return record


def unregister_session(record: SessionRecord, lock_dir: Path) -> None:
    SessionRegistry(lock_dir).unregister(record)
