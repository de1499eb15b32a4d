"""One live server per agent id: `<lock dir>/agents/<hash>.lock/<token>` names the process
that serves an agent id.

Locks belong to agent ids, so two live processes under one id would both be granted the same
file and could release each other's locks. `lockyard serve` claims its id before serving and
gives the claim back when it ends. A claim is published and removed exactly like a lock (an
atomic rename of a staging directory; removal by token), so of two servers starting at once
exactly one wins, and a claim left by a crashed server is replaced only on proof that its
process is dead.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Final

from ..lockstore import (
    CorruptRecordError,
    HolderRecord,
    Liveness,
    LockDir,
    current_process,
    decode_holder,
    encode_holder,
    new_token,
)

AGENTS_DIR: Final = "agents"


class AgentIdInUseError(Exception):
    """Another live process already serves this agent id."""

    def __init__(self, agent_id: str, holder: HolderRecord | None) -> None:
        where = "another process" if holder is None else f"process {holder.pid} on {holder.host}"
        super().__init__(f"agent id {agent_id!r} is already served by {where}")
        self.agent_id = agent_id
        self.holder = holder


class AgentClaim:
    """This process's claim on one agent id in one lock directory."""

    def __init__(self, lock_dir: Path, agent_id: str) -> None:
        self.agent_id = agent_id
        self._dir = LockDir(Path(lock_dir) / AGENTS_DIR)
        self._name = hashlib.sha256(agent_id.encode()).hexdigest()[:32]
        self._token = ""

    def acquire(self) -> AgentClaim:
        """Claim the id; AgentIdInUseError when a live (or not provably dead) process has it."""
        token = new_token()
        record = encode_holder(current_process(), self.agent_id, token, self.agent_id, "serve")
        for _attempt in range(8):
            if self._dir.publish(self._name, token, record):
                self._token = token
                return self
            found = self._dir.read_lock(self._name)
            if found is None:
                continue  # released meanwhile: try again
            try:
                holder = decode_holder(found[1], f"{AGENTS_DIR}/{self._name}")
            except CorruptRecordError:
                raise AgentIdInUseError(self.agent_id, None) from None
            if holder.liveness()[0] is not Liveness.DEAD:
                raise AgentIdInUseError(self.agent_id, holder)
            self._dir.remove_lock(self._name, found[0])  # a crashed server's: by its token only
        raise AgentIdInUseError(self.agent_id, None)

    def release(self) -> None:
        """Give the id back (only our own claim; a no-op when not held)."""
        if self._token:
            self._dir.remove_lock(self._name, self._token)
            self._token = ""
        self._dir.close()

    def __enter__(self) -> AgentClaim:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()
