"""The operator tools that only the admin sandbox may call: `lock_overview` and
`lock_force_release`.

A force-release needs a reason. The reason is logged on the host and told to the holder: the
holder's next lock tool result carries it in a `notices` list, so the agent that lost the lock
learns why instead of editing on without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, TypeVar

from pydantic import BaseModel, ConfigDict, StrictStr, StringConstraints, ValidationError

from ....core.events import LockEvent, LockEventType
from ....core.ports import EmitLockEvent, deliver
from ...lockstore import CorruptRecordError, LockBackend, store_call
from ...tools.lock_tools import STORE_ERRORS, ToolOutcome, ToolSpec
from ...tools.tool_inputs import MAX_PATH_LENGTH, InvalidToolInputError

log = logging.getLogger("lockyard.ipc.host")

OVERVIEW_TOOL: Final = "lock_overview"
FORCE_RELEASE_TOOL: Final = "lock_force_release"
MAX_REASON_CHARS: Final = 500

STATUS_SPEC: Final = ToolSpec(
    OVERVIEW_TOOL,
    "Operator tool: every lock of the lock directory (holder, age, whether the holder is "
    "alive, waiters in order) and every sandbox this host serves (alive, last seen).",
    {"type": "object", "properties": {}, "additionalProperties": False},
)
FORCE_RELEASE_SPEC: Final = ToolSpec(
    FORCE_RELEASE_TOOL,
    "Operator tool: release a lock that another agent holds. Give the reason: it is logged "
    "on the host and shown to the holder with its next lock tool result. Use it only for a "
    "lock that blocks others and whose holder will not give it back.",
    {
        "type": "object",
        "properties": {
            "filepath": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_PATH_LENGTH,
                "description": "The locked file (as lock_overview lists it, or repo-relative).",
            },
            "reason": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_REASON_CHARS,
                "description": "Why, in one sentence; the holder is told.",
            },
        },
        "required": ["filepath", "reason"],
        "additionalProperties": False,
    },
)
OPERATOR_SPECS: Final[tuple[ToolSpec, ...]] = (STATUS_SPEC, FORCE_RELEASE_SPEC)
OPERATOR_TOOL_NAMES: Final[tuple[str, ...]] = (OVERVIEW_TOOL, FORCE_RELEASE_TOOL)


class _StatusInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _ForceReleaseInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    filepath: Annotated[StrictStr, StringConstraints(min_length=1, max_length=MAX_PATH_LENGTH)]
    reason: Annotated[
        StrictStr,
        StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_REASON_CHARS),
    ]


M = TypeVar("M", bound=BaseModel)

TellHolder = Callable[[str, Mapping[str, Any]], bool]
"""Queue a notice for an agent this host serves; False when the agent is not one of ours."""


class OperatorTools:
    """`lock_overview` and `lock_force_release` for the admin sandbox `admin`."""

    def __init__(
        self,
        store: LockBackend,
        admin: str,
        sandboxes: Callable[[], list[dict[str, Any]]],
        tell_holder: TellHolder,
        emit_lock_event: EmitLockEvent | None = None,
    ) -> None:
        self.store = store
        self.admin = admin
        self._sandboxes = sandboxes
        self._tell_holder = tell_holder
        self._emit = emit_lock_event

    async def call(self, tool: str, arguments: object) -> ToolOutcome:
        try:
            if tool == OVERVIEW_TOOL:
                parse_arguments_plain(tool, _StatusInput, arguments)
                locks = await store_call(self.store, self.locks)
                return ToolOutcome.success({"locks": locks, "sandboxes": self._sandboxes()})
            request = parse_arguments_plain(tool, _ForceReleaseInput, arguments)
            key, holder, released = await store_call(
                self.store, self._release_whoever_holds, request.filepath
            )
            outcome = self._forced(key, holder, released, request.reason)
            if outcome["released"]:  # the deadlock monitor must not keep a hold that is gone
                event = LockEvent(
                    event_type=LockEventType.RELEASED,
                    agent_id=outcome["holder"],
                    lock_path=outcome["filepath"],
                )
                await deliver(self._emit, event)
            return ToolOutcome.success(outcome)
        except InvalidToolInputError as exc:
            return ToolOutcome.error(str(exc))
        except STORE_ERRORS as exc:
            return ToolOutcome.error(f"{tool} failed: {exc}. Nothing was changed.")

    def locks(self) -> list[dict[str, Any]]:
        """Every lock of the store, as `lock_overview` shows it."""
        locks = []
        for info in self.store.list_locks():
            holder = info.holder
            locks.append(
                {
                    "filepath": info.lock_path,
                    "namespace": info.namespace,
                    "holder": None if holder is None else holder.agent_id,
                    "age_seconds": None if info.age_seconds is None else round(info.age_seconds, 1),
                    "alive": info.liveness,
                    "waiters": [waiter.agent_id for waiter in info.waiters],
                    "problem": info.problem,
                }
            )
        return locks

    def _release_whoever_holds(self, filepath: str) -> tuple[str, str | None, bool]:
        """The lock's key, its holder, and whether it was released: the store's part, one
        trip to a worker thread on a store that waits on a server."""
        key = self.store.canonicalize(filepath)
        try:
            holder = self.store.holder(key)
        except CorruptRecordError:
            holder = None
        return key, holder, holder is not None and self.store.release(key, holder)

    def _forced(self, key: str, holder: str | None, released: bool, reason: str) -> dict[str, Any]:
        if released and holder is not None:
            log.warning(
                "force-released %s held by %s (by admin sandbox %s): %s",
                key, holder, self.admin, reason,
            )  # fmt: skip
            told = self._tell_holder(
                holder,
                {
                    "kind": "force_released",
                    "filepath": key,
                    "by": self.admin,
                    "reason": reason,
                    "message": (
                        f"Your lock on {key} was released by the operator ({self.admin}): "
                        f"{reason}. Do not edit it until you lock it again."
                    ),
                },
            )
        else:
            told = False
        return {
            "released": released,
            "filepath": key,
            "holder": holder,
            "reason": reason,
            "holder_told": told,
        }


def parse_arguments_plain(tool: str, model: type[M], arguments: object) -> M:
    """Validate operator tool arguments, or InvalidToolInputError with a fixed text."""
    if arguments is None:
        arguments = {}
    if isinstance(arguments, Mapping):
        try:
            return model.model_validate(dict(arguments))
        except ValidationError:
            pass
    example = (
        "{}" if tool == OVERVIEW_TOOL else '{"filepath": "src/app.py", "reason": "holder is stuck"}'
    )
    raise InvalidToolInputError(
        f"{tool} rejected its arguments. Nothing was changed. Call it again like {example}."
    )
