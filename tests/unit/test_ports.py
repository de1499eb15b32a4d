import pytest

from lockyard.core.events import LockEvent, LockEventType
from lockyard.core.ports import deliver

EVENT = LockEvent(event_type=LockEventType.ACQUIRED, agent_id="a", lock_path="/r/f")


@pytest.mark.anyio
async def test_deliver_calls_sync_and_async_sinks_and_tolerates_none() -> None:
    seen: list[tuple[str, LockEvent]] = []

    def sync_sink(event: LockEvent) -> None:
        seen.append(("sync", event))

    async def async_sink(event: LockEvent) -> None:
        seen.append(("async", event))

    await deliver(sync_sink, EVENT)
    await deliver(async_sink, EVENT)
    await deliver(None, EVENT)
    assert seen == [("sync", EVENT), ("async", EVENT)]
